#!/usr/bin/env bash
# Set up (idempotent; only what serving needs) and serve the playground and the API on
# http://127.0.0.1:8000/ for local use. The page and the browser tier answer at once; the server
# tier's runtime is compiled in the background on the first start (the page says how long).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --serve
exec .venv/bin/wasm-runner serve --no-auth "$@"
