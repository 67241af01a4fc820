"""The memory diagnosis of a server (observability/memory_report.py): reports on SIGUSR1, each
compared with the one before, only when WASM_RUNNER_MEMORY_REPORT names a folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wasm_runner.observability import memory_report

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")

# a process that installs the hook, grows a table of its own between two signals, and exits
_GROWER = textwrap.dedent("""
    import os, signal
    from wasm_runner.observability.memory_report import install_from_environment
    assert install_from_environment() is not None
    os.kill(os.getpid(), signal.SIGUSR1)
    class GrowingRecord:
        pass
    table = [GrowingRecord() for _ in range(5000)]
    os.kill(os.getpid(), signal.SIGUSR1)
""")


def test_off_unless_the_variable_names_a_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WASM_RUNNER_MEMORY_REPORT", raising=False)
    assert memory_report.install_from_environment() is None


def test_a_second_report_names_what_grew_since_the_first(tmp_path: Path) -> None:
    env = {**os.environ, "WASM_RUNNER_MEMORY_REPORT": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    subprocess.run([sys.executable, "-c", _GROWER], check=True, timeout=120, env=env)
    first, second = sorted(tmp_path.glob("memory-*.txt"), key=lambda p: p.name[-5:])
    assert "rss " in first.read_text()
    report = second.read_text()
    grew = report.split("types that grew most:")[1].split("\n\n")[0]
    assert "+5000  GrowingRecord" in grew
    assert "<string>" in report.split("Python allocations that grew most")[1]  # the traceback
    assert "malloc_trim(0): done" in report
