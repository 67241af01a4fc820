"""The tool descriptions tell a model the truth: checked against the real sandbox."""

from __future__ import annotations

import pytest

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.mcp.descriptions import RUNTIME_FACTS, environment_text, limits_text

pytestmark = pytest.mark.timeout(900)
GENEROUS = Limits(cpu_seconds=300, wall_seconds=600, memory_mb=1024)


@pytest.mark.parametrize("runtime", sorted(RUNTIME_FACTS))
def test_advertised_python_and_packages_are_there(runtime: str) -> None:
    facts = RUNTIME_FACTS[runtime]
    code = (
        "import sys, importlib\n"
        "print('%d.%d' % sys.version_info[:2])\n"
        f"for name in {list(facts.packages)!r}:\n"
        "    importlib.import_module(name)\n"
        "print('imported', len(" + repr(list(facts.packages)) + "))\n"
    )
    result = Sandbox(runtime).run(code, limits=GENEROUS)
    assert result.status is Status.OK, result.stderr[-2000:]
    version, imported = result.stdout.split("\n")[:2]
    assert version == facts.python
    assert imported == f"imported {len(facts.packages)}"


def test_small_runtime_really_lacks_pandas() -> None:
    result = Sandbox("small").run("import pandas", limits=GENEROUS)
    assert result.status is Status.ERROR and "ModuleNotFoundError" in result.stderr


def test_no_network_and_no_subprocess_as_described() -> None:
    assert "no network" in environment_text("default") and "No subprocesses" in environment_text("default")
    code = (
        "import socket, subprocess\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
        "    print('network: yes')\n"
        "except Exception as e:\n"
        "    print('network: no', type(e).__name__)\n"
        "try:\n"
        "    subprocess.run(['ls'])\n"
        "    print('subprocess: yes')\n"
        "except Exception as e:\n"
        "    print('subprocess: no', type(e).__name__)\n"
    )
    result = Sandbox("default").run(code, limits=GENEROUS)
    assert result.status is Status.OK, result.stderr
    assert "network: no" in result.stdout and "subprocess: no" in result.stdout


def test_limits_text_states_each_value() -> None:
    text = limits_text(Limits(cpu_seconds=1.5, wall_seconds=4, memory_mb=96, stdout_bytes=2 << 20, disk_mb=8, max_files=9))
    for fragment in ("1.5 s of CPU time", "4 s wall-clock", "96 MB of memory", "2 MiB of printed output", "8 MB / 9 files"):
        assert fragment in text
