"""The cluster's front door: a generated haproxy.cfg, its check, and HAProxy's stats socket.

What the generated configuration does, and why:

- ``balance roundrobin``, no cookie, no stickiness: any replica answers any call (sessions are
  passed to their owner by the replicas themselves, docs/scale-out.md). The one exception is MCP
  over HTTP (``/mcp``): a tool session (``open_session``, then ``run_cell``) lives on the replica
  that opened it and MCP calls are not passed on, so ``/mcp`` goes to a second backend that picks
  the replica by a consistent hash of the API key (``Authorization`` or ``X-API-Key``): every MCP
  call of one key reaches one replica, different keys spread, and a replica going down moves only
  its keys. Its servers track the main backend's health checks.
- ``option httpchk GET /readyz`` every 500 ms, down after 2 failures, up after 1 success: a replica
  that warms up or drains (``/readyz`` 503) gets no new requests within about a second.
- ``http-request del-header`` of every client header starting with ``X-Wasm-Runner-Internal-``:
  those carry the authenticated hop between replicas and never come from outside.
- ``X-Forwarded-For`` (and ``-Proto``) from clients removed, then ``option forwardfor`` sets the
  real client address: the replicas' uvicorn takes the client address from it, since HAProxy's
  127.0.0.1 is in its ``forwarded_allow_ips``; a client cannot name another address.
- ``http-response set-header X-Wasm-Runner-Replica <server name>``: which replica answered (the
  tests use it to see that calls spread; harmless to show clients).
- ``retries 2`` with ``retry-on conn-failure`` and ``option redispatch``: a request is sent again,
  to another replica, only when the connection to a replica could not be made. A request that
  reached a replica (a run that may have started) is never sent twice.
- ``timeout connect 1s`` (a dead replica is found out at once); ``timeout server`` and ``client``
  cover the longest run a profile allows plus the queue wait (SSE streams are plain responses);
  ``timeout tunnel`` covers a WebSocket waiting for a learner's ``input()``.
- HAProxy's own answers (502 a replica went away mid-request, 503 no replica ready, 504) are JSON
  in the app's error format, with a stable code (``BALANCER_ERRORS``).
- At most ``max_connections_per_address`` open connections per client address, counted here
  (a stick table by source address): the replicas count only HAProxy's address, so their own
  per-address cap cannot tell clients apart. A client over it has its new connection closed.
- ``maxconn`` per replica below the replica's ``max_connections_per_address`` (three quarters for
  the main backend, a quarter for ``/mcp``): every connection from HAProxy comes from one address,
  so more would be refused by the replica; HAProxy queues them.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ...settings import ServerConfig

__all__ = [
    "BALANCER_ERRORS",
    "INTERNAL_HEADER_PREFIX",
    "MCP_PATH",
    "REPLICA_HEADER",
    "check_config",
    "haproxy_argv",
    "render_config",
    "server_states",
    "timeouts_for",
]

INTERNAL_HEADER_PREFIX = "X-Wasm-Runner-Internal-"
REPLICA_HEADER = "X-Wasm-Runner-Replica"
MCP_PATH = "/mcp"
# HAProxy's own answers, in the app's error format ({"error": {"code", "message"}})
BALANCER_ERRORS: dict[int, tuple[str, str]] = {
    502: ("replica_failed", "the replica handling this request went away before it answered; "
          "a run may or may not have happened"),
    503: ("no_replica_ready", "no replica is ready to take this request; retry shortly"),
    504: ("replica_timeout", "the replica did not answer in time"),
}
CONNECTION_MARGIN = 8  # connections a replica keeps for health checks and hops between replicas


def timeouts_for(config: ServerConfig) -> dict[str, int]:
    """HAProxy timeouts (seconds) that fit the longest run and input wait the profiles allow."""
    longest_run = max(p.limits.wall_seconds for p in config.profiles.values())
    longest_wait = max(p.limits.input_wait_seconds for p in config.profiles.values())
    server = math.ceil(config.admission.queue_timeout_seconds + longest_run + 30)
    return {
        "connect": 1,
        "server": server,
        "client": server,
        "tunnel": math.ceil(max(server, longest_wait + 60)),
        "http-request": math.ceil(config.client_bounds.header_timeout_seconds + 5),
        "http-keep-alive": math.ceil(config.client_bounds.keep_alive_seconds),
        "queue": math.ceil(config.admission.queue_timeout_seconds),
    }


def render_config(host: str, port: int, replicas: Sequence[tuple[str, int]], config: ServerConfig,
                  stats_socket: Path | None = None) -> str:  # fmt: skip
    """haproxy.cfg for a frontend on ``host:port`` and ``replicas`` ``(name, port)`` on 127.0.0.1."""
    t = timeouts_for(config)
    # the replica's connection cap from HAProxy's one address, shared by the two backends
    per_address = config.client_bounds.max_connections_per_address
    total = max(2, per_address - CONNECTION_MARGIN)
    mcp_maxconn = max(1, total // 4)
    maxconn = total - mcp_maxconn
    lines = [
        "# generated by wasm-runner cluster (wasm_runner/scaleout/launcher/haproxy.py); docs/scale-out.md",
        "global",
        "    maxconn 4096",
    ]
    if stats_socket is not None:
        lines.append(f"    stats socket {stats_socket} mode 600 level operator")
    lines += [
        "",
        "defaults",
        "    mode http",
        "    option dontlognull",
        *(f"    timeout {name} {seconds}s" for name, seconds in t.items()),
        "    retries 2",
        "    retry-on conn-failure",
        "    option redispatch",
        *(_error_line(status, code, message) for status, (code, message) in BALANCER_ERRORS.items()),
        "",
        "frontend wasm_runner",
        f"    bind {_bind_address(host)}:{port}",
        # the replicas see only HAProxy's address: the per-client connection cap is held here
        "    stick-table type ipv6 size 100k expire 60s store conn_cur",
        "    tcp-request connection track-sc0 src",
        f"    tcp-request connection reject if {{ sc0_conn_cur gt {per_address} }}",
        f"    http-request del-header {INTERNAL_HEADER_PREFIX} -m beg",
        "    http-request del-header X-Forwarded-For",
        "    http-request del-header X-Forwarded-Proto",
        "    option forwardfor",
        f"    use_backend mcp if {{ path {MCP_PATH} }} || {{ path_beg {MCP_PATH}/ }}",
        "    default_backend replicas",
        "",
        "backend replicas",
        "    balance roundrobin",
        "    option httpchk GET /readyz HTTP/1.1",
        "    http-check send hdr Host 127.0.0.1",
        "    http-check expect status 200",
        f"    http-response set-header {REPLICA_HEADER} %s",
        f"    default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 maxconn {maxconn}",
    ]
    lines += [f"    server {name} 127.0.0.1:{p} check" for name, p in replicas]
    lines += [
        "",
        "backend mcp",
        "    # MCP over HTTP: every call of one API key to one replica, where its tool sessions live",
        "    http-request set-var(txn.api_key) req.hdr(authorization)",
        "    http-request set-var(txn.api_key) req.hdr(x-api-key) unless { req.hdr(authorization) -m found }",
        "    balance hash var(txn.api_key)",
        "    hash-type consistent",
        f"    http-response set-header {REPLICA_HEADER} %s",
        f"    default-server maxconn {mcp_maxconn}",
    ]
    lines += [f"    server {name} 127.0.0.1:{p} track replicas/{name}" for name, p in replicas]
    return "\n".join(lines) + "\n"


def _error_line(status: int, code: str, message: str) -> str:
    body = json.dumps({"error": {"code": code, "message": message}})
    retry = " hdr Retry-After 2" if status == 503 else ""
    return f"    http-error status {status} content-type application/json string '{body}'{retry}"


def _bind_address(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def haproxy_argv(binary: str, cfg: Path) -> list[str]:
    """HAProxy in the foreground (``-db``), quiet, on ``cfg``."""
    return [binary, "-db", "-q", "-f", str(cfg)]


def check_config(binary: str, cfg: Path) -> str | None:
    """``haproxy -c -f cfg``: None when valid, else HAProxy's complaint."""
    proc = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True,
                          timeout=30)  # fmt: skip
    if proc.returncode == 0:
        return None
    said = (proc.stderr or proc.stdout).splitlines()
    alerts = [line for line in said if "[ALERT]" in line] or said
    return "\n".join(alerts).strip() or f"haproxy -c exited {proc.returncode}"


def server_states(stats_socket: Path, backend: str = "replicas") -> dict[str, str]:
    """Each replica's state as HAProxy sees it (``UP``, ``DOWN``, ``MAINT``, ...), by server name;
    empty when the socket does not answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(stats_socket))
            s.sendall(b"show stat\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
    except OSError:
        return {}
    rows = b"".join(chunks).decode("utf-8", "replace").splitlines()
    if not rows or not rows[0].startswith("# "):
        return {}
    header = rows[0][2:].split(",")
    states = {}
    for row in rows[1:]:
        cells = dict(zip(header, row.split(",")))
        if cells.get("pxname") == backend and cells.get("svname") not in ("FRONTEND", "BACKEND"):
            states[cells["svname"]] = cells.get("status", "")
    return states
