"""Host functions: the app's functions called from guest code (wasm_runner/host_functions)."""
