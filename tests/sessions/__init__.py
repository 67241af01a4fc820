"""The session manager (``wasm_runner.sessions``), one test module per module of it."""
