"""Tests of ``wasm_runner.wasi``: the host calls, driven through a bare host (``support.wasi_host``)."""
