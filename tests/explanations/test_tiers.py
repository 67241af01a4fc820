"""The explanation corpus (``programs.json``: beginner programs and the explanation each should
get) on both tiers: the server's CPython on WASI and Pyodide under Node (the page's controller),
in English and German. Each program gets its explanation on each tier, and both tiers say the
same: title, text, hint and the highlighted span (docs/explanations.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_sandbox
from wasm_runner import Limits
from wasm_runner.explanations import render

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROGRAMS: list[dict[str, Any]] = json.loads((HERE / "programs.json").read_text(encoding="utf-8"))
LANGS = ("en", "de")
# what differs between the tiers on purpose: the working folder a file was looked for in
TIER_PARAMS = {"file_not_found": "folder", "file_outside": "folder", "file_outside_write": "folder"}


def server_run(program: dict[str, Any]) -> Any:
    limits = Limits.from_dict(program["limits"]) if program.get("limits") else None
    return shared_sandbox("default", "plain").run(
        program["code"], stdin=program.get("stdin") or "", filename="main.py", limits=limits)


@pytest.fixture(scope="module")
def server() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for program in PROGRAMS:
        result = server_run(program)
        out[program["name"]] = {"status": result.status.value, **{
            lang: render(result.explanation, lang) if result.explanation else None for lang in LANGS}}
    return out


@pytest.fixture(scope="module")
def browser() -> dict[str, dict[str, Any]]:
    done = subprocess.run(["node", str(HERE / "browser_corpus.mjs"), *LANGS], cwd=REPO, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return answer


def test_the_corpus_covers_forty_beginner_errors_and_the_limits() -> None:
    ids = {p["id"] for p in PROGRAMS}
    assert len(PROGRAMS) >= 40 and len(ids) >= 40
    assert {"name_misspelt", "str_plus_other", "text_plus_number", "missing_colon", "unclosed_bracket",
            "assign_in_condition", "print_statement", "tab_error", "index_out_of_range", "key_missing_few",
            "zero_division", "attribute_misspelt", "not_callable", "none_value", "unbound_local", "recursion",
            "limit_timeout", "limit_output", "module_not_found", "file_not_found"} <= ids


@pytest.mark.parametrize("tier", ["server", "browser"])
def test_each_program_gets_its_explanation(tier: str, request: pytest.FixtureRequest) -> None:
    got = request.getfixturevalue(tier)
    wrong = []
    for program in PROGRAMS:
        for lang in LANGS:
            e = got[program["name"]][lang]
            if not e or e["id"] != program["id"] or not (e["title"] and e["text"] and e["hint"]):
                wrong.append((program["name"], lang, e and e["id"]))
            elif "{" in e["title"] + e["text"] and "{" not in program["code"]:
                wrong.append((program["name"], lang, "a placeholder left: " + e["text"]))
    assert not wrong, wrong


def test_both_tiers_say_the_same(server: dict[str, Any], browser: dict[str, Any]) -> None:
    differ = []
    for program in PROGRAMS:
        name = program["name"]
        for lang in LANGS:
            s, b = server[name][lang], browser[name][lang]
            if s is None or b is None:
                differ.append((name, lang, s, b))
                continue
            tier_param = TIER_PARAMS.get(s["id"])
            if tier_param:  # the same once the tier's own value is put in
                b = render({**b, "params": {**b["params"], tier_param: s["params"][tier_param]}}, lang)
            for field in ("id", "title", "text", "hint", "span"):
                if s[field] != b[field]:
                    differ.append((name, lang, field, s[field], b[field]))
    assert not differ, json.dumps(differ, indent=1, ensure_ascii=False)


def test_the_explanation_is_in_the_asked_language(server: dict[str, Any]) -> None:
    e = server["str_plus_int"]
    assert e["en"]["title"] == "Text and a number cannot be joined with +"
    assert e["de"]["title"] == "Text und Zahl lassen sich nicht mit + verbinden"
    assert "str(age)" in e["en"]["hint"] and "str(age)" in e["de"]["hint"]
    loop = server["endless_loop"]["en"]
    assert "your loop's condition never becomes false" in loop["text"]


def test_a_missing_import_and_a_tuple_get_advice_that_fits(server: dict[str, Any]) -> None:
    """Issue 36's list checked on the server tier: a module used without its import is told to
    import it; a tuple is not told to rebuild it like text."""
    random = server["missing_import"]["en"]
    assert random["title"] == "The module random is not imported"
    assert random["text"].startswith("You use the module random without importing it")
    assert random["hint"] == "Add import random at the top of the program."
    assert "import random" in server["missing_import"]["de"]["hint"]
    tuple_ = server["tuple_assign"]["en"]
    assert tuple_["title"] == "A value of type tuple cannot be changed"
    assert "for a tuple, use a list (list(t))" in tuple_["hint"]


def test_the_review_s_cases_get_an_explanation_that_fits(server: dict[str, Any]) -> None:
    """Issue 36 §1, the last review's list, on the server tier (test_both_tiers_say_the_same
    holds the browser to the same text and span)."""
    colon = server["while_no_colon"]["en"]
    assert colon["id"] == "missing_colon" and colon["span"] == {"line": 1, "col": 6, "end_col": 10}  # True
    assert server["missing_colon"]["en"]["span"] == {"line": 2, "col": 7, "end_col": 8}  # the 2 of "if x > 2"
    assert server["def_no_parentheses"]["en"]["hint"].startswith("Write def greet():")
    assert server["method_not_called"]["en"]["title"] == "name.upper is a method: call it with ()"
    assert server["method_not_called"]["en"]["hint"] == "Write name.upper() to call it."
    assert server["function_not_called"]["en"]["title"] == "roll is a function: call it with ()"
    assert server["len_of_number"]["en"]["title"] == "A value of type int has no length"
    assert server["round_text"]["en"]["title"] == "round() needs a number, not text"
    assert "round(float(x))" in server["round_text"]["en"]["hint"]
    assert server["int_of_empty_line"]["en"]["title"] == "The text is empty"
    index = server["index_literal"]["en"]
    assert index["text"].startswith("'cat' has 3 items, at positions 0 to 2.")
    for name in ("absolute_path_read", "absolute_path_write"):
        e = server[name]["en"]
        assert "/etc/passwd" in e["title"] and "in the working folder" not in e["text"]
        assert "outside the working folder /scratch" in e["text"]
    assert "may write only in its working folder" in server["absolute_path_write"]["en"]["text"]
    assert server["absolute_path_write"]["en"]["hint"] == "Write to a file in the working folder instead: open('passwd', 'w')."
    # the marks: the whole indentation of the offending line
    assert server["indent_unmatched"]["en"]["span"] == {"line": 3, "col": 0, "end_col": 4}
    assert server["indent_unexpected"]["en"]["span"] == {"line": 2, "col": 0, "end_col": 4}
