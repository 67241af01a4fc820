"""Server config: TOML + environment, profiles that only tighten, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_runner.settings import ConfigError, hash_key, load_config
from wasm_runner.limits import InvalidLimits


def test_default_profiles_are_student_and_analyst() -> None:
    config = load_config(env={}, auth=False)
    student, analyst = config.profiles["student"], config.profiles["analyst"]
    assert (student.limits.cpu_seconds, student.limits.memory_mb) == (2.0, 64)
    assert (analyst.limits.cpu_seconds, analyst.limits.memory_mb) == (30.0, 1024)
    assert config.default_profile == "student"


def test_toml_profiles_keys_and_env_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "server.toml"
    cfg.write_text(
        """
[server]
max_running = 3
cors_origins = ["https://course.example"]

[profiles.student]
cpu_seconds = 1

[profiles.quiz]
cpu_seconds = 0.5
memory_mb = 48

[[api_keys]]
name = "site"
key = "s3cret"
profiles = ["quiz"]
rate = "10/second"
"""
    )
    data = tmp_path / "data"
    data.mkdir()
    env = {
        "WASM_RUNNER_MAX_RUNNING": "4",
        "WASM_RUNNER_API_KEYS": "ops:other-key",
        "WASM_RUNNER_DATA_DIR": str(data),
    }
    config = load_config(cfg, env=env)
    assert config.admission.max_running == 4  # env beats the file
    assert config.cors_origins == ("https://course.example",)
    assert config.profiles["student"].limits.cpu_seconds == 1
    assert config.profiles["student"].limits.memory_mb == 64  # kept from the built-in profile
    assert config.profiles["quiz"].limits.memory_mb == 48
    assert config.profiles["analyst"].data_dir == data
    names = {k.name: k for k in config.api_keys}
    assert names["site"].key_sha256 == hash_key("s3cret")
    assert names["site"].profiles == ("quiz",)
    assert names["ops"].key_sha256 == hash_key("other-key")


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[server]\nmax_runing = 2\n", r"unknown \[server\] setting"),
        ("[profiles.student]\ncpu_seconds = -1\n", "cpu_seconds"),
        ("[profiles.student]\nmemory_mb = 100000\n", "memory_mb"),
        ("[[api_keys]]\nname = 'x'\n", "needs key"),
        ("[[api_keys]]\nname = 'x'\nkey = 'k'\nrate = 'lots'\n", "rate"),
        ("[[api_keys]]\nname = 'x'\nkey = 'k'\nprofiles = ['nope']\n", "unknown profile"),
        ("[server\n", "not valid TOML"),
        ("[servers]\n", "unknown config table"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, needle: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_config(cfg, env={})


def test_bad_env_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="WASM_RUNNER_AUTH"):
        load_config(env={"WASM_RUNNER_AUTH": "maybe"})
    with pytest.raises(ConfigError, match="name:key"):
        load_config(env={"WASM_RUNNER_API_KEYS": "justakey"})
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config("/nonexistent/wasm-runner.toml", env={})


def test_auth_on_without_keys_is_locked_not_open() -> None:
    config = load_config(env={})
    assert config.auth and config.locked
    assert not load_config(env={}, auth=False).locked


def test_a_request_may_only_tighten_a_profile() -> None:
    student = load_config(env={}, auth=False).profiles["student"].limits
    assert student.tightened({"cpu_seconds": 1}).cpu_seconds == 1
    with pytest.raises(InvalidLimits, match="only tighten"):
        student.tightened({"memory_mb": 512})


# -- scale-out settings (docs/configuration.md, "Several replicas") -----------------------------
SECRET = "s" * 40


def test_cluster_settings_from_toml_env_and_secret_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "cluster.secret"
    secret_file.write_text(SECRET + "\n", encoding="utf-8")
    cfg = tmp_path / "server.toml"
    cfg.write_text(
        f"""
[server]
auth = false
redis_url = "redis://127.0.0.1:6390/0"
cluster_secret_file = "{secret_file}"
lease_ttl_seconds = 6
drain_seconds = 5
""",
        encoding="utf-8",
    )
    config = load_config(cfg, env={"WASM_RUNNER_ADVERTISE_URL": "http://127.0.0.1:9101"})
    scale_out = config.scale_out
    assert scale_out.shared and scale_out.redis_url == "redis://127.0.0.1:6390/0"
    assert scale_out.cluster_secret == SECRET  # whitespace around the file's text dropped
    assert (scale_out.lease_ttl_seconds, scale_out.drain_seconds) == (6, 5)
    assert scale_out.advertise_url == "http://127.0.0.1:9101"
    assert SECRET not in repr(config)  # never in logs or a dump of the settings
    env = {"WASM_RUNNER_REDIS_URL": "redis://127.0.0.1:6391", "WASM_RUNNER_CLUSTER_SECRET": "t" * 32}
    from_env = load_config(env=env, auth=False)
    assert from_env.scale_out.redis_url == "redis://127.0.0.1:6391" and from_env.scale_out.cluster_secret == "t" * 32
    assert not load_config(env={}, auth=False).scale_out.shared  # one host: nothing shared, nothing needed


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"redis_url": "redis://127.0.0.1:6390"}, "no cluster secret"),
        ({"redis_url": "redis://127.0.0.1:6390", "cluster_secret": "short"}, "at least 32"),
        ({"redis_url": "http://127.0.0.1:6390", "cluster_secret": SECRET}, "redis_url must"),
        ({"advertise_url": "127.0.0.1:9101"}, "advertise_url must"),
        ({"advertise_url": "http://127.0.0.1:9101/api"}, "advertise_url must"),
        ({"lease_ttl_seconds": 0}, "lease_ttl_seconds"),
        ({"drain_seconds": -1}, "drain_seconds"),
    ],
)
def test_cluster_settings_refused_with_a_clear_message(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_config(env={}, auth=False, **settings)
    assert "short" not in str(info.value) and SECRET not in str(info.value)


def test_cluster_secret_is_not_read_from_the_toml_file(tmp_path: Path) -> None:
    cfg = tmp_path / "server.toml"
    cfg.write_text(f'[server]\ncluster_secret = "{SECRET}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="cluster_secret_file") as info:
        load_config(cfg, env={})
    assert SECRET not in str(info.value)
    missing = tmp_path / "server2.toml"
    missing.write_text(f'[server]\ncluster_secret_file = "{tmp_path / "nope"}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read cluster_secret_file"):
        load_config(missing, env={})


def test_html_is_sanitised_unless_the_operator_trusts_it(tmp_path: Path) -> None:
    assert load_config(env={}, auth=False).trust_html is False
    cfg = tmp_path / "server.toml"
    cfg.write_text("[server]\ntrust_html = true\n")
    assert load_config(cfg, env={}, auth=False).trust_html is True
    assert load_config(env={"WASM_RUNNER_TRUST_HTML": "on"}, auth=False).trust_html is True
    with pytest.raises(ConfigError, match="WASM_RUNNER_TRUST_HTML"):
        load_config(env={"WASM_RUNNER_TRUST_HTML": "maybe"})


def test_quick_tier_is_on_unless_turned_off(tmp_path: Path) -> None:
    assert load_config(env={}, auth=False).quick_tier is True
    cfg = tmp_path / "server.toml"
    cfg.write_text("[server]\nquick_tier = false\n")
    assert load_config(cfg, env={}, auth=False).quick_tier is False
    assert load_config(env={"WASM_RUNNER_QUICK_TIER": "off"}, auth=False).quick_tier is False
    with pytest.raises(ConfigError, match="WASM_RUNNER_QUICK_TIER"):
        load_config(env={"WASM_RUNNER_QUICK_TIER": "later"})
