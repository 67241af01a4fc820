#!/usr/bin/env bash
# Idempotent set-up of everything the project needs: venv, Python package, web assets, Chromium.
# Safe to run again; each step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# --- Python: venv and the package with its test extras ---
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet -e '.[test]'

# --- browser tier: Debian's Chromium for the browser tests (never a downloaded browser) ---
if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver fonts-dejavu-core >/dev/null
fi

# --- scale-out (wasm-runner cluster, tests/cluster): Debian's Redis and HAProxy, never downloaded ---
if ! command -v redis-server >/dev/null 2>&1 || ! command -v haproxy >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends redis-server haproxy >/dev/null
fi

# --- browser tier: Pyodide and CodeMirror from npm (exact versions in web/package-lock.json) ---
lock_sum="$(sha256sum web/package-lock.json | cut -d' ' -f1)"
if [ ! -d web/node_modules/pyodide ] || [ "$(cat web/node_modules/.wasm-runner-lock 2>/dev/null)" != "$lock_sum" ]; then
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock_sum" > web/node_modules/.wasm-runner-lock
fi
if [ ! -f web/dist/editor.js ] || [ web/src/editor-entry.js -nt web/dist/editor.js ]; then
  (cd web && npm run --silent build)
fi

# --- wasm-runner compare: isolation tiers from Debian packages; images built once and cached ---
compare_pkgs=""
for pair in bwrap:bubblewrap runc:runc crun:crun debootstrap:debootstrap qemu-system-x86_64:qemu-system-x86; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%:*}" ] || compare_pkgs="$compare_pkgs ${pair#*:}"
done
ls /boot/vmlinuz-* >/dev/null 2>&1 || compare_pkgs="$compare_pkgs linux-image-amd64"
if [ -n "$compare_pkgs" ] && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $compare_pkgs >/dev/null
fi
# rootfs (debootstrap, ~1 min the first time), microVM initramfs, compiled wasm module
.venv/bin/wasm-runner compare --prepare || echo "setup: some compare tiers could not be prepared (listed above)"
