"""Three ``wasm-runner serve`` replicas sharing one real Redis (no balancer: each step is sent to
the replica named, as a balancer without stickiness could): the platform's login lands on one,
its launch on another, the student's Check on the third, and the platform gets exactly one
score. The replica that queued the score is killed while the platform is down: another
replica's worker delivers it once the platform is back, once."""

from __future__ import annotations

import secrets
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.lti.conftest import form_of, session_of
from tests.support.live_server import wait_until
from tests.support.lti_platform import LtiPlatform, lti_platform
from tests.support.redis_process import RedisProcess
from tests.support.replicas import Replica, quick_profiles

SECRET = secrets.token_hex(32)
KEY = secrets.token_urlsafe(16)
SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"
EXERCISES = Path(__file__).resolve().parents[1] / "exercises"
CONFIG = """
[server]
default_profile = "quick"
max_running = 2
redis_timeout_seconds = 2
exercises_dir = "{exercises}"
result_key_file = "{key_file}"

{profiles}
[[api_keys]]
name = "course-site"
key = "{key}"
rate = "100000/minute"
max_concurrent = 8

[lti]
retry_seconds = 0.3
retry_max_seconds = 1
claim_seconds = 3

[[lti.platforms]]
{platform}
"""


def toml_table(entry: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        return "[" + ", ".join(f'"{x}"' for x in v) + "]" if isinstance(v, list) else f'"{v}"'

    return "\n".join(f"{k} = {value(v)}" for k, v in entry.items())


@pytest.fixture(scope="module")
def cluster(redis: RedisProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LtiPlatform, list[Replica]]]:
    tmp = tmp_path_factory.mktemp("lti-cluster")
    key_file = tmp / "tool-key.pem"  # every replica signs with the same key: one JWKS
    key_file.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    key_file.chmod(0o600)
    with lti_platform() as platform:
        config = tmp / "server.toml"
        config.write_text(CONFIG.format(exercises=EXERCISES, key_file=key_file, key=KEY, profiles=quick_profiles(),
                                        platform=toml_table(platform.toml(api_key="course-site"))))  # fmt: skip
        replicas = [Replica(config, redis, tmp, secret=SECRET, name=f"r{n}") for n in (1, 2, 3)]
        try:
            for replica in replicas:
                replica.wait_ready()
            platform.tool_url = replicas[0].url  # the platform's registration names the first
            yield platform, replicas
        finally:
            for replica in replicas:
                replica.stop()


def launched(platform: LtiPlatform, replicas: list[Replica], browser: httpx.Client, user: str) -> dict[str, Any]:
    """Login on r1, the launch posted to r2: the session page's config."""
    r = browser.get(f"{platform.url}/start", params={"user": user, "exercise": "greet", "link": f"link-{user}"})
    r = browser.get(r.headers["location"])  # r1's /lti/login: the state kept in Redis
    assert r.status_code == 302, r.text
    action, fields = form_of(browser.get(r.headers["location"]).text)
    assert action.startswith(replicas[0].url)
    page = browser.post(action.replace(replicas[0].url, replicas[1].url), data=fields)  # r2 takes the state
    assert page.status_code == 200, page.text
    return session_of(page.text)


def test_launch_on_one_replica_check_on_another_one_score(cluster: tuple[LtiPlatform, list[Replica]]) -> None:
    platform, replicas = cluster
    with httpx.Client(timeout=60, trust_env=False) as browser:
        cfg = launched(platform, replicas, browser, "student-c1")
        r = browser.post(replicas[2].url + cfg["checkUrl"], json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 200 and r.json()["grade"]["state"] == "queued", r.text
        grade = r.json()["grade"]["id"]
        assert wait_until(lambda: platform.scores_for("student-c1"), timeout=60)
        status = browser.get(replicas[0].url + cfg["statusUrl"] + grade,
                             headers={"X-Wasm-Runner-Launch": cfg["session"]}).json()
        assert status["state"] == "sent"  # any replica knows
    time.sleep(2)  # every replica's worker looked at the queue again meanwhile
    assert len(platform.scores_for("student-c1")) == 1


def test_the_replica_that_queued_a_score_dies_the_score_lands_once(cluster: tuple[LtiPlatform, list[Replica]]) -> None:
    platform, replicas = cluster
    platform.down = True
    try:
        with httpx.Client(timeout=60, trust_env=False) as browser:
            cfg = launched(platform, replicas, browser, "student-c2")
            r = browser.post(replicas[2].url + cfg["checkUrl"], json={"code": SOLUTION},
                             headers={"X-Wasm-Runner-Launch": cfg["session"]})
            assert r.status_code == 200 and r.json()["grade"]["state"] == "queued", r.text
            replicas[2].proc.send_signal(signal.SIGKILL)  # between the Check and the post
            replicas[2].proc.wait(30)
            time.sleep(1)
            assert not platform.scores_for("student-c2")
            platform.down = False
            assert wait_until(lambda: platform.scores_for("student-c2"), timeout=60)
        time.sleep(2)
        assert len(platform.scores_for("student-c2")) == 1
        assert httpx.get(replicas[0].url + "/readyz", trust_env=False).status_code == 200  # the others answer
    finally:
        platform.down = False


def test_redis_down_a_launch_and_a_check_answer_503_then_the_tool_works_again(
        cluster: tuple[LtiPlatform, list[Replica]], redis: RedisProcess) -> None:
    """Redis (the launch state, the best scores, the outbox) taken away from the running replicas:
    the login, the launch and a launched student's Check answer 503 with Retry-After (a page for
    the browser's login and launch, JSON for the Check), the replicas keep answering; Redis back,
    the open page's Check is graded and the score lands."""
    platform, replicas = cluster
    r1, r2 = replicas[0], replicas[1]  # the module's other test may have killed the third
    with httpx.Client(timeout=60, trust_env=False) as browser:
        cfg = launched(platform, replicas, browser, "student-c3")  # the student's page is open
        check = {"json": {"code": SOLUTION}, "headers": {"X-Wasm-Runner-Launch": cfg["session"]}}
        r = browser.get(f"{platform.url}/start", params={"user": "student-c4", "exercise": "greet"})
        login_url = r.headers["location"]
        r = browser.get(login_url)
        action, fields = form_of(browser.get(r.headers["location"]).text)  # a login done, its launch not yet
        redis.stop()
        try:
            login = browser.get(login_url)
            launch = browser.post(action.replace(r1.url, r2.url), data=fields)
            for page in (login, launch):
                assert page.status_code == 503 and page.headers["retry-after"].isdigit(), page.text
                assert "Open it from the course again in" in page.text
            graded = browser.post(r2.url + cfg["checkUrl"], **check)
            assert graded.status_code == 503 and graded.headers["retry-after"].isdigit(), graded.text
            assert graded.json()["error"]["code"] == "shared_state_unavailable"
            assert browser.get(r1.url + "/healthz").status_code == 200  # the tool itself is unharmed
        finally:
            redis.start()
        assert wait_until(lambda: all(httpx.get(r.url + "/readyz", trust_env=False).status_code == 200
                                      for r in (r1, r2)), timeout=60)  # fmt: skip
        graded = browser.post(r2.url + cfg["checkUrl"], **check)  # the page opened before the outage
        assert graded.status_code == 200 and graded.json()["grade"]["state"] == "queued", graded.text
        assert launched(platform, replicas, browser, "student-c4")["checkUrl"]  # a new launch opens
    assert wait_until(lambda: platform.scores_for("student-c3"), timeout=60)
    (score,) = platform.scores_for("student-c3")
    assert score["scoreGiven"] == 2
