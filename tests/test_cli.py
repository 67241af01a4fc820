"""The CLI, as a user runs it: a real subprocess of `wasm-runner`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


GREET = "name = input('Name: ')\nprint(f'Hello, {name}!')\n"


def test_piped_stdin_reaches_the_program(tmp_path: Path) -> None:
    """`echo Ada | wasm-runner run greet.py`, like `python greet.py`."""
    prog = tmp_path / "greet.py"
    prog.write_text(GREET)
    p = cli("run", str(prog), stdin="Ada\n")
    assert (p.returncode, p.stdout, p.stderr) == (0, "Name: Hello, Ada!\n", "")
    p = cli("run", str(prog), "--stdin", "-", stdin="Bob\n")
    assert (p.returncode, p.stdout) == (0, "Name: Hello, Bob!\n")
    p = cli("run", str(prog), stdin="")  # nothing piped: EOF, as in Python
    assert p.returncode == 1 and "EOFError" in p.stderr


def test_piped_stdin_streams_past_the_one_shot_cap(tmp_path: Path) -> None:
    """Piped input is read as the program asks for it, so it is not bounded by MAX_STDIN_BYTES."""
    from wasm_runner.inputs import MAX_STDIN_BYTES

    size = MAX_STDIN_BYTES + (1 << 20)
    code = "import sys\nn = 0\nwhile chunk := sys.stdin.buffer.read(65536):\n    n += len(chunk)\nprint(n)"
    done = subprocess.run(
        [*CLI, "run", "-c", code], input=b"x" * size, capture_output=True, timeout=300, check=False
    )
    assert done.returncode == 0 and done.stdout == f"{size}\n".encode()


def test_stdin_cannot_be_both_program_and_input() -> None:
    p = cli("run", "-", "--stdin", "-", stdin="print(1)\n")
    assert p.returncode == 2 and "cannot both come from stdin" in p.stderr and "Traceback" not in p.stderr


def _spawn_in_terminal(*args: str) -> tuple[subprocess.Popen[bytes], int]:
    """`wasm-runner ARGS` with a pseudo-terminal as its stdin, stdout and stderr."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, *args], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    return proc, master


def _read_until(master: int, wanted: bytes, seen: bytearray, limit: float = 240.0) -> bool:
    """Read the terminal into ``seen`` until ``wanted`` appears or the program's side closes."""
    import select

    end = time.monotonic() + limit  # liveness bound only, never a speed assertion
    while wanted not in seen and time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer of the terminal has exited
                break
            if not chunk:
                break
            seen += chunk
    return wanted in seen


def test_input_in_a_terminal_prompts_and_waits_for_the_line(tmp_path: Path) -> None:
    prog = tmp_path / "greet.py"
    prog.write_text(GREET + "print(input('Again: ').upper())\n")
    proc, master = _spawn_in_terminal("run", str(prog))
    seen = bytearray()
    try:
        assert _read_until(master, b"Name: ", seen), bytes(seen)
        assert proc.poll() is None, "the program waits for the user's line"
        os.write(master, b"Ada\n")
        assert _read_until(master, b"Again: ", seen), bytes(seen)
        assert b"Hello, Ada!" in seen
        os.write(master, b"twice\n")
        assert _read_until(master, b"TWICE", seen), bytes(seen)
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_limits_hold_around_terminal_input(tmp_path: Path) -> None:
    """Thinking time is not run time (as for every face): after the line arrives the wall limit
    still stops an endless loop; an input() nobody answers ends at --input-wait."""
    prog = tmp_path / "loop.py"
    prog.write_text("input('Go? ')\nwhile True:\n    pass\n")
    proc, master = _spawn_in_terminal("run", str(prog), "--timeout", "1.5", "--cpu", "60")
    seen = bytearray()
    try:
        assert _read_until(master, b"Go? ", seen), bytes(seen)
        os.write(master, b"yes\n")
        assert proc.wait(timeout=120) == 124
        _read_until(master, b"does not count", seen, limit=5)
        text = bytes(seen).decode()
        assert "wasm-runner: timeout:" in text and "1.5 seconds" in text and "Traceback" not in text
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    proc, master = _spawn_in_terminal("run", str(prog), "--input-wait", "1.5")
    seen = bytearray()
    try:
        assert _read_until(master, b"Go? ", seen), bytes(seen)
        assert proc.wait(timeout=120) == 124  # nobody types: the wait is abandoned
        _read_until(master, b"for input.", seen, limit=5)
        assert "waited for input for more than 1.5 seconds" in bytes(seen).decode()
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


def test_warm_prepares_what_the_servers_profiles_and_runtimes_use_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wasm_runner.cli import warm_targets

    monkeypatch.delenv("WASM_RUNNER_CONFIG", raising=False)
    # the built-in profiles (datascience) and runtimes (default's plain, small); no fuel-off module
    assert warm_targets(None, None) == [("default", "plain"), ("default", "datascience"), ("small", None)]
    assert warm_targets(["small"], None) == [("small", None)]
    config = tmp_path / "server.toml"
    config.write_text('[server]\nruntimes = ["small"]\n\n[profiles.student]\nruntime = "small"\n\n'
                      '[profiles.analyst]\nruntime = "small"\npool_size = 0\npreload = []\n')
    assert warm_targets(None, str(config)) == [("small", None)]
    bad = cli("warm", "--config", str(tmp_path / "missing.toml"))
    assert bad.returncode == 2 and "cannot read config" in bad.stderr


def test_an_error_is_explained_under_its_traceback_in_the_asked_language() -> None:
    p = cli("run", "-c", "total = 3\nprint(totl)\n", "--lang", "de")
    assert p.returncode == 1
    traceback, _, explanation = p.stderr.partition("\nwasm-runner: ")
    assert traceback.rstrip().endswith("NameError: name 'totl' is not defined. Did you mean: 'total'?")
    assert explanation.splitlines()[0] == "Ist 'totl' falsch geschrieben?"
    assert "Meintest du 'total'?" in explanation
    doc = json.loads(cli("run", "-c", "print('You are ' + 12)", "--json").stdout)
    assert doc["explanation"]["id"] == "str_plus_other" and doc["explanation"]["lang"] == "en"
    assert doc["explanation"]["span"] == {"line": 1, "col": 6, "end_col": 21}


def test_lint_marks_beginner_mistakes_in_plain_words(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("def add(total, n):\n    totl = total + n\n    return total\nprint(totall)\n")
    p = cli("lint", str(prog))
    assert p.returncode == 1
    assert p.stdout.splitlines() == [
        f"{prog}:2:5: warning: Value never used: `totl` gets a value that is never used. "
        "Is the name misspelt where you use it, or can this line go?",
        f"{prog}:4:7: error: Unknown name: Python does not know `totall` here. "
        "Check its spelling, or give it a value before this line.",
    ]
    found = json.loads(cli("lint", "-", "--json", stdin=prog.read_text()).stdout)["findings"]
    assert [(f["rule"], f["line"], f["column"]) for f in found] == [("F841", 2, 5), ("F821", 4, 7)]
    german = cli("lint", "--lang", "de", str(prog))
    assert german.returncode == 1 and german.stdout.splitlines()[1] == (
        f"{prog}:4:7: error: Unbekannter Name: Python kennt `totall` hier nicht. "
        "Prüfe die Schreibweise, oder gib dem Namen vor dieser Zeile einen Wert.")


def test_lint_style_notes_clean_file_and_errors(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("def Add(a, b):\n    return a + b\nprint(Add(1, 2))\n")
    clean = cli("lint", str(prog))
    assert clean.returncode == 0 and clean.stdout == "" and "no mistakes found" in clean.stderr
    styled = cli("lint", "--style", str(prog))
    assert styled.returncode == 1 and ": info: Function name style: " in styled.stdout
    missing = cli("lint", str(tmp_path / "missing.py"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    (tmp_path / "big.py").write_text("x = 1\n" * 50_000)
    big = cli("lint", str(tmp_path / "big.py"))
    assert big.returncode == 2 and "lint takes at most 262144" in big.stderr
