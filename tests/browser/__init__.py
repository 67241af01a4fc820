"""Tests of ``wasm_runner.browser`` and the browser tier in headless Chromium."""
