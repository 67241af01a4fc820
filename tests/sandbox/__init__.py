"""Tests of ``wasm_runner.sandbox``: real runs on both runtimes, hostile programs, warm pools."""
