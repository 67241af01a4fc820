"""An LTI 1.3 launch from an independent platform (lti1p3platform on 127.0.0.1): OIDC login, the
id_token validated, the exercise page with a launch session and no API key; a server-side check
by the launched student reaches the platform's gradebook through AGS."""

from __future__ import annotations

import httpx

from tests.lti.conftest import Lti, audit_lines, launch, session_of
from tests.support.live_server import KEY, wait_until

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"
HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"


def test_a_launched_students_check_lands_in_the_platforms_gradebook(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        page = launch(lti, browser, user="student-7", exercise="greet", link="link-greet")
        assert page.status_code == 200, page.text
        assert "Greet" in page.text and KEY not in page.text  # the page holds no API key
        assert lti.platform.url in page.headers["content-security-policy"]  # the platform may frame it
        cfg = session_of(page.text)
        r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["passed"] and answer["grade"]["state"] == "queued"
        assert wait_until(lambda: lti.platform.scores_for("student-7"), timeout=60)
        state = browser.get(lti.tool.url + cfg["statusUrl"] + answer["grade"]["id"],
                            headers={"X-Wasm-Runner-Launch": cfg["session"]}).json()["state"]
        assert state == "sent"
    score = lti.platform.scores_for("student-7")[0]
    assert (score["scoreGiven"], score["scoreMaximum"]) == (2, 2)
    assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"
    item = lti.platform.gradebook.lineitems[score["lineitem"]]
    assert item["resourceId"] == "greet" and item["resourceLinkId"] == "link-greet"
    calls = [a for a in audit_lines(lti) if a.get("event") == "lti_call"]
    assert {c["path"] for c in calls} >= {"/jwks", "/token", "/lineitems", "/lineitems/1/scores"}


def test_the_exercise_page_runs_code_and_a_playground_launch_runs_its_starter(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        cfg = session_of(launch(lti, browser, user="student-run", link="link-run").text)
        r = browser.post(lti.tool.url + cfg["runUrl"], json={"code": SOLUTION, "stdin": "Ada\n"},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 200 and r.json()["stdout"] == "Hello, Ada!\n", r.text
        page = launch(lti, browser, user="student-play", link="link-play", starter="print(6 * 7)\n")
        assert page.status_code == 200 and "print(6 * 7)" in page.text and 'id="check"' not in page.text
        play = session_of(page.text)
        assert "checkUrl" not in play
        r = browser.post(lti.tool.url + play["runUrl"], json={"code": "print(6 * 7)\n"},
                         headers={"X-Wasm-Runner-Launch": play["session"]})
        assert r.status_code == 200 and r.json()["stdout"] == "42\n"
        r = browser.post(f"{lti.tool.url}/lti/exercises/greet/check", json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": play["session"]})  # a playground grades nothing
        assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_exercise"
    assert not lti.platform.scores_for("student-play") and not lti.platform.scores_for("student-run")


def test_the_grade_is_the_weighted_share(lti: Lti) -> None:
    # tests/exercises/double.toml: "two" weighs 1, the hidden negative case 3, the hidden test 0
    with httpx.Client(timeout=60) as browser:
        cfg = session_of(launch(lti, browser, user="student-w", exercise="double", link="link-w").text)
        r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": "print(abs(2 * int(input())))\n"},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 200 and r.json()["passed_count"] == 1, r.text
    assert wait_until(lambda: lti.platform.scores_for("student-w"), timeout=60)
    (score,) = lti.platform.scores_for("student-w")
    assert (score["scoreGiven"], score["scoreMaximum"]) == (0.75, 3)  # a quarter of the weight


def test_the_tool_says_what_an_admin_registers(lti: Lti) -> None:
    config = httpx.get(f"{lti.tool.url}/lti/config").json()
    assert config["login_url"] == f"{lti.tool.url}/lti/login" and config["redirect_uris"] == [config["launch_url"]]
    canvas = httpx.get(f"{lti.tool.url}/lti/canvas.json").json()
    assert canvas["oidc_initiation_url"] == config["login_url"] and canvas["target_link_uri"] == config["launch_url"]
    assert canvas["public_jwk_url"] == f"{lti.tool.url}/.well-known/jwks.json"
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in canvas["scopes"]
    placements = canvas["extensions"][0]["settings"]["placements"]
    assert {p["message_type"] for p in placements} == {"LtiDeepLinkingRequest"}
    # the JWKS Canvas and Moodle read holds the key the tool signs with
    assert httpx.get(canvas["public_jwk_url"]).json()["keys"][0]["kty"] == "RSA"
