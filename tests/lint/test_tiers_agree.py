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
# the German pass: a few files whose findings cover Ruff's rules, ours, the style notes and a syntax error
GERMAN = [HERE / "corpus" / name for name in (
    "misspelt_name.py", "unreachable_after_branches.py", "thrown_away_values.py", "style_notes.py",
    "missing_colon.py")]


@pytest.fixture(scope="module")
def browser_findings() -> dict[object, object]:
    jobs = [[str(path), style] for path in CORPUS for style in (False, True)]
    german = [[str(path), True, "de-AT"] for path in GERMAN]
    done = subprocess.run(["node", str(NODE_SCRIPT)], input=json.dumps(jobs + german), capture_output=True,
                          text=True, timeout=180, check=True)
    found = json.loads(done.stdout)
    out: dict[object, object] = {"version": found.pop("version")}
    out.update({(path, style): found[path][str(style).lower()] for path, style in jobs})
    out.update({(path, "de"): found[path]["true:de-AT"] for path, _, _ in german})
    return out


@pytest.mark.parametrize("style", [False, True], ids=["beginner", "style"])
@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_same_findings_on_both_tiers(path: Path, style: bool, browser_findings: dict[object, object]) -> None:
    server = lint_source(path.read_text(), style=style)
    browser = browser_findings[(str(path), style)]
    assert browser == server


@pytest.mark.parametrize("path", GERMAN, ids=[p.stem for p in GERMAN])
def test_same_german_words_on_both_tiers(path: Path, browser_findings: dict[object, object]) -> None:
    """The page's lang (de-AT: German) words the marks on both tiers alike, in German."""
    server = lint_source(path.read_text(), style=True, lang="de-AT")
    assert browser_findings[(str(path), "de")] == server
    english = {(f["rule"], f["line"]): f for f in lint_source(path.read_text(), style=True)}
    assert server and all(f["title"] != english[(f["rule"], f["line"])]["title"] for f in server)
    assert [{**f, "title": "", "message": ""} for f in server] == [
        {**english[(f["rule"], f["line"])], "title": "", "message": ""} for f in server]  # only the words differ


def test_every_rule_has_its_german_words() -> None:
    table = rule_table()
    assert table.languages == ("en", "de")
    for rule in (*table.beginner, *table.own, *table.style, table.syntax):
        assert rule.title_in("de") != rule.title and rule.message("`x`", "de") != rule.message("`x`"), rule.code


def test_an_unknown_language_gets_english() -> None:
    code = "print(totl)\n"
    english = lint_source(code)
    assert lint_source(code, lang="fr") == lint_source(code, lang="") == english
    (german,) = lint_source(code, lang="DE_de")
    assert german["title"] == "Unbekannter Name"
    assert german["message"] == (
        "Python kennt `totl` hier nicht. Prüfe die Schreibweise, oder gib dem Namen vor dieser Zeile einen Wert.")


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


def test_code_after_branches_that_all_leave_never_runs() -> None:
    code = ("def sign(n):\n    if n > 0:\n        return 1\n    elif n < 0:\n        return -1\n"
            "    else:\n        return 0\n    print(n)\n\n"
            "def parse(text):\n    try:\n        return int(text)\n    except ValueError:\n        raise\n"
            "    return 0\n\n"
            "def maybe(n):\n    if n:\n        return 1\n    elif n is None:\n        return 2\n    return 3\n")
    findings = lint_source(code)
    assert [(f["rule"], f["line"], f["detail"]) for f in findings] == [
        ("WR101", 8, "Code after `if` never runs"), ("WR101", 15, "Code after `try` never runs")]
    assert findings[0]["message"].startswith("This code can never run: Python never gets past the `if` just before it.")
