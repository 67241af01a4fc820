"""In Chromium (Debian's, driven by Playwright): the platform's course page frames the tool, the
launch runs through the browser (redirects, the platform's auto-posted id_token), the student
types code and presses Check in the iframe, the page says the grade was sent and the platform's
gradebook has it. The tool sets no cookie: nothing in the launch depends on one (an iframe's
third-party cookies are blocked by browsers)."""

from __future__ import annotations

import time

from tests.lti.conftest import Lti
from tests.support.browser import shared_browser
from tests.support.live_server import wait_until

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"


def test_a_student_checks_in_the_platforms_iframe_and_the_grade_lands(lti: Lti) -> None:
    context = shared_browser().new_context()
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{lti.platform.url}/course?user=student-browser&exercise=greet&link=link-browser")
        tool = page.frame_locator("#tool")
        tool.locator("#code").wait_for(timeout=60_000)
        assert tool.locator("h1").inner_text() == "Greet"
        tool.locator("#code").fill(SOLUTION)
        tool.locator("#stdin").fill("Ada")
        tool.locator("#run").click()  # the first run
        deadline = time.monotonic() + 60
        while "Hello, Ada!" not in tool.locator("#results").inner_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tool.locator("#results").inner_text().strip() == "Hello, Ada!"
        tool.locator("#check").click()
        deadline = time.monotonic() + 90
        while tool.locator("#grade").inner_text() != "Grade sent." and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tool.locator("#grade").inner_text() == "Grade sent."
        assert "2 of 2 checks passed" in tool.locator("#results").inner_text()
        assert context.cookies(lti.tool.url) == []  # the launch needed no cookie
        assert errors == []
    finally:
        context.close()
    assert wait_until(lambda: lti.platform.scores_for("student-browser"), timeout=10)
    (score,) = lti.platform.scores_for("student-browser")
    assert (score["scoreGiven"], score["scoreMaximum"]) == (2, 2)
