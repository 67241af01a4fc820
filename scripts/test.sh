#!/usr/bin/env bash
# The project's test command: sets everything up (idempotent), then runs every suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Static checks first (seconds): layer contracts (the core imports no face), lint, types.
.venv/bin/lint-imports
.venv/bin/ruff check
.venv/bin/mypy
# Compile and cache the wasm runtimes once, up front, so no test pays for it.
.venv/bin/wasm-runner warm
# Browser tier: Pyodide under Node (the worker logic).
if ls tests/web/*.test.mjs >/dev/null 2>&1; then
  (cd web && node --test ../tests/web/)
fi
# Everything else: the sandbox, the HTTP service, the browser in Chromium, MCP, compare.
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
