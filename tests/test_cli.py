"""The CLI, as a user runs it: a real subprocess of `wasm-runner`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from wasm_runner import RESULT_JSON_SCHEMA

CLI = [sys.executable, "-m", "wasm_runner.cli"]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, input=stdin, timeout=300)


def test_json_result_for_hello() -> None:
    p = cli("run", "-c", "print('hi')", "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["status"] == "ok" and doc["stdout"] == "hi\n"
    import jsonschema

    jsonschema.validate(doc, RESULT_JSON_SCHEMA)


def test_behaves_like_python_file(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nprint(input().strip() + '!')\nsys.exit(3)\n")
    data = tmp_path / "in.txt"
    data.write_text("hey\n")
    p = cli("run", str(prog), "--stdin", str(data))
    assert p.stdout == "hey!\n" and p.returncode == 3


def test_limit_is_explained_in_one_line() -> None:
    p = cli("run", "-c", "while True: pass", "--cpu", "0.2")
    assert p.returncode == 124
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cpu_limit" in lines[0] and "0.2 seconds" in lines[0]


def test_bad_limits_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    p = cli("run", "-c", "print(1)", "--memory", "0", "--json")
    assert json.loads(p.stdout)["status"] == "invalid_input" and p.returncode == 2
    p = cli("run", str(tmp_path / "missing.py"))
    assert p.returncode == 2 and "cannot read" in p.stderr


def test_out_dir_and_small_runtime(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    p = cli("run", "-c", "open('/out/r.txt', 'w').write('ok')", "--out", str(out), "--runtime", "small", "--json")
    doc = json.loads(p.stdout)
    assert doc["status"] == "ok" and doc["runtime"] == "small"
    assert (out / "r.txt").read_text() == "ok"
    assert [f["path"] for f in doc["files"]] == ["/out/r.txt"]
