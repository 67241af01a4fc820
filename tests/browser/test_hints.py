"""Hints and grading on the exercise page, in real headless Chromium against the real server
(the shared one: exercises_dir = tests/exercises, ``double.toml``): the student reveals hints
one at a time with "Show a hint"; a reloaded page shows them again; a Check on the server sends
the page's count and the server answers its own; the browser tier's practice check says the
same score (weights) and the teacher's message for a failing hidden check."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.browser import READY_SECONDS, open_playground, poll, shared_browser, shared_server

SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
# passes "two" (weight 1) and the hidden test (weight 0), fails the hidden negative case (weight 3)
ABS = "def double(n):\n    return abs(2 * n)\n\nprint(double(int(input())))\n"
HINTS = ["Multiply the number by 2 inside double.", "Try your function with a negative number too: double(-3) is -6."]
TEACHER = "Does your program work for negative numbers?"


def texts(page, selector: str) -> list[str]:  # type: ignore[no-untyped-def]
    return page.evaluate(f"Array.from(document.querySelectorAll({selector!r}), (e) => e.textContent)")  # type: ignore[no-any-return]


def press_check(page, code: str) -> None:  # type: ignore[no-untyped-def]
    page.evaluate("(code) => window.playground.editor.setCode(code)", code)
    page.click(".check-button")
    poll(page, "document.querySelector('.check-summary').textContent.includes('of 3 checks')", timeout=180)


def test_hints_one_at_a_time_and_counted_with_a_server_check() -> None:
    context = shared_browser().new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(shared_server() + "/?exercise=double&tier=server")
    poll(page, "window.playground && window.playground.exercise && window.playground.exercise.exercise", timeout=60)
    poll(page, "document.querySelector('.hint-button')")
    assert texts(page, ".hint-button") == ["Show a hint (1 of 3)"] and texts(page, ".hint") == []
    page.click(".hint-button")
    assert texts(page, ".hint") == HINTS[:1] and texts(page, ".hint-button") == ["Show another hint (2 of 3)"]
    page.click(".hint-button")
    assert texts(page, ".hint") == HINTS
    assert page.evaluate("document.querySelector('.hint-list').getAttribute('aria-live')") == "polite"
    press_check(page, ABS)
    assert texts(page, ".check-summary") == ["2 of 3 checks passed, score 25%."]
    assert texts(page, ".check-where") == ["Checked on the server. Hints used: 2 of 3."]
    messages = texts(page, ".check-message")
    assert messages == [f"Hidden check failed. {TEACHER}"]  # the hidden case's words, nothing else
    assert "-41" not in page.content() and "quokka" not in page.content()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "exercise-hints-server.png"), full_page=True)
    # a reloaded page shows the hints already seen
    page.reload()
    poll(page, "document.querySelectorAll('.hint').length === 2", timeout=60)
    assert texts(page, ".hint-button") == ["Show another hint (3 of 3)"]
    page.click(".hint-button")
    assert texts(page, ".hint-button") == ["All 3 hints shown"]
    assert page.evaluate("document.querySelector('.hint-button').disabled") is True
    context.close()


def test_the_browser_tier_shows_hints_and_the_same_score() -> None:
    page = open_playground("/?exercise=double&tier=browser")
    poll(page, "window.playground.exercise && window.playground.exercise.exercise", timeout=READY_SECONDS)
    poll(page, "document.querySelector('.hint-button')")
    page.click(".hint-button")
    press_check(page, ABS)
    assert texts(page, ".check-summary") == ["2 of 3 checks passed, score 25%."]
    where = texts(page, ".check-where")[0]
    assert where.startswith("Practice check, in your browser") and where.endswith("Hints used: 1 of 3.")
    assert any(m.startswith(TEACHER) for m in texts(page, ".check-message"))
    page.screenshot(path=str(SCREENSHOTS / "exercise-hints-browser.png"), full_page=True)
    assert page.errors == []
    page.context.close()
