"""The HTTP face of wasm-runner: a Starlette app over the sandbox; it translates requests and
responses (auth and middleware as HTTP concerns). The service behind it is built by the
composition root, ``wasm_runner.assembly``, which only ``app`` (the app builders) imports.

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
- ``service``: what the routes (and the MCP tools at ``/mcp``) receive: the parts the assembly
  built, typed (the server's ``wasm_runner.execution.Executor``, with
  ``wasm_runner.admission.AdmissionGate`` as its gate, ``wasm_runner.sandbox.provider
  .ServerSandboxes`` as its sandbox provider and ``wasm_runner.observability.RunRecord`` as its recorder; its one
  session store, HTTP and MCP sessions alike), and the request helpers (``caller``, ``policy``,
  ``files_in``, ``render``).
- ``guests``: output/input bridges between guest threads and the event loop, cancel on disconnect.
- ``routes/``: run, stream (SSE), interactive (WebSocket), sessions, files, exercises, meta
  (``GET /metrics`` serves ``wasm_runner.observability``'s metrics; files are
  ``wasm_runner.downloads``' links; exercises ``wasm_runner.exercises.catalog``'s).
- ``middleware`` (security headers), ``errors`` (4xx JSON), ``mount`` (the Starlette app around a
  service: routes, ``/mcp``, middleware), ``app`` (the app builders), ``cli`` (``serve``),
  ``serving`` (uvicorn with the bounds it lacks: header timeout, connection caps; the drain on
  SIGTERM).
"""

__all__: list[str] = []
