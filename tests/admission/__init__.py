"""Admission (``wasm_runner.admission``), one test module per module of it."""
