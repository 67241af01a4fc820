#!/usr/bin/env bash
# The project's test command: sets everything up (idempotent), then runs every suite.
# Every suite runs even when an earlier one fails; one summary at the end says which failed, and
# the command exits non-zero if any did. Set-up and the one-time compile are not suites: if they
# fail, nothing after them can mean anything, so they stop the run at once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

failed=()
summary=()
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
suite() {  # suite NAME COMMAND...: run one suite, remember how it ended, never stop the script
  local name="$1"; shift
  local started=$SECONDS status=0
  echo "== $name"
  "$@" 2>&1 | tee "$logs/${#summary[@]}.log" || status=$?
  local took=$((SECONDS - started))
  if [ "$status" -eq 0 ]; then
    summary+=("  ok      $name (${took} s)")
  else
    summary+=("  FAILED  $name (exit $status, ${took} s)")
    failed+=("$name")
  fi
}

# Static checks first (seconds): layer contracts (the core imports no face), lint, types.
suite "import layers (lint-imports)" .venv/bin/lint-imports
suite "lint (ruff)" .venv/bin/ruff check
suite "types (mypy)" .venv/bin/mypy
# Compile and cache the wasm runtimes once, up front, so no test pays for it.
.venv/bin/wasm-runner warm
# Browser tier: Pyodide under Node (the worker logic).
if ls tests/web/*.test.mjs >/dev/null 2>&1; then
  suite "browser tier in Node (node --test)" bash -c 'cd web && node --test ../tests/web/'
fi
# Everything else: the sandbox, the HTTP service, the browser in Chromium, MCP, compare.
# --durations: the slowest tests, for keeping the suite lean (CI must stay well under an hour)
suite "pytest" .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@"

# Test counts of the runners (node's "# pass N"/"ℹ pass N", pytest's closing line), added up.
tests_passed=0 tests_failed=0
for log in "$logs"/*.log; do
  read -r p f < <(python3 - "$log" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
passed = failed = 0
for m in re.finditer(r"^(?:# |\u2139 )(pass|fail) (\d+)$", text, re.M):
    if m.group(1) == "pass":
        passed += int(m.group(2))
    else:
        failed += int(m.group(2))
closing = [l for l in text.splitlines() if re.search(r"\d+ (passed|failed|error)", l) and " in " in l]
if closing:
    for n, word in re.findall(r"(\d+) (passed|failed|errors?)", closing[-1]):
        if word == "passed":
            passed += int(n)
        else:
            failed += int(n)
print(passed, failed)
PY
)
  tests_passed=$((tests_passed + p)); tests_failed=$((tests_failed + f))
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "${#failed[@]} suite(s) failed: ${failed[*]}"
  echo "tests: $tests_passed passed, $tests_failed failed"
  exit 1
fi
echo "every suite passed"
echo "tests: $tests_passed passed, $tests_failed failed"
