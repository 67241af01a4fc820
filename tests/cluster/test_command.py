"""``wasm-runner cluster`` refuses what it cannot do with a clear message and status 2, before
starting anything: a missing redis-server or haproxy (naming the Debian package), a port in use,
no API keys, --no-auth off loopback, a public address without the host names clients use."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

import wasm_runner.scaleout.launcher.children as children
from wasm_runner.cli import main as wasm_runner
from wasm_runner.scaleout.launcher.children import free_port


@pytest.fixture(autouse=True)
def _no_server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WASM_RUNNER_API_KEYS", "WASM_RUNNER_CONFIG", "WASM_RUNNER_AUTH", "WASM_RUNNER_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("binary", ["redis-server", "haproxy"])
def test_a_missing_binary_names_its_debian_package(
    binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for other in {"redis-server", "haproxy"} - {binary}:  # the other one is there
        (bin_dir / other).symlink_to(children.require_binary(other))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(children, "SYSTEM_PATH", str(bin_dir))
    assert wasm_runner(["cluster", "--no-auth", "--replicas", "2", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert f"{binary} is not installed" in err and f"apt-get install -y --no-install-recommends {binary}" in err


def test_a_port_in_use_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert wasm_runner(["cluster", "--no-auth", "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


def test_unsafe_or_impossible_settings_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = str(free_port())
    assert wasm_runner(["cluster", "--port", port]) == 2
    assert "API keys are required" in capsys.readouterr().err
    assert wasm_runner(["cluster", "--no-auth", "--host", "0.0.0.0", "--port", port]) == 2
    assert "--no-auth is for local use on 127.0.0.1 only" in capsys.readouterr().err
    keys = tmp_path / "keys.toml"
    keys.write_text('[[api_keys]]\nname = "site"\nkey = "' + "k" * 32 + '"\n')
    assert wasm_runner(["cluster", "--config", str(keys), "--host", "0.0.0.0", "--port", port]) == 2
    assert "--allowed-host" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nmax_running = 'many'\n")
    assert wasm_runner(["cluster", "--config", str(bad), "--port", port]) == 2
    assert "max_running" in capsys.readouterr().err
    assert wasm_runner(["cluster", "--no-auth", "--replicas", "0", "--port", port]) == 2
    assert "--replicas must be from 1 to 64" in capsys.readouterr().err
