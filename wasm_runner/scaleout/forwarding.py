"""The internal hop: a session call or a download that reaches a replica which does not hold it is
passed to the replica that does, signed with the cluster secret (``signing.py``).

Passing on. A session call (describe, delete, run, the streaming run) or a download arrives at
replica B. B authenticates the caller and counts its rate as for any call, then asks the directory
(``directory.py``) who holds the id (``Forwarding.session_owner``, ``download_owner``). If another
replica A does and the tenant is the caller's, B sends the request on to A's ``advertise_url``
with the client's body, content type and Host, without the client's API key, and with the signed
headers (``Forwarding.headers``: the tenant, the user inside it and the client's address, signed); the HTTP face relays A's answer as it arrives
(``http.relay``). A runs the call as if it were local, for the same user: admission (the user's lease too), the
tenant check (another key: ``404``), the audit log and the metrics are A's. A connection A refuses or does not accept within
``CONNECT_TIMEOUT_SECONDS`` (1 s), or a replica that now runs a different process than the
directory names, means the session is lost: ``410 session_lost`` (a link: ``410 download_lost``,
``lost``) at once, and its directory entry becomes a tombstone (``mark_lost``), so every later call
for it gets the same ``410`` at once until it would have expired.
An id the directory has no entry for is answered here (``404`` when this replica does not hold
it either), except while the directory is being rebuilt after Redis lost its keys: then the
lookup raises ``directory.DirectoryRebuilding`` (``503 directory_rebuilding`` with
``Retry-After``), since the session may be open on a replica that has not announced it yet.

Receiving (``Forwarding.check``). Any request carrying a header that starts with
``X-Wasm-Runner-Internal-`` must be one of the forwardable calls (``kind_of``), signed as
``signing.Signer.check`` demands; otherwise it is refused (the HTTP face's ``InternalGuard``
answers ``403 internal_forbidden`` and audits it). A valid hop that names another process than
this one (the owner restarted at this address) gets the ``410`` of ``lost_here``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ..execution import Refused
from ..sessions import Entry
from .directory import Directory
from .signing import H_REPLICA, InternalCall, Signer

__all__ = ["CONNECT_TIMEOUT_SECONDS", "Forwarding", "kind_of", "lost"]

CONNECT_TIMEOUT_SECONDS = 1.0  # an owner that does not accept within this is gone
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what session ids and link tokens look like

# the calls a hop may carry, and what a lost owner means for each
_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("GET", re.compile(r"/api/sessions/[^/]+"), "session"),
    ("DELETE", re.compile(r"/api/sessions/[^/]+"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/run"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/run/stream"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/fork"), "session"),
    ("GET", re.compile(r"/api/sessions/[^/]+/snapshot"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/save"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/hand-over"), "session"),  # a replica's own, never a client's
    ("GET", re.compile(r"/api/files/[^/]+"), "download"),
)
_LOST = {
    "session": (
        410, "session_lost",
        "the replica that held this session is gone, and the session's variables and files with "
        "it; open a new session",
    ),
    "download": (
        410, "download_lost",
        "the replica that held this file is gone; run the code again for a new link",
    ),
}  # fmt: skip


def kind_of(method: str, path: str) -> str | None:
    """``session`` or ``download`` for a call a hop may carry, else None."""
    for m, pattern, kind in _ROUTES:
        if m == method and pattern.fullmatch(path):
            return kind
    return None


def lost(kind: str) -> Refused:
    """The ``410`` for a session (``kind`` ``session``) or link (``download``) whose owner is gone."""
    status, code, message = _LOST[kind]
    return Refused(status, code, message)


class Forwarding:
    """This replica's side of the hop: who holds a session or link, the headers of a call passed
    on, and the check of a call passed here.

    ``enabled`` only with a shared directory and a cluster secret (``signer``); ``holds`` says
    whether a session id is open in this replica's own store."""

    def __init__(self, directory: Directory, holds: Callable[[str], bool], signer: Signer | None) -> None:
        self.directory = directory
        self.holds = holds
        self.signer = signer
        self.enabled = directory.shared and signer is not None

    @property
    def replica_id(self) -> str:
        return self.directory.replica_id

    # -- passing on ------------------------------------------------------------------------
    async def session_owner(self, session_id: str, tenant: str) -> Entry | None:
        """The entry of the replica holding ``session_id`` for ``tenant``, or None to answer
        here (the session is here, unknown, or another tenant's)."""
        if not self.enabled or self.holds(session_id) or not _ID.fullmatch(session_id):
            return None
        entry = await self.directory.session(session_id)
        if entry is None or entry.tenant != tenant:
            return None  # unknown here and everywhere, or another key's: 404 as for a local id
        if entry.replica == self.replica_id:
            await self.directory.forget_session(session_id)  # stale: this process lost it
            return None
        return entry

    async def download_owner(self, token: str) -> Entry | None:
        """The entry of the replica holding the link ``token``, or None to answer here."""
        if not self.enabled or not _ID.fullmatch(token):
            return None
        entry = await self.directory.download(token)
        if entry is None or entry.replica == self.replica_id:
            return None
        return entry

    def restarted_here(self, entry: Entry) -> bool:
        """Whether ``entry``'s owner is this replica's own address (it restarted: this process is
        the new one, and what the entry names is gone)."""
        return entry.owner == getattr(self.directory, "owner", None)

    async def mark_lost(self, kind: str, key_id: str, entry: Entry) -> None:
        """Replace the entry of a lost session or link by a tombstone."""
        await self.directory.mark_lost(kind, key_id, entry)

    def headers(
        self, *, method: str, target: str, tenant: str, client: str, entry: Entry, body: bytes,
        user: str | None = None, user_token: bool = False,
    ) -> dict[str, str]:
        """The signed internal headers of a call passed on to ``entry``'s owner, for ``tenant``
        and its ``user`` (an id or None; ``user_token``: named by a signed token)."""
        assert self.signer is not None
        return self.signer.headers(method=method, target=target, tenant=tenant, client=client,
                                   replica=entry.replica, body=body, user=user,
                                   user_token=user_token)  # fmt: skip

    # -- receiving -------------------------------------------------------------------------
    def check(self, method: str, path: str, target: str, headers: Mapping[str, str], body: bytes) -> InternalCall | str:
        """The hop this request is, or why it is refused (a short reason for the log)."""
        if kind_of(method, path) is None:
            return "not a forwardable call"
        if self.signer is None:
            return "this replica has no cluster secret"
        return self.signer.check(method, target, headers, body)

    def lost_here(self, method: str, path: str, headers: Mapping[str, str]) -> Refused | None:
        """``410`` when a signed hop names another process than this one (the owner the
        directory knew restarted at this address: its sessions and links are gone)."""
        if headers.get(H_REPLICA) == self.replica_id:
            return None
        return lost(kind_of(method, path) or "session")
