"""The lint gives the same findings on both tiers: the server's ``ruff`` command
(``wasm_runner.lint``) and the browser's Ruff WebAssembly build with ``web/src/lint.js``, run
in Node on the same files (tests/browser/test_lint.py does it in Chromium too)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from wasm_runner.lint import lint_source, rule_table

HERE = Path(__file__).resolve().parent
CORPUS = sorted((HERE / "corpus").glob("*.py"))
NODE_SCRIPT = HERE / "lint_in_node.mjs"


@pytest.fixture(scope="module")
def browser_findings() -> dict[object, object]:
    jobs = [[str(path), style] for path in CORPUS for style in (False, True)]
    done = subprocess.run(["node", str(NODE_SCRIPT)], input=json.dumps(jobs), capture_output=True, text=True,
                          timeout=180, check=True)
    found = json.loads(done.stdout)
    out: dict[object, object] = {"version": found.pop("version")}
    out.update({(path, style): found[path][str(style).lower()] for path, style in jobs})
    return out


@pytest.mark.parametrize("style", [False, True], ids=["beginner", "style"])
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_same_findings_on_both_tiers(path: Path, style: bool, browser_findings: dict[object, object]) -> None:
    server = lint_source(path.read_text(), style=style)
    browser = browser_findings[(str(path), style)]
    assert browser == server


def test_the_corpus_meets_every_beginner_rule(browser_findings: dict[object, object]) -> None:
    """Each rule of the table is found somewhere in the corpus, so the comparison covers it."""
    table = rule_table()
    seen = {f["rule"] for path in CORPUS for f in lint_source(path.read_text(), style=True)}
    wanted = {*table.codes(style=True), *(rule.code for rule in table.own), "syntax"}
    assert wanted - seen == set()
    assert str(browser_findings["version"]).startswith("0.")


def test_plain_words_name_the_mistake() -> None:
    findings = lint_source("total = 0\nprint(totl)\nif total == None:\n    pass\n")
    assert [(f["rule"], f["line"], f["column"], f["end_column"]) for f in findings] == [
        ("F821", 2, 7, 11), ("E711", 3, 13, 17)]
    assert findings[0]["message"] == (
        "Python does not know `totl` here. Check its spelling, or give it a value before this line.")
    assert findings[0]["severity"] == "error" and findings[0]["title"] == "Unknown name"
    assert findings[1]["message"].startswith("To check for None, write `is None`")


def test_columns_count_characters_not_bytes() -> None:
    (finding,) = lint_source('naïve = "😀"; print(naive)\n')
    assert (finding["line"], finding["column"], finding["end_column"]) == (1, 20, 25)  # in UTF-8 bytes it would start at 24


def test_own_rules_mark_code_that_never_runs_and_a_value_thrown_away() -> None:
    code = "def half(n):\n    return n / 2\n    print(n)\n\nscores = [3, 1]\nscores[0] + 1\nscores[0]\n"
    findings = lint_source(code)
    assert [(f["rule"], f["line"], f["column"], f["end_line"], f["end_column"]) for f in findings] == [
        ("WR101", 3, 5, 3, 13), ("WR102", 6, 1, 6, 14)]
    assert findings[0]["title"] == "Never runs"
    assert findings[0]["message"].startswith(
        "This code can never run: Python never gets past the `return` just before it.")
    assert findings[1]["message"].startswith("This line computes a value and then throws it away")


def test_the_last_line_shows_its_value_so_nothing_marks_it() -> None:
    """The playground shows the last expression's value like a notebook cell (guest/rich.py)."""
    assert lint_source("x = 1\nx\n") == []
    assert [f["rule"] for f in lint_source("x = 1\nx\nprint(x)\n")] == ["B018"]
    assert [f["rule"] for f in lint_source("x = 1\nx + 1\nx == 2\n")] == ["WR102"]
