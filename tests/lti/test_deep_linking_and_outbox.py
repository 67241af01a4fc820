"""Deep Linking driven from the platform (a teacher picks an exercise; the platform verifies the
tool's signed answer with the tool's JWKS), and the outbox: a platform that is down gets the
score once it is back, the student's check never waiting for it."""

from __future__ import annotations

import base64
import json

import httpx

from tests.lti.conftest import Lti, audit_lines, form_of, launch, login, session_of
from tests.support.live_server import wait_until

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"
HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"


def test_a_teacher_adds_an_exercise_by_deep_linking(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        action, fields = login(lti, browser, user="teacher-1", kind="deep_link")
        picker = browser.post(action, data=fields)
        assert picker.status_code == 200 and 'data-exercise="greet"' in picker.text
        # the teacher's pick: the picker's form for "greet"
        session = picker.text.split('name="session" value="')[1].split('"')[0]
        answer = browser.post(f"{lti.tool.url}/lti/deep-link", data={"session": session, "exercise": "greet"})
        assert answer.status_code == 200, answer.text
        back, jwt_field = form_of(answer.text)
        assert back == f"{lti.platform.url}/deep-link-return"
        r = browser.post(back, data=jwt_field)  # the platform verifies the signed answer
        assert r.status_code == 200 and "added Greet" in r.text
        # a changed answer (the content item's exercise swapped, signature kept) is refused there
        head, payload, sig = jwt_field["JWT"].split(".")
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        body["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"][0]["custom"]["exercise"] = "mean"
        changed = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
        assert browser.post(back, data={"JWT": f"{head}.{changed}.{sig}"}).status_code == 400
        # and the tool refuses a pick made with a changed deep-linking session
        r = browser.post(f"{lti.tool.url}/lti/deep-link", data={"session": session[:-4] + "AAAA", "exercise": "greet"})
        assert r.status_code == 401
    items = lti.platform.gradebook.deep_links
    assert len(items) == 1
    item = items[0][0]
    assert item["type"] == "ltiResourceLink" and item["custom"] == {"exercise": "greet"}
    assert item["url"] == f"{lti.tool.url}/lti/launch" and item["lineItem"]["scoreMaximum"] == 2


def test_a_teacher_adds_a_playground_with_starter_code(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        action, fields = login(lti, browser, user="teacher-2", kind="deep_link")
        picker = browser.post(action, data=fields)
        session = picker.text.split('name="session" value="')[1].split('"')[0]
        answer = browser.post(f"{lti.tool.url}/lti/deep-link", data={
            "session": session, "playground": "1", "title": "Try loops", "starter": "for i in range(3):\n    print(i)\n"})
        back, jwt_field = form_of(answer.text)
        assert browser.post(back, data=jwt_field).status_code == 200
    item = lti.platform.gradebook.deep_links[-1][0]
    assert item["title"] == "Try loops" and item["custom"] == {"starter": "for i in range(3):\n    print(i)\n"}
    assert "lineItem" not in item  # a playground keeps no grade


def test_a_score_waits_in_the_outbox_while_the_platform_is_down(lti: Lti) -> None:
    lti.platform.down = True
    try:
        with httpx.Client(timeout=60) as browser:
            cfg = session_of(launch(lti, browser, user="student-down", link="link-down").text)
            r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": HALF},
                             headers={"X-Wasm-Runner-Launch": cfg["session"]})
            assert r.status_code == 200 and r.json()["grade"]["state"] == "queued"  # answered, not waiting
            grade_id = r.json()["grade"]["id"]
            status = lti.tool.url + cfg["statusUrl"] + grade_id
            headers = {"X-Wasm-Runner-Launch": cfg["session"]}
            # tried (and refused by the down platform) at least twice, still pending
            assert wait_until(lambda: sum(1 for a in _calls(lti) if a["status"] == "503") >= 2, timeout=60)
            assert browser.get(status, headers=headers).json()["state"] == "pending"
            assert not lti.platform.scores_for("student-down")
            lti.platform.down = False
            assert wait_until(lambda: lti.platform.scores_for("student-down"), timeout=60)
            assert wait_until(lambda: browser.get(status, headers=headers).json()["state"] == "sent", timeout=30)
    finally:
        lti.platform.down = False
    scores = lti.platform.scores_for("student-down")
    assert len(scores) == 1 and scores[0]["scoreGiven"] == 1 and scores[0]["scoreMaximum"] == 2


def test_the_best_or_the_latest_attempt_counts_as_the_exercise_says(lti: Lti) -> None:
    """The server's default (``[lti] grade``) is "best": greet says nothing, so its best attempt
    stays in the gradebook; greet-latest says ``grade = "latest"`` in its TOML, which wins, so a
    worse attempt after a better one is what the gradebook shows."""
    attempts = (HALF, SOLUTION, HALF)
    with httpx.Client(timeout=60) as browser:
        best = [_check(lti, browser, "student-best", "greet", code) for code in attempts]
        latest = [_check(lti, browser, "student-latest", "greet-latest", code) for code in attempts]
    assert [g["state"] for g in best] == ["queued", "queued", "kept_best"]
    assert [g["state"] for g in latest] == ["queued", "queued", "queued"]
    assert wait_until(lambda: len(lti.platform.scores_for("student-best")) == 2, timeout=60)
    assert wait_until(lambda: len(lti.platform.scores_for("student-latest")) == 3, timeout=60)
    assert _gradebook_shows(lti, "student-best") == 2  # of 2: the best attempt
    assert _gradebook_shows(lti, "student-latest") == 1  # of 2: the latest attempt


def _check(lti: Lti, browser: httpx.Client, user: str, exercise: str, code: str) -> dict[str, str]:
    """One Check in a fresh launch of ``exercise`` (the same resource link each time)."""
    cfg = session_of(launch(lti, browser, user=user, link=f"link-{exercise}", exercise=exercise).text)
    r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": code}, headers={"X-Wasm-Runner-Launch": cfg["session"]})
    assert r.status_code == 200, r.text
    return r.json()["grade"]  # type: ignore[no-any-return]


def _gradebook_shows(lti: Lti, user: str) -> float:
    """What an LMS shows for ``user``: the score with the newest ``timestamp`` (AGS: a platform
    keeps the newest score, whatever order they arrive in)."""
    newest = max(lti.platform.scores_for(user), key=lambda s: s["timestamp"])
    return float(newest["scoreGiven"])


def _calls(lti: Lti) -> list[dict[str, str]]:
    return [a for a in audit_lines(lti) if a.get("event") == "lti_call"]
