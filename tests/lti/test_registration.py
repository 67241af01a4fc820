"""Platforms in the server's config: a good registration loads, each mistake is named in the
error, and ``wasm-runner lti`` prints what the LMS admin types in."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_runner.lti.cli import main as lti_main
from wasm_runner.settings import ConfigError, load_config

GOOD = """
[server]
auth = {auth}
[[api_keys]]
name = "course-site"
key_sha256 = "{sha}"
[lti]
grade = "latest"
[[lti.platforms]]
name = "moodle"
issuer = "https://moodle.example.org"
client_id = "abc"
deployment_ids = ["1"]
auth_url = "https://moodle.example.org/mod/lti/auth.php"
token_url = "https://moodle.example.org/mod/lti/token.php"
jwks_url = "https://moodle.example.org/mod/lti/certs.php"
api_key = "course-site"
"""


def write(tmp_path: Path, text: str, auth: str = "true") -> Path:
    path = tmp_path / "server.toml"
    path.write_text(text.replace("{auth}", auth).replace("{sha}", "0" * 64))
    return path


def test_a_registration_loads(tmp_path: Path) -> None:
    config = load_config(str(write(tmp_path, GOOD)), env={})
    (platform,) = config.lti.platforms
    assert platform.issuer == "https://moodle.example.org" and platform.deployment_ids == ("1",)
    assert platform.service_origins == ("https://moodle.example.org",)  # the token URL's origin
    assert config.lti.grade_for(None) == "latest"  # the server's default ...
    assert config.lti.grade_for("best") == "best"  # ... unless the exercise says which attempt counts


@pytest.mark.parametrize(("change", "named"), [
    (('deployment_ids = ["1"]', "deployment_ids = []"), "deployment_ids is required"),
    (('token_url = "https://moodle.example.org/mod/lti/token.php"', 'token_url = "ftp://x"'), "token_url must be an http(s) URL"),
    (('api_key = "course-site"', 'api_key = "nobody"'), "api_key 'nobody' is not one of"),
    (('name = "moodle"', 'name = "a b"'), "name is required"),
    (('grade = "latest"', 'grade = "first"'), "'best' or 'latest'"),
    (('grade = "latest"', 'grade_per_exercise = { greet = "latest" }'), 'grade = "best" or "latest" in its TOML'),
    (('client_id = "abc"', 'client_id = "abc"\ncolour = "red"'), "unknown setting(s) ['colour']"),
])  # fmt: skip
def test_each_mistake_is_named(tmp_path: Path, change: tuple[str, str], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(str(write(tmp_path, GOOD.replace(*change))), env={})
    assert named in str(caught.value)


def test_the_cli_prints_the_urls_to_register(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lti_main(["--url", "https://runner.example.org", "--config", str(write(tmp_path, GOOD))]) == 0
    out = capsys.readouterr().out
    for line in ("https://runner.example.org/lti/login", "https://runner.example.org/lti/launch",
                 "https://runner.example.org/.well-known/jwks.json", "Platforms registered: moodle"):
        assert line in out
    assert lti_main(["--config", str(write(tmp_path, GOOD))]) == 2  # no public URL: says how
    assert "--url" in capsys.readouterr().err
