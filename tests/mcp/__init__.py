"""Tests of ``wasm_runner.mcp``: the tools over stdio and HTTP."""
