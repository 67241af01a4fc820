"""``wasm-runner serve``: the real command, as a person starts it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
from tests.support.live_server import wait_until

import wasm_runner.http.cli as serve_cli
from wasm_runner import native_heap


def glibc_heaps(pid: int) -> int:
    """How many glibc heaps (arenas other than the main one) the process has mapped: each is a
    64 MiB-aligned anonymous region of exactly 64 MiB, its used part rw-p and the rest ---p."""
    regions = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        regions.append((start, end, fields[1], len(fields) > 5))
    heap, count = 64 << 20, 0
    for i, (start, end, perms, named) in enumerate(regions):
        if named or perms != "rw-p" or start % heap:
            continue
        for nstart, nend, nperms, nnamed in regions[i + 1:]:
            if nstart != end or nnamed or nperms != "---p":
                break
            end = nend
        count += end - start == heap
    return count


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_no_auth_serves_the_playground_and_the_api(
    warm_sandbox: None, tmp_path: Path
) -> None:
    port = free_port()
    audit = tmp_path / "audit.jsonl"
    cmd = [sys.executable, "-m", "wasm_runner.cli", "serve", "--no-auth", "--port", str(port),
           "--audit-log", str(audit), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(url + "/healthz").status_code == 200
            except httpx.TransportError:
                return False

        assert wait_until(up, timeout=120, step=0.2)
        r = httpx.post(url + "/api/run", json={"code": "print(6 * 7)"}, timeout=120)
        assert r.status_code == 200 and r.json()["stdout"] == "42\n"
        assert httpx.get(url + "/").status_code == 200
        assert audit.read_text().count("\n") == 1
        if sys.platform.startswith("linux"):  # glibc's arenas capped (native_heap.limit_arenas)
            assert glibc_heaps(proc.pid) <= native_heap.ARENA_MAX - 1
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "auth is OFF (local use only)" in err


def test_serve_refuses_unsafe_settings(capsys, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("WASM_RUNNER_API_KEYS", raising=False)
    monkeypatch.delenv("WASM_RUNNER_CONFIG", raising=False)
    monkeypatch.delenv("WASM_RUNNER_AUTH", raising=False)
    assert serve_cli.main(["--port", "0"]) == 2
    assert "API keys are required" in capsys.readouterr().err
    assert serve_cli.main(["--no-auth", "--host", "0.0.0.0"]) == 2
    assert "local use on 127.0.0.1 only" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nmax_running = 'many'\n")
    assert serve_cli.main(["--config", str(bad)]) == 2
    assert "max_running" in capsys.readouterr().err


def test_serve_refuses_redis_without_a_secret_or_an_address(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name in ("WASM_RUNNER_CLUSTER_SECRET", "WASM_RUNNER_REDIS_URL", "WASM_RUNNER_CONFIG",
                 "WASM_RUNNER_ADVERTISE_URL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    redis = ["--redis-url", "redis://127.0.0.1:6399/0"]
    assert serve_cli.main(["--no-auth", "--port", "0", *redis]) == 2
    assert "no cluster secret" in capsys.readouterr().err
    monkeypatch.setenv("WASM_RUNNER_CLUSTER_SECRET", "x" * 8)
    assert serve_cli.main(["--no-auth", "--port", "0", *redis]) == 2
    err = capsys.readouterr().err
    assert "at least 32 characters" in err and "x" * 8 not in err
    monkeypatch.setenv("WASM_RUNNER_CLUSTER_SECRET", "x" * 32)
    assert serve_cli.main(["--no-auth", "--port", "0", *redis]) == 2  # port 0: no address to advertise
    assert "--advertise-url" in capsys.readouterr().err
