"""The test suites; each folder mirrors a package of ``wasm_runner``, ``support`` is shared."""
