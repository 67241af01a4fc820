"""Tests of ``wasm_runner.compare``: corpus, verdicts, probes, tiers."""
