"""Tests of ``wasm_runner.exercises``; the exercise folders here are their data."""
