#!/usr/bin/env bash
# Set up (idempotent) and serve the playground and the API on http://127.0.0.1:8000/ for local use.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/wasm-runner warm
exec .venv/bin/wasm-runner serve --no-auth "$@"
