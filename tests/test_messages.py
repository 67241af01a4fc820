"""Tests for wasm_runner.messages: limit sentences and traceback trimming (pure functions)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wasm_runner.limits import Limits
from wasm_runner.messages import exception_line, is_user_file, limit_sentence, trim_traceback
from wasm_runner.result import Status


def _real_traceback(cell: str, tmp_path: Path) -> str:
    """A traceback printed by a real CPython for ``cell`` run by a small runner under ``<cell>``."""
    runner = tmp_path / "runner.py"
    runner.write_text(textwrap.dedent(
        """
        import sys
        source = sys.stdin.read()
        exec(compile(source, "<cell>", "exec"), {"__name__": "__main__"})
        """
    ))
    done = subprocess.run(
        [sys.executable, str(runner)], input=cell, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    return done.stderr


@pytest.mark.parametrize(
    ("status", "fragment"),
    [
        (Status.CPU_LIMIT, "more than 2.5 seconds of CPU time"),
        (Status.TIMEOUT, "ran for more than 7 seconds"),
        (Status.MEMORY_LIMIT, "more than 128 MB of memory"),
        (Status.OUTPUT_LIMIT, "printed more than 64 KB"),
        (Status.DISK_LIMIT, "disk quota of 8 MB or 10 files"),
    ],
)
def test_limit_sentence_names_the_limit_and_its_value(status: Status, fragment: str) -> None:
    limits = Limits(cpu_seconds=2.5, wall_seconds=7, memory_mb=128, stdout_bytes=65536, disk_mb=8, max_files=10)
    sentence = limit_sentence(status, limits)
    assert fragment in sentence
    assert sentence.endswith(".") and sentence.count(". ") == 0  # one sentence
    assert "\n" not in sentence


def test_limit_sentence_for_stderr_uses_its_own_cap() -> None:
    sentence = limit_sentence("output_limit", Limits(stderr_bytes=1000), stream="stderr")
    assert "wrote more than 1000 bytes to stderr" in sentence


def test_limit_sentence_ok_is_empty_and_every_status_has_one() -> None:
    assert limit_sentence(Status.OK, Limits()) == ""
    for status in Status:
        if status is not Status.OK:
            assert limit_sentence(status, Limits())


def test_one_second_is_singular() -> None:
    assert "more than 1 second of CPU time;" in limit_sentence(Status.CPU_LIMIT, Limits(cpu_seconds=1))


def test_end_lines_for_stack_input_wait_and_exit_status() -> None:
    limits = Limits(input_wait_seconds=300)
    assert limit_sentence(Status.TIMEOUT, limits, limit="input_wait") == (
        "Stopped: it waited for input for more than 5 minutes."
    )
    assert "ran out of stack" in limit_sentence(Status.ERROR, limits, limit="stack")
    assert limit_sentence(Status.ERROR, limits, exit_code=3) == (
        "Your program exited with code 3."
    )
    assert "printed more than 1 MB;" in limit_sentence(Status.OUTPUT_LIMIT, Limits())


def test_is_user_file() -> None:
    assert is_user_file("<cell>")
    assert is_user_file("<string>")
    assert is_user_file("/scratch/main.py")
    assert is_user_file("helper.py")
    assert not is_user_file("<frozen runpy>")
    assert not is_user_file("/usr/local/lib/python3.15/json/decoder.py")
    assert not is_user_file("/usr/local/lib/python3.15/site-packages/pandas/core/frame.py")


def test_trim_keeps_user_frames_and_counts_library_frames(tmp_path: Path) -> None:
    cell = "import json\n\ndef load(s):\n    return json.loads(s)\n\nload('{bad')\n"
    raw = _real_traceback(cell, tmp_path)
    trimmed = trim_traceback(raw)
    assert 'runner.py' in raw  # the runner frame is there before trimming
    assert 'runner.py' not in trimmed  # ... and gone after
    assert trimmed.startswith("Traceback (most recent call last):\n")
    assert trimmed.count('File "<cell>"') == 2  # the module line and load()
    assert "library code hidden]" in trimmed
    assert "json/decoder.py" not in trimmed and "json/__init__.py" not in trimmed
    assert exception_line(trimmed).startswith("json.decoder.JSONDecodeError:")
    assert exception_line(trimmed) == exception_line(raw)


def test_trim_of_error_in_user_code_drops_only_the_runner(tmp_path: Path) -> None:
    raw = _real_traceback("x = 1\ny = x / 0\n", tmp_path)
    trimmed = trim_traceback(raw, lambda f: f == "<cell>")
    assert trimmed.splitlines() == [
        "Traceback (most recent call last):",
        '  File "<cell>", line 2, in <module>',
        *[line for line in trimmed.splitlines()[2:-1]],
        "ZeroDivisionError: division by zero",
    ]
    assert "hidden" not in trimmed


def test_trim_of_syntax_error_shows_the_location_without_runner(tmp_path: Path) -> None:
    raw = _real_traceback("x = (\n", tmp_path)
    trimmed = trim_traceback(raw)
    assert 'runner.py' not in trimmed
    assert trimmed.lstrip().startswith('File "<cell>", line 1')
    assert "SyntaxError" in exception_line(trimmed)


def test_trim_of_chained_exceptions_trims_each(tmp_path: Path) -> None:
    cell = "try:\n    {}['k']\nexcept KeyError:\n    raise ValueError('no k')\n"
    raw = _real_traceback(cell, tmp_path)
    trimmed = trim_traceback(raw)
    assert "During handling of the above exception" in trimmed
    assert trimmed.count("Traceback (most recent call last):") == 2
    assert 'runner.py' not in trimmed
    assert "KeyError: 'k'" in trimmed and exception_line(trimmed) == "ValueError: no k"


def test_trim_without_user_frames_keeps_the_innermost() -> None:
    raw = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/runner.py", line 3, in <module>\n'
        "    main()\n"
        '  File "/usr/lib/runner.py", line 9, in main\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom\n"
    )
    trimmed = trim_traceback(raw)
    assert trimmed == (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/runner.py", line 9, in main\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom\n"
    )


def test_text_without_traceback_passes_through() -> None:
    text = "hello\n  indented\nwarning: x\n"
    assert trim_traceback(text) == text
    assert trim_traceback("") == ""
    assert exception_line("just output\n") == ""
