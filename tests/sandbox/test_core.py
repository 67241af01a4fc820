"""The sandbox's ordinary behaviour: results, input, files in and out, streaming, sessions."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from wasm_runner import Limits, Result, Sandbox, SessionEnded, Status, run
from wasm_runner.inputs import MAX_SOURCE_BYTES, MAX_STDIN_BYTES


def test_hello(sandbox: Sandbox) -> None:
    r = sandbox.run("print('hi')")
    assert r.status is Status.OK and r.exit_code == 0 and r.stdout == "hi\n" and r.stderr == ""
    assert r.fuel_used > 0 and r.wall_ms > 0 and r.runtime == sandbox.name
    assert Result.from_dict(r.to_dict()) == r


def test_module_level_run_function() -> None:
    r = run("import sys; print(sys.version_info[:2])", runtime="small")
    assert r.ok and r.stdout == "(3, 12)\n"


def test_stdin_is_fed(sandbox: Sandbox) -> None:
    r = sandbox.run("print(input().upper()); print(input())", stdin="abc\ndef\n")
    assert r.stdout == "ABC\ndef\n"


def test_exception_traceback_shows_user_code_only(sandbox: Sandbox) -> None:
    r = sandbox.run("x = 1\nraise ValueError('bad value')")
    assert r.status is Status.ERROR and r.exit_code == 1
    assert 'File "<string>", line 2' in r.stderr and "ValueError: bad value" in r.stderr
    assert "_wr_main" not in r.stderr and "guest-side wrapper" not in r.stderr


def test_syntax_error_is_reported(sandbox: Sandbox) -> None:
    r = sandbox.run("print('unclosed")
    assert r.status is Status.ERROR and "SyntaxError" in r.stderr


def test_fresh_instance_each_run(sandbox: Sandbox) -> None:
    a = sandbox.run("import sys\nx = 41\nsys.modules['leak'] = 1\nopen('left.txt', 'w').write('x')")
    assert a.ok
    b = sandbox.run("import sys, os\nprint('x' in globals(), 'leak' in sys.modules, os.listdir('.'))")
    assert b.stdout == "False False []\n"


def test_unclosed_files_keep_their_data(sandbox: Sandbox, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    r = sandbox.run("f = open('/out/data.txt', 'w')\nf.write('kept')", out_dir=out)
    assert r.ok
    assert (out / "data.txt").read_text() == "kept"
    assert [f.path for f in r.files] == ["/out/data.txt"] and r.files[0].content == b"kept"


def test_atexit_handlers_run(sandbox: Sandbox) -> None:
    r = sandbox.run("import atexit\natexit.register(print, 'bye')\nprint('hi')")
    assert r.stdout == "hi\nbye\n"


def test_files_in_and_collected_out(sandbox: Sandbox) -> None:
    code = "print(open('in/data.csv').read().strip())\nopen('/out/result.txt', 'w').write('done')"
    r = sandbox.run(code, files={"in/data.csv": b"a,b\n1,2\n"}, collect_out=True)
    assert r.ok, r.stderr
    assert r.stdout == "a,b\n1,2\n"
    assert {f.path: f.content for f in r.files} == {"/out/result.txt": b"done"}


def test_streaming_callback_sees_output_as_printed(sandbox: Sandbox) -> None:
    seen: list[tuple[str, bytes, float]] = []
    code = "import sys, time\nprint('first')\ntime.sleep(0.3)\nprint('second', file=sys.stderr)"
    r = sandbox.run(code, on_output=lambda s, b: seen.append((s, b, time.monotonic())))
    assert r.ok
    assert [(s, b) for s, b, _ in seen] == [("stdout", b"first\n"), ("stderr", b"second\n")]
    assert seen[1][2] - seen[0][2] >= 0.25  # the first line arrived before the sleep ended


def test_interactive_input_source(sandbox: Sandbox) -> None:
    lines = [b"Ada\n"]
    asked = threading.Event()

    class Typist:
        def read(self, max_bytes: int, timeout: float) -> bytes | None:
            if not asked.wait(timeout):
                return None
            return lines.pop(0) if lines else b""

    def watch(stream: str, chunk: bytes) -> None:
        if b"name?" in chunk:
            asked.set()

    r = sandbox.run("print('hello', input('name? '))", input_source=Typist(), on_output=watch)
    assert r.ok and r.stdout == "name? hello Ada\n"


def test_cancel_stops_a_busy_guest(sandbox: Sandbox) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    r = sandbox.run("while True: pass", limits=Limits(cpu_seconds=60, wall_seconds=60), cancel=cancel)
    assert r.status is Status.CANCELLED
    assert r.wall_ms < 20_000


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"code": "print('a')\x00"}, "NUL"),
        ({"code": b"print('\xff')"}, "UTF-8"),
        ({"code": "#" * (MAX_SOURCE_BYTES + 1)}, "maximum"),
        ({"code": "print(1)", "stdin": b"x" * (MAX_STDIN_BYTES + 1)}, "stdin is"),
        ({"code": "print(1)", "limits": Limits(cpu_seconds=-1)}, "cpu_seconds"),
        ({"code": "print(1)", "limits": Limits(memory_mb=10**9)}, "memory_mb"),
        ({"code": "print(1)", "limits": Limits(wall_seconds=float("nan"))}, "finite"),
        ({"code": "print(1)", "files": {"../escape": b"x"}}, "'..'"),
        ({"code": "print(1)", "data_dir": "/nonexistent-dir"}, "not a directory"),
        ({"code": 42}, "text"),
    ],
    ids=["nul", "utf8", "oversized", "stdin", "neg-cpu", "huge-mem", "nan", "upload-escape", "no-data-dir", "not-text"],
)
def test_bad_input_is_invalid_input(default_sandbox: Sandbox, kwargs: dict, needle: str) -> None:
    code = kwargs.pop("code")
    r = default_sandbox.run(code, **kwargs)
    assert r.status is Status.INVALID_INPUT
    assert needle in r.message
    assert default_sandbox.run("print(1)").ok


# ---- sessions -------------------------------------------------------------------------------------------
def test_session_keeps_state_and_files(sandbox: Sandbox) -> None:
    with sandbox.session() as s:
        assert s.run("x = 20\nopen('notes.txt', 'w').write('kept')").ok
        r = s.run("print(x * 2, open('notes.txt').read())")
        assert r.ok and r.stdout == "40 kept\n"
        assert r.fuel_used > 0
        path = s.upload("data.csv", b"a\n1\n2\n")
        r = s.run(f"print(sum(int(v) for v in open({path!r}).read().split()[1:]))")
        assert r.stdout == "3\n"


def test_session_errors_keep_it_alive_but_limits_end_it(sandbox: Sandbox) -> None:
    s = sandbox.session(limits=Limits(cpu_seconds=1, wall_seconds=60))
    try:
        r = s.run("y = 5\n1/0")
        assert r.status is Status.ERROR and "ZeroDivisionError" in r.stderr
        assert s.alive
        assert s.run("print(y)").stdout == "5\n"
        r = s.run("while True: pass")
        assert r.status is Status.CPU_LIMIT
        assert not s.alive
        with pytest.raises(SessionEnded):
            s.run("print(y)")
    finally:
        s.close()


def test_session_last_expression_is_displayed(default_sandbox: Sandbox) -> None:
    # pandas imported in the plain image: room for a busy machine (the default 10 s wall was not)
    with default_sandbox.session(limits=Limits(cpu_seconds=30, wall_seconds=120)) as s:
        r = s.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf")
        assert r.ok, r.stderr
        (shown,) = r.outputs  # one MIME bundle: the table and its text (guest/rich.py)
        assert shown.kind == "result" and sorted(json.loads(shown.data)["data"]) == ["text/html", "text/plain"]


def test_plots_come_back_as_png(default_sandbox: Sandbox) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])"
    r = default_sandbox.run(code, display=True, limits=Limits(cpu_seconds=30, wall_seconds=60))
    assert r.ok, r.stderr
    images = [o for o in r.outputs if o.mime == "image/png"]
    assert len(images) == 1
    import base64

    assert base64.b64decode(images[0].data).startswith(b"\x89PNG")


def test_without_fuel_the_wall_limit_still_holds() -> None:
    sb = Sandbox("small", fuel=False)  # the smallest module to compile for the fuel-off engine
    try:
        r = sb.run("while True: pass", limits=Limits(wall_seconds=0.5))
        assert r.status is Status.TIMEOUT and r.limit == "wall"
        assert r.fuel_used == 0
        assert sb.run("print('ok')").stdout == "ok\n"
    finally:
        sb.close()


def test_memory_cap_below_the_runtime_minimum_is_refused_clearly(sandbox: Sandbox) -> None:
    r = sandbox.run("print(1)", limits=Limits(memory_mb=16))
    if sandbox.min_memory_mb > 16:
        assert r.status is Status.INVALID_INPUT and "needs to start" in r.message
    else:
        assert r.ok


def test_ordinary_file_operations(sandbox: Sandbox) -> None:
    code = (
        "import os, shutil\n"
        "os.makedirs('a/b')\n"
        "open('a/b/f.txt', 'w').write('hello')\n"
        "os.rename('a/b/f.txt', 'a/g.txt')\n"
        "os.utime('a/g.txt', (1, 2))\n"
        "print(sorted(os.listdir('a')), os.stat('a/g.txt').st_size, os.stat('a/g.txt').st_mtime)\n"
        "with open('a/g.txt', 'r+') as f:\n"
        "    f.truncate(2)\n"
        "print(open('a/g.txt').read())\n"
        "with open('a/g.txt', 'a') as f:\n"
        "    f.write('!!')\n"
        "print(open('a/g.txt').read())\n"
        "os.remove('a/g.txt'); os.rmdir('a/b'); shutil.rmtree('a')\n"
        "print(os.listdir('.'), os.path.exists('a'))\n"
        "for i in range(3):\n"  # the quota is freed by deletes: 3 x 1.5 MB in a 2 MB quota
        "    open('big', 'wb').write(b'x' * 1_500_000)\n"
        "    os.remove('big')\n"
        "print('quota reused')\n"
    )
    r = sandbox.run(code, limits=Limits(disk_mb=2))
    assert r.ok, r.stderr
    assert r.stdout == "['b', 'g.txt'] 5 2.0\nhe\nhe!!\n[] False\nquota reused\n"


def test_run_folders_of_dead_processes_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    monkeypatch.setenv("WASM_RUNNER_WORKDIR", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"wasm-runner-{dead.stdout.strip()}-abc"
    (stale / "run-x" / "scratch").mkdir(parents=True)
    (stale / "run-x" / "scratch" / "left.txt").write_text("user data")
    alive = tmp_path / f"wasm-runner-{os.getppid()}-abc"
    alive.mkdir()
    sb = Sandbox("small")
    try:
        assert not stale.exists() and alive.exists()
        assert sb.run("print(1)").ok
    finally:
        sb.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [alive.name]


def test_on_guest_end_sees_each_guest_and_cannot_break_a_run(default_sandbox: Sandbox) -> None:
    """The hook bench uses for the guest thread's CPU time (instead of patching the guest)."""
    seen: list[tuple[float, int]] = []
    default_sandbox.on_guest_end = lambda oc: seen.append((oc.cpu_s, oc.fuel_used))
    try:
        r = default_sandbox.run("x = 0\nfor i in range(200_000): x += i")
        assert r.ok and len(seen) == 1
        assert seen[0][0] > 0 and seen[0][1] == r.fuel_used > 0

        def broken(oc: object) -> None:
            raise RuntimeError("observer bug")

        default_sandbox.on_guest_end = broken
        r = default_sandbox.run("print('still fine')")
        assert r.ok and r.stdout == "still fine\n"
    finally:
        default_sandbox.on_guest_end = None
