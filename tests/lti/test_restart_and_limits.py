"""A score queued while the platform is down survives the tool's restart (the outbox is on disk),
and a launched student's runs count against the platform key's rate like any request."""

from __future__ import annotations

import httpx
import pytest

from tests.lti.conftest import Lti, launch, lti_config, session_of
from tests.support.live_server import live_server, wait_until
from tests.support.lti_platform import lti_platform
from wasm_runner.lti.registration import LtiSettings

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"
HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"


def test_a_queued_score_survives_a_restart_of_the_tool(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("lti-restart")
    with lti_platform() as platform:
        config = lti_config(tmp, platform)
        platform.down = True
        with live_server(config) as tool, httpx.Client(timeout=60) as browser:
            platform.tool_url = tool.url
            cfg = session_of(launch(Lti(platform, tool, tmp / "audit.jsonl"), browser, user="student-r").text)
            r = browser.post(tool.url + cfg["checkUrl"], json={"code": SOLUTION},
                             headers={"X-Wasm-Runner-Launch": cfg["session"]})
            assert r.status_code == 200 and r.json()["grade"]["state"] == "queued"
        assert list((tmp / "outbox").glob("*.json")), "the score waits on disk"
        assert not platform.scores_for("student-r")
        platform.down = False
        with live_server(config) as again:  # the tool started again, the same outbox folder
            platform.tool_url = again.url  # where the platform reads the tool's keys now
            assert wait_until(lambda: platform.scores_for("student-r"), timeout=60)
            with httpx.Client(timeout=60) as browser:  # a worse attempt after the restart: the best still counts
                cfg = session_of(launch(Lti(platform, again, tmp / "audit.jsonl"), browser, user="student-r").text)
                r = browser.post(again.url + cfg["checkUrl"], json={"code": HALF},
                                 headers={"X-Wasm-Runner-Launch": cfg["session"]})
                assert r.status_code == 200 and r.json()["grade"]["state"] == "kept_best", r.text
        (score,) = platform.scores_for("student-r")
        assert score["scoreGiven"] == 2


def test_a_launched_students_runs_count_against_the_platform_keys_rate(warm_sandbox: None,
                                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("lti-limited")
    with lti_platform() as platform:
        settings = LtiSettings.from_table({"platforms": [platform.toml(api_key="limited")],  # 3 requests a minute
                                           "outbox_dir": str(tmp / "outbox")})
        config = lti_config(tmp, platform).with_(lti=settings)
        with live_server(config) as tool, httpx.Client(timeout=60) as browser:
            platform.tool_url = tool.url
            cfg = session_of(launch(Lti(platform, tool, tmp / "audit.jsonl"), browser, user="student-l").text)
            headers = {"X-Wasm-Runner-Launch": cfg["session"]}
            answers = [browser.post(tool.url + cfg["runUrl"], json={"code": "print(1)"}, headers=headers)
                       for _ in range(4)]  # fmt: skip
            assert [a.status_code for a in answers] == [200, 200, 200, 429]
            assert answers[3].json()["error"]["code"] in ("rate_limited", "user_rate_limited")
            assert httpx.get(f"{tool.url}/lti/config").status_code == 200  # the server still answers
