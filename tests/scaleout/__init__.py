"""Scale-out (``wasm_runner.scaleout``), one test module per module of it."""
