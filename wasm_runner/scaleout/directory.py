"""Where a session or a download link lives, so every replica can find it: the session directory
and the download-token directory.

One host (no ``redis_url``): nothing to share. ``LocalDirectory`` knows nothing beyond this
process: a session or a link is either in this replica's own store or unknown (404), as before.

Several replicas (``redis_url``): ``RedisDirectory`` keeps one Redis key per open session and per
download link, naming its owner (the replica's ``advertise_url`` and the ``replica_id`` of the
process that holds it) and its tenant::

    wasm-runner:session:<id>      {"owner": "http://10.0.0.5:8000", "replica": "…", "tenant": "…",
                                   "saved": {"writer": "…", "saved_calls": 3, "calls": 3, …}}
    wasm-runner:download:<token>  the same, for a file link (no "saved")

A session's ``saved`` (``sessions.Saved``) records its stored snapshot (``sessions.paused``): whose
folder it is in, the calls it includes and the calls made, and what another replica needs to
resume it (profile, runtime, limits, when it opened). When the owner is lost, the replica that
gets the next call takes the entry over (``take_over``: a compare-and-set, one replica wins) and
resumes the session from that snapshot (``http.relay``, ``sessions.SessionRecovery``).

A session's key lives as long as the session may (``LiveSession.expires_in``: the sooner of its
idle and lifetime expiry, plus ``GRACE_SECONDS``) and is written again after every call and every snapshot (one SET); it is written
when the session opens and deleted when it closes (a ``DELETE``, a limit that ended it, expiry,
drain or shutdown), through the session store's listener (``sessions.SessionListener``). A link's
key lives ``download_ttl_seconds``. A replica that dies leaves keys behind; they expire on their
own, and the first call that finds the owner gone replaces the key by a tombstone for the rest of
its life (``forwarding.py``: ``410`` at once for every later call too, without trying the owner).

A Redis that restarts empty (or is flushed) loses the keys. A missing key then does not mean a
missing session, so a lookup that finds none must not say ``404`` before every replica has written
its entries again. The directory has an epoch::

    wasm-runner:directory:epoch       a random value, never expiring: gone means the keys were lost
    wasm-runner:directory:rebuilding  set for ``REBUILD_SECONDS`` when a replica finds a new epoch
    wasm-runner:directory:<replica>   this replica's marker (``REPUBLISH_SECONDS`` x 3)

Every replica checks, at start and every ``REPUBLISH_SECONDS`` (at once when Redis answers again
after failing, or a lookup finds the epoch changed), the epoch it last published under
(``keep_published``): one script creates the epoch when it is missing and, when it differs from
the one this replica knew, opens the rebuild window; the replica then writes every entry of its
open sessions and live links again and the marker, and knows the new epoch. Every live replica
does so within ``REPUBLISH_SECONDS`` of the first that noticed, so the window
(``REBUILD_SECONDS``, 2 x ``REPUBLISH_SECONDS`` + 2) outlasts the rebuild. A lookup (``session``,
``download``) reads the entry with the epoch and the window in one ``MGET``: an entry answers; no
entry while the window is open, the epoch is missing, or the epoch is not the one this replica
knows raises ``DirectoryRebuilding`` (``503 directory_rebuilding`` with ``Retry-After``): the
session may be open on a replica that has not announced it yet. ``404`` only when the directory
is whole. A cluster's first start (no replica knew an epoch) opens no window.

The directory says where to go, never whether the caller may: the owner checks the tenant again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..execution import Refused
from ..sessions import Entry, LiveSession, Saved
from .state import RETRY_AFTER_SECONDS, SharedState, SharedStateUnavailable

__all__ = [
    "Directory", "DirectoryRebuilding", "LocalDirectory", "RedisDirectory", "directory_for",
    "GRACE_SECONDS", "REBUILD_SECONDS",
]

log = logging.getLogger("wasm_runner.scaleout")

GRACE_SECONDS = 2.0  # a key outlives its session by this much, so it never expires first
SYNC_BACKOFF_SECONDS = 2.0  # after a failed link registration, links stay inline this long
REPUBLISH_SECONDS = 5.0  # how soon a Redis that restarted empty has this replica's entries again
REBUILD_SECONDS = 2 * REPUBLISH_SECONDS + 2.0  # a missing entry is "cannot tell" this long after a loss

# the epoch checked (made when missing; the rebuild window opened when it is not the one this
# replica knew) and this replica's marker refreshed: {epoch, marker still there}
_EPOCH = """
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[1])
  current = ARGV[1]
end
if ARGV[3] ~= '' and current ~= ARGV[3] then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2], 'NX')
end
return {current, redis.call('PEXPIRE', KEYS[3], ARGV[4])}
"""

# a session's entry replaced only if it is still the one read (the lost owner's)
_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""


class DirectoryRebuilding(Refused):
    """No entry found while the directory is being rebuilt (Redis lost its keys and the replicas
    have not all written theirs again): the session or link may exist. ``503
    directory_rebuilding`` with ``Retry-After``, never ``404``."""

    def __init__(self, what: str = "session") -> None:
        super().__init__(
            503, "directory_rebuilding",
            f"the directory of sessions and file links is being rebuilt (the shared state, Redis, "
            f"restarted) and this {what} may be open on another replica that has not announced it "
            f"yet; retry in {RETRY_AFTER_SECONDS} s",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )  # fmt: skip


class Directory:
    """The interface: a ``sessions.SessionDirectory`` for the session manager (its listener,
    ``take_over``, ``snapshots_kept``), lookups for the hop, and link registration for the
    download store. Its records are ``sessions.Entry`` and ``sessions.Saved``. This base is the
    one-host directory."""

    shared = False
    replica_id = "local"

    # -- sessions.SessionListener ----------------------------------------------------------
    async def opened(self, live: LiveSession) -> None:
        """A session opened here."""

    async def used(self, live: LiveSession) -> None:
        """A call in a session ended here (its expiry moved)."""

    async def closed(self, live: LiveSession) -> None:
        """A session here ended."""

    # -- lookups ---------------------------------------------------------------------------
    async def session(self, session_id: str) -> Entry | None:
        """Where ``session_id`` lives, or None when no replica has it."""
        return None

    async def forget_session(self, session_id: str) -> None:
        """Drop a stale entry (this process no longer holds the session)."""

    async def snapshots_kept(self, dead: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """Of (writer, session id) of snapshots whose writer is gone, those another replica may
        still resume: their session's entry still names them (``sessions.Pausing.keep``)."""
        return set()

    async def take_over(self, session_id: str, old: Entry, saved: Saved, ttl_seconds: float) -> bool:
        """Make this replica the owner of ``session_id`` if its entry is still ``old`` (a
        compare-and-set: of replicas resuming a lost owner's session, one wins); False otherwise."""
        return False

    async def mark_lost(self, kind: str, key_id: str, entry: Entry) -> None:
        """Replace the entry of a session (``kind`` ``session``) or link (``download``) whose
        owner is gone by a tombstone that lives as long as the entry would have."""

    def put_download(self, token: str, tenant: str, ttl: float) -> bool:
        """Register a link made here (blocking, bounded); False when it could not be shared."""
        return True

    async def download(self, token: str) -> Entry | None:
        """Where the link ``token`` lives, or None."""
        return None


    async def keep_published(
        self,
        sessions: Callable[[], list[LiveSession]],
        links: Callable[[], list[tuple[str, str, float]]],
    ) -> None:
        """Run until cancelled: keep this replica's entries in the directory (a Redis that
        restarted empty gets them back). One host: nothing to do."""

    async def aclose(self) -> None:
        """Release connections (shutdown)."""


class LocalDirectory(Directory):
    """One host: every session and link is in this process's stores or nowhere."""


class RedisDirectory(Directory):
    """Sessions and links of every replica, in Redis (through the replica's ``SharedState``)."""

    shared = True

    def __init__(self, shared: SharedState, advertise_url: str) -> None:
        self.state = shared
        self.owner = advertise_url.rstrip("/")
        self.replica_id = shared.replica_id
        self._sync: Any = None  # redis.Redis, made on first use (links are put from sync code)
        self._sync_failed_at = -SYNC_BACKOFF_SECONDS
        self.epoch: bytes | None = None  # the directory epoch this replica's entries are in
        self._check_now = asyncio.Event()  # wakes keep_published before its period ends
        shared.on_back.append(self._check_now.set)  # Redis answers again: check the epoch at once

    def _entry(self, tenant: str) -> Entry:
        return Entry(self.owner, self.replica_id, tenant)

    def _entry_of(self, live: LiveSession) -> Entry:
        return Entry(self.owner, self.replica_id, live.tenant, saved=Saved.of(live, self.replica_id))

    def _session_key(self, session_id: str) -> str:
        return self.state.key("session", session_id)

    def _download_key(self, token: str) -> str:
        return self.state.key("download", token)

    @staticmethod
    def _ttl_ms(live: LiveSession) -> int:
        return max(1, int((live.expires_in(time.monotonic()) + GRACE_SECONDS) * 1000))

    # -- sessions --------------------------------------------------------------------------
    async def opened(self, live: LiveSession) -> None:
        await self.state.call(
            self.state.redis.set(
                self._session_key(live.id), self._entry_of(live).dumps(), px=self._ttl_ms(live)
            ),
            "the session directory",
        )

    async def used(self, live: LiveSession) -> None:
        """Its new expiry, and what its entry says of its snapshot (written again: one SET)."""
        if not self.state.up:  # Redis known down: the entry keeps its old expiry, no wait here
            return
        await self.state.call(
            self.state.redis.set(
                self._session_key(live.id), self._entry_of(live).dumps(), px=self._ttl_ms(live), xx=True
            ),
            "the session directory",
        )

    async def snapshots_kept(self, dead: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """``DirectoryRebuilding`` while entries may be missing (the sweep keeps every file and
        tries again soon)."""
        epoch, rebuilding = await self.state.call(
            self.state.redis.mget([self._epoch_key, self._rebuilding_key]), "the session directory"
        )
        if rebuilding is not None or epoch is None or epoch != self.epoch:
            raise DirectoryRebuilding("snapshot")
        kept: set[tuple[str, str]] = set()
        for start in range(0, len(dead), 500):
            part = dead[start:start + 500]
            raws = await self.state.call(
                self.state.redis.mget([self._session_key(i) for _, i in part]), "the session directory"
            )
            for (writer, session_id), raw in zip(part, raws or [], strict=False):
                entry = Entry.loads(raw)
                if entry is not None and entry.saved is not None and entry.saved.writer == writer:
                    kept.add((writer, session_id))
        return kept

    async def take_over(self, session_id: str, old: Entry, saved: Saved, ttl_seconds: float) -> bool:
        mine = Entry(self.owner, self.replica_id, old.tenant, saved=saved)
        script = self.state.redis.eval(
            _TAKE_OVER, 1, self._session_key(session_id), old.raw, mine.dumps(),
            max(1, int((ttl_seconds + GRACE_SECONDS) * 1000)),
        )  # fmt: skip
        return bool(await self.state.call(script, "the session directory"))  # type: ignore[arg-type]

    async def closed(self, live: LiveSession) -> None:
        if not self.state.up:  # a drain must not wait on a dead Redis; the entry expires
            return
        await self.state.call(
            self.state.redis.delete(self._session_key(live.id)), "the session directory"
        )

    async def session(self, session_id: str) -> Entry | None:
        """The entry, or None when there is none and the directory is whole;
        ``DirectoryRebuilding`` when there is none and it may not be."""
        return await self._lookup(self._session_key(session_id), "session", "the session directory")

    async def _lookup(self, key: str, what: str, where: str) -> Entry | None:
        raw, epoch, rebuilding = await self.state.call(
            self.state.redis.mget([key, self._epoch_key, self._rebuilding_key]), where
        )
        entry = Entry.loads(raw)
        if entry is not None:
            return entry
        if epoch is None:  # the keys were lost and no replica has noticed yet: this one does
            self._check_now.set()
            await self._check_epoch()  # the epoch made; the window opened if this replica knew one
            if self.epoch is None:
                return None  # this replica knew none: the cluster's first start
            raise DirectoryRebuilding(what)
        if rebuilding is not None:
            raise DirectoryRebuilding(what)
        if self.epoch is not None and epoch != self.epoch:  # lost since this replica published
            self._check_now.set()
            raise DirectoryRebuilding(what)
        return None

    @property
    def _epoch_key(self) -> str:
        return self.state.key("directory", "epoch")

    @property
    def _rebuilding_key(self) -> str:
        return self.state.key("directory", "rebuilding")

    async def _check_epoch(self) -> tuple[bytes, bool]:
        """The directory's epoch (made when missing; the rebuild window opened when it is not the
        one this replica knew) and whether this replica's marker is still there."""
        marker = self.state.key("directory", self.replica_id)
        script = self.state.redis.eval(
            _EPOCH, 3, self._epoch_key, self._rebuilding_key, marker, uuid.uuid4().hex,
            int(REBUILD_SECONDS * 1000), self.epoch or b"", int(REPUBLISH_SECONDS * 3 * 1000),
        )  # fmt: skip
        answer: Any = await self.state.call(script, "the session directory")  # type: ignore[arg-type]
        epoch, marked = answer
        return bytes(epoch), bool(marked)

    async def forget_session(self, session_id: str) -> None:
        await self.state.call(
            self.state.redis.delete(self._session_key(session_id)), "the session directory"
        )

    # -- download links --------------------------------------------------------------------
    def _sync_client(self) -> Any:
        if self._sync is None:
            from redis import Redis

            self._sync = Redis.from_url(self.state.url, **self.state.client_options(asynchronous=False))
        return self._sync

    def put_download(self, token: str, tenant: str, ttl: float) -> bool:
        """One bounded SET (called from ``service.render``, which is synchronous). After a
        failure, links stay inline for ``SYNC_BACKOFF_SECONDS`` without trying, so a Redis
        outage costs one timeout, not one per file."""
        from redis.exceptions import RedisError

        if not self.state.up or time.monotonic() - self._sync_failed_at < SYNC_BACKOFF_SECONDS:
            return False
        try:
            self._sync_client().set(
                self._download_key(token),
                self._entry(tenant).dumps(),
                px=max(1, int((ttl + GRACE_SECONDS) * 1000)),
            )
        except (RedisError, OSError):
            self._sync_failed_at = time.monotonic()
            log.warning("a download link could not be registered in Redis; the file stays inline")
            return False
        return True

    async def download(self, token: str) -> Entry | None:
        return await self._lookup(self._download_key(token), "file link", "the download directory")

    async def mark_lost(self, kind: str, key_id: str, entry: Entry) -> None:
        key = self._session_key(key_id) if kind == "session" else self._download_key(key_id)
        left = await self.state.call(self.state.redis.pttl(key), "the session directory")
        if isinstance(left, int) and left > 0:  # XX: never (re)create a key that just expired
            tombstone = Entry("", "", entry.tenant, lost=True)
            await self.state.call(
                self.state.redis.set(key, tombstone.dumps(), px=left, xx=True),
                "the session directory",
            )

    # -- healing ---------------------------------------------------------------------------
    async def keep_published(
        self,
        sessions: Callable[[], list[LiveSession]],
        links: Callable[[], list[tuple[str, str, float]]],
    ) -> None:
        """At start, then every ``REPUBLISH_SECONDS`` (sooner when woken: Redis answers again, a
        lookup found the epoch changed): check the epoch; if it is not the one this replica knew,
        or this replica's marker is gone (Redis restarted empty, was flushed, or was out of reach
        a long while), write every entry of its open sessions and live links again, then the
        marker, and know the epoch. Steady state costs one script per period."""
        while True:
            self._check_now.clear()
            try:
                await self._publish(sessions, links)
            except SharedStateUnavailable:
                pass  # Redis down: try again next period (or when it answers again)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._check_now.wait(), REPUBLISH_SECONDS)

    async def _publish(
        self,
        sessions: Callable[[], list[LiveSession]],
        links: Callable[[], list[tuple[str, str, float]]],
    ) -> None:
        epoch, marked = await self._check_epoch()
        if marked and epoch == self.epoch:
            return
        pipe = self.state.redis.pipeline(transaction=False)
        for live in sessions():
            pipe.set(self._session_key(live.id), self._entry_of(live).dumps(), px=self._ttl_ms(live))
        for token, tenant, left in links():
            if left > 0:
                pipe.set(self._download_key(token), self._entry(tenant).dumps(),
                         px=max(1, int((left + GRACE_SECONDS) * 1000)))  # fmt: skip
        pipe.set(self.state.key("directory", self.replica_id), b"1", px=int(REPUBLISH_SECONDS * 3 * 1000))
        await self.state.call(pipe.execute(), "the session directory")
        if epoch != self.epoch and self.epoch is not None:
            log.warning("the session directory was lost (Redis restarted empty?): this replica's "
                        "entries are written again")  # fmt: skip
        self.epoch = epoch

    async def aclose(self) -> None:
        client, self._sync = self._sync, None
        if client is not None:
            client.close()


def directory_for(shared: SharedState | None, advertise_url: str | None) -> Directory:
    """The directory for this replica: Redis when state is shared and this replica has an
    internal address to be reached at, else the local one (sessions stay on their replica)."""
    if shared is None:
        return LocalDirectory()
    if not advertise_url:
        log.warning(
            "redis_url is set but advertise_url is not: other replicas cannot reach this one, "
            "so its sessions and download links work only through this replica"
        )
        return LocalDirectory()
    return RedisDirectory(shared, advertise_url)
