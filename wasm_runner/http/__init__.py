"""The HTTP face of wasm-runner: a Starlette app over the sandbox (assembled by ``server.py``).

One module per concept:

- ``config``: settings and policy profiles (TOML + ``WASM_RUNNER_*`` environment).
- ``auth``: API keys and per-key rate limits; ``admission``: global cap, memory budget, queue.
- ``shared``: the replica's Redis client (``redis_url``); ``leases``: per-key counts across
  replicas; ``lifecycle``: ``/readyz`` and the drain on SIGTERM; ``directory``: which replica
  holds a session or a download link; ``hop``: the signed internal call to that replica and the
  guard that checks it.
- ``schemas``: request bodies (pydantic) and their reading; ``openapi``: ``/api/openapi.json``.
- ``service``: what the routes (and the MCP tools at ``/mcp``) share, around the server's
  ``wasm_runner.execution.Executor``: admission as its gate, metrics and audit as its record of
  every run, and its one session store (HTTP and MCP sessions alike).
- ``guests``: output/input bridges between guest threads and the event loop, cancel on disconnect.
- ``routes/``: run, stream (SSE), interactive (WebSocket), sessions, files, meta.
- ``metrics`` (Prometheus), ``audit`` (JSON lines), ``downloads`` (short-lived file links),
  ``middleware`` (security headers), ``errors`` (4xx JSON), ``app`` (assembly), ``cli`` (``serve``),
  ``serving`` (uvicorn with the bounds it lacks: header timeout, connection caps).
"""

__all__: list[str] = []
