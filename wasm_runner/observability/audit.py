"""The audit log: one JSON line per run saying who ran what, under which limits, and how it ended.

Host-function calls are counted by function and outcome (calls, bytes each way, time), never
what they passed. Code is recorded by sha256 and size; its text too when ``audit_code = "full"``. API keys are never
written, only the tenant's name; a user id never either, only its ``user_key`` (``users.py``). Refusals that are not runs (a forged internal-hop request: at most
``failed_auth_rate`` of them per address and window, ``internal.InternalGuard``) are
lines with an ``event`` field instead (``AuditLog.event``), and so are the network requests of
browser-tier runs (``AuditLog.network_request``: the server makes them, the run is the browser's).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..limits import Limits
from ..result import Result

__all__ = ["AuditLog", "sha256"]


def sha256(data: str | bytes) -> str:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


class AuditLog:
    """Appends records to a JSON-lines file (thread-safe); a no-op when ``path`` is None."""

    def __init__(self, path: Path | None, keep_code: bool = False) -> None:
        self.path = path
        self.keep_code = keep_code
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def record(
        self,
        *,
        request_id: str,
        tenant: str,
        client: str,
        kind: str,
        profile: str,
        limits: Limits,
        code: str,
        stdin: str | None,
        files_in: dict[str, bytes],
        result: Result,
        session: str | None = None,
        queued_seconds: float = 0.0,
        user: str | None = None,
        host_calls: list[dict[str, Any]] | None = None,
        network: list[dict[str, Any]] | None = None,
        packages: tuple[str, ...] = (),
    ) -> None:
        if self.path is None:
            return
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
            "request_id": request_id,
            "tenant": tenant,
            "user": user,  # users.py: an HMAC of the user id with a server secret, never the id
            "client": client,
            "kind": kind,
            "session": session,
            "profile": profile,
            "runtime": result.runtime,
            "limits": limits.to_dict(),
            "code_sha256": sha256(code),
            "code_bytes": len(code.encode("utf-8", "surrogatepass")),
            "stdin_sha256": sha256(stdin) if stdin else None,
            "files_in": [
                {"name": n, "size": len(c), "sha256": sha256(c)} for n, c in files_in.items()
            ],
            "status": result.status.value,
            "limit": result.limit,
            "exit_code": result.exit_code,
            "wall_ms": round(result.wall_ms, 3),
            # running, queued and waiting apart: wall_ms includes input_wait_ms (parked, waiting
            # for input without a run slot); queued_ms is the wait for a slot before the run
            # (not in wall_ms) plus, after input came, before it went on (in input_wait_ms)
            "input_wait_ms": round(result.input_wait_ms, 3),
            "queued_ms": round(queued_seconds * 1000, 3),
            "fuel_used": result.fuel_used,
            "stdout_sha256": sha256(result.stdout),
            "stderr_sha256": sha256(result.stderr),
            "files_out": [
                {"path": f.path, "size": f.size, "sha256": f.sha256} for f in result.files
            ],
            # host functions: calls by name and outcome with their sizes and time, never the payload
            "host_calls": host_calls or [],
            # the guest's network requests (network/): rule, method, URL, address, status, bytes,
            # outcome and the refusal's sentence; never a header or a body
            "network": network or [],
            # the operator's wheelhouse: the packages the run was given (name==version)
            "packages": list(packages),
        }
        if self.keep_code:
            entry["code"] = code
        line = json.dumps(entry, ensure_ascii=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)

    def network_request(self, *, tenant: str, user: str | None, client: str, run: str,
                        request: dict[str, Any]) -> None:
        """One line per network request of a browser-tier run (``network/browser_runs.py``):
        ``"event": "network"``, the caller, the run's grant id and the request as a server-tier
        run's ``network`` entries have it (rule, method, URL, address, status, bytes, outcome)."""
        if self.path is None:
            return
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
            "event": "network", "tier": "browser", "tenant": tenant, "user": user, "client": client,
            "run": run, **request,
        }
        line = json.dumps(entry, ensure_ascii=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)

    def event(self, event: str, **fields: str) -> None:
        """One line for something refused that is not a run (e.g. ``internal_forbidden``: a
        request with internal-hop headers but no valid signature)."""
        if self.path is None:
            return
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z",
            "event": event,
            **fields,
        }
        line = json.dumps(entry, ensure_ascii=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
