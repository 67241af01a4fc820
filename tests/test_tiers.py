"""Both tiers word the end line of a run alike and batch output with the same window: one table
(``wasm_runner/tiers.py``), generated into ``web/src/tiers.js``; the browser's end line is
computed here by ``render.js`` itself, in Node, and compared with the server's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from wasm_runner import Limits, Status
from wasm_runner.browser import tiers_js
from wasm_runner.exercises import webgen
from wasm_runner.messages import limit_sentence
from wasm_runner.sandbox.wrapper import BOOT_SOURCE, GUEST_SOURCES
from wasm_runner.tiers import END_LINES, FLUSH_SECONDS, end_line
from wasm_runner.wasi.guestio import PACE_S

ROOT = Path(__file__).resolve().parent.parent
WEB_SRC = ROOT / "web" / "src"
NODE = shutil.which("node")


def _node_module(script: str) -> str:
    assert NODE is not None, "node is installed by scripts/setup.sh"
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cases() -> list[dict[str, Any]]:
    """Every status with the limits that shape its line: defaults, odd values, and none at all."""
    variants = [
        Limits().to_dict(),
        Limits(cpu_seconds=2.5, wall_seconds=120, memory_mb=128, stdout_bytes=65536, stderr_bytes=1000,
               disk_mb=8.5, max_files=1, input_wait_seconds=60).to_dict(),
        Limits(cpu_seconds=1, wall_seconds=1, input_wait_seconds=1, stdout_bytes=1, stderr_bytes=1 << 20).to_dict(),
        {},
    ]
    cases = []
    for limits in variants:
        for status in Status:
            cases.append({"status": status.value, "limits": limits})
        for exit_code in (None, 1, 3):
            cases.append({"status": "error", "exit_code": exit_code, "limits": limits})
        cases.append({"status": "error", "limit": "stack", "exit_code": 1, "limits": limits})
        cases.append({"status": "timeout", "limit": "input_wait", "limits": limits})
        cases.append({"status": "output_limit", "stderr_truncated": True, "limits": limits})
        cases.append({"status": "output_limit", "stderr_truncated": True, "stdout_truncated": True, "limits": limits})
    return cases


def test_the_browser_copy_is_generated_from_the_table() -> None:
    assert tiers_js.main(["--check"]) == 0, "run python -m wasm_runner.browser.tiers_js"
    text = (WEB_SRC / "tiers.js").read_text()
    assert f"export const FLUSH_SECONDS = {FLUSH_SECONDS!r};" in text
    for line in END_LINES.values():
        assert json.dumps(line) in text


def test_both_tiers_word_every_end_line_alike() -> None:
    cases = _cases()
    script = (
        f"import {{ endLine }} from {json.dumps((WEB_SRC / 'render.js').as_uri())};\n"
        f"const cases = {json.dumps(cases)};\n"
        "console.log(JSON.stringify(cases.map((c) => endLine({ tier: 'server', wall_ms: 5, ...c }).sentence)));\n"
    )
    browser = json.loads(_node_module(script))
    server = [
        end_line(c["status"], c["limits"], limit=c.get("limit"), exit_code=c.get("exit_code"),
                 stream="stderr" if c.get("stderr_truncated") and not c.get("stdout_truncated") else "stdout")
        for c in cases
    ]
    differ = [(c, b, s) for c, b, s in zip(cases, browser, server) if b != s]
    assert differ == []
    # the lines themselves: words a person reads, every limit named with its value
    assert "Stopped: it used more than 2.5 seconds of CPU time" in server
    assert "Stopped: it ran for more than 2 minutes" in server
    assert "Stopped: it waited for input for more than 1 second" in server
    assert "Stopped: its files went over the disk quota of 8.5 MB or 1 file" in server
    assert "Stopped: it wrote more than 1000 bytes to stderr" in server
    assert "Stopped: it printed more than 1 byte" in server
    assert "Your program exited with code 3" in server
    assert "Stopped: it needed more than the allowed amount of memory" in server  # no limits known


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.OK])
def test_the_server_message_is_the_end_line_and_what_to_try(status: Status) -> None:
    line = end_line(status.value, Limits().to_dict())
    message = limit_sentence(status, Limits())
    assert message == f"{line}." or message.startswith(f"{line}; ")


def test_one_flush_window_for_both_tiers() -> None:
    """Both tiers batch output with the guest package's output module (wasm_runner/guest/output.py:
    the server's wrapper runs it, the browser's worker installs it from pylib.js); its window is
    the table's, and so is the server's pace flag."""
    guest_py = json.loads(_node_module(
        f"import {{ GUEST_PY }} from {json.dumps((WEB_SRC / 'pylib.js').as_uri())};\n"
        "console.log(JSON.stringify(GUEST_PY));\n"
    ))
    assert guest_py == webgen.guest_program()
    output = GUEST_SOURCES["output"]
    assert repr(output) in guest_py and repr(output) in BOOT_SOURCE  # the same module on both tiers
    bootstrap = (WEB_SRC / "bootstrap.py.js").read_text()
    assert "_output.ordered(_send)" in bootstrap
    assert PACE_S == FLUSH_SECONDS
    window = re.search(r"BLOCK, BURST, WINDOW = \d+, \d+, ([0-9.]+)", output)
    assert window is not None and float(window.group(1)) == FLUSH_SECONDS
