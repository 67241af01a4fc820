"""What the suites share: servers, replicas, Redis, browsers and hosts, each started for real.

- ``live_server``: the HTTP service on real uvicorn in this process (``LiveServer``);
- ``replicas``: ``wasm-runner serve`` processes sharing one Redis;
- ``redis_process``: a real redis-server on loopback and the ``redis_server`` fixture;
- ``cluster``: ``wasm-runner cluster`` (replicas behind HAProxy);
- ``browser``: headless Chromium and the pages it drives; ``pages_only_app``: pages without the API;
- ``wasi_host``: a bare host for the WASI calls; ``mcp_checks``: what every MCP transport must show.
"""
