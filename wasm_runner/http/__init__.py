"""The HTTP face of wasm-runner: a Starlette app over the sandbox (assembled by ``server.py``).

One module per concept:

- ``config``: settings and policy profiles (TOML + ``WASM_RUNNER_*`` environment).
- ``auth``: API keys and per-key rate limits; ``admission``: global cap, memory budget, queue.
- ``schemas``: request bodies (pydantic) and their reading; ``openapi``: ``/api/openapi.json``.
- ``guests``: running guests on worker threads, output/input bridges, cancel on disconnect.
- ``service``: what the routes share; ``sessions``: long-lived instances with expiry.
- ``routes/``: run, stream (SSE), interactive (WebSocket), sessions, files, meta.
- ``metrics`` (Prometheus), ``audit`` (JSON lines), ``downloads`` (short-lived file links),
  ``middleware`` (security headers), ``errors`` (4xx JSON), ``app`` (assembly), ``cli`` (``serve``).
"""
