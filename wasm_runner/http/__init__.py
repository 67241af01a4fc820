"""The HTTP face of wasm-runner: a Starlette app over the sandbox (assembled by ``server.py``).

One module per concept (the settings are ``wasm_runner.settings``, read as sections:
``config.admission``, ``config.client_bounds`` ...):

- ``auth``: API keys and per-key rate limits; ``users``: user ids within a key. Admission (global
  cap, memory budget, queue, the leases across replicas) is ``wasm_runner.admission``; its
  refusals are ``Refused``, answered as JSON by ``errors``.
- ``internal``: the guard of calls another replica passed on (signed, ``X-Wasm-Runner-Internal-*``)
  and who their caller was; ``relay``: a session call or download relayed to the replica that
  holds it (a lost replica's session is resumed here by ``wasm_runner.sessions.SessionRecovery``).
  What replicas share (Redis state, the leases' Redis, the directory, signing, the drain) is
  ``wasm_runner.scaleout``; sessions themselves are ``wasm_runner.sessions``.
- ``schemas``: request bodies (pydantic) and their reading; ``openapi``: ``/api/openapi.json``.
- ``service``: what the routes (and the MCP tools at ``/mcp``) share, around the server's
  ``wasm_runner.execution.Executor``: ``wasm_runner.admission.AdmissionGate`` as its gate, its
  one session store (HTTP and MCP sessions alike); its other parts live where their concern does
  (``wasm_runner.sandbox.provider``: the sandboxes and the profiles' warm pools;
  ``wasm_runner.warmup.ready_within``: readiness; ``wasm_runner.admission.resident_mb``: the
  memory a run holds). ``record``: ``RunRecord``, metrics and audit as its record of every run.
- ``guests``: output/input bridges between guest threads and the event loop, cancel on disconnect.
- ``routes/``: run, stream (SSE), interactive (WebSocket), sessions, files, exercises, meta.
- ``metrics`` (Prometheus), ``audit`` (JSON lines) (``record`` writes both), ``downloads`` (short-lived file links),
  ``exercise_catalog`` (the exercises served, loaded once),
  ``middleware`` (security headers), ``errors`` (4xx JSON), ``app`` (assembly), ``cli`` (``serve``),
  ``serving`` (uvicorn with the bounds it lacks: header timeout, connection caps; the drain on
  SIGTERM).
"""

__all__: list[str] = []
