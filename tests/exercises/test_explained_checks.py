"""A teacher test that calls a function the student's code does not define gets the same
explanation on both tiers (issue 36 §1): the server's check (``guest/check_agent.py``) and the
page's practice check in Pyodide under Node (``guest/check_harness.py`` judged by
``practice.py``, rendered by ``web/src/explain.js``), from ``judging.missing_function``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_sandbox
from wasm_runner import Limits
from wasm_runner.exercises import check_code, cli, load_exercise
from wasm_runner.explanations import render

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXERCISE = load_exercise(HERE / "add-missing.toml")
QUICK = Limits(cpu_seconds=2, wall_seconds=10, memory_mb=256)
PROGRAMS = {
    "no function": "print('hello')\n",
    "misspelt": "def ad(a, b):\n    return a + b\n",
    "another name": "def plus(a, b):\n    return a + b\n\nTOTAL = plus(1, 2)\n",
    "wrong sum": "def add(a, b):\n    return a - b\n",  # defined: a plain failure, no explanation
}
LANGS = ("en", "de")


@pytest.fixture(scope="module")
def server() -> dict[str, dict[str, Any]]:
    sandbox = shared_sandbox("default", "plain")
    return {name: check_code(EXERCISE, code, sandbox=sandbox, limits=QUICK)["checks"][0]
            for name, code in PROGRAMS.items()}


@pytest.fixture(scope="module")
def browser() -> dict[str, dict[str, Any]]:
    request = {"bundle": EXERCISE.bundle(), "programs": list(PROGRAMS.values()), "langs": list(LANGS)}
    done = subprocess.run(["node", str(HERE / "browser_checks.mjs")], cwd=REPO, input=json.dumps(request),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    return {name: answer[i] for i, name in enumerate(PROGRAMS)}


def test_the_server_says_the_function_is_missing(server: dict[str, dict[str, Any]]) -> None:
    for name in ("no function", "misspelt", "another name"):
        check = server[name]
        assert not check["passed"] and "NameError: name 'add' is not defined" in check["message"]
        assert check["explanation"]["lang"] == "en"
        assert check["explanation"]["title"] == "Your code does not define add yet"
    e = server["no function"]["explanation"]
    assert e["id"] == "exercise_missing_function"
    assert e["text"] == "The teacher's test calls add(a, b), but your code has no function named add."
    for name, defined in (("misspelt", "ad"), ("another name", "plus")):  # probably the one, renamed
        e = server[name]["explanation"]
        assert (e["id"], e["params"]["defined"]) == ("exercise_function_named_otherwise", defined)
        assert e["text"] == ("The teacher's test calls add(a, b), but your code has no function named add. "
                             f"It has one named {defined}.")
        assert e["hint"].startswith(f"If {defined} is the function the exercise asks for, rename it to add")
    wrong = server["wrong sum"]
    assert not wrong["passed"] and "explanation" not in wrong and "got:      -1" in wrong["message"]


def test_the_browser_says_the_same_in_each_language(server: dict[str, dict[str, Any]],
                                                     browser: dict[str, dict[str, Any]]) -> None:
    for name, check in server.items():
        for lang in LANGS:
            (got,) = browser[name][lang]
            assert (got["name"], got["passed"]) == (check["name"], check["passed"])
            if "explanation" not in check:
                assert got["explanation"] is None, (name, got)
                continue
            want = render({**check["explanation"]}, lang)  # the server's id and params, in lang
            assert got["explanation"] == want, (name, lang, got["explanation"], want)
    german = browser["misspelt"]["de"][0]["explanation"]
    assert german["lang"] == "de" and "add(a, b)" in german["text"]
    assert german["title"] != server["misspelt"]["explanation"]["title"]


def test_the_cli_explains_in_the_asked_language(server: dict[str, dict[str, Any]], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`wasm-runner exercise run --lang de`: a failed check's explanation under it, in German."""
    student = tmp_path / "student.py"
    student.write_text(PROGRAMS["misspelt"], encoding="utf-8")
    assert cli.main(["run", str(HERE / "add-missing.toml"), str(student), "--lang", "de"]) == 1
    out = capsys.readouterr().out
    german = render({**server["misspelt"]["explanation"]}, "de")
    english = server["misspelt"]["explanation"]
    assert german["title"] in out and german["text"] in out and german["hint"] in out
    assert english["title"] not in out
