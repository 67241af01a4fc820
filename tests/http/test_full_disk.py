"""A full disk under the paused sessions' folder (issue 25): a real ``wasm-runner serve`` whose
``snapshot_dir`` is a 2 MiB tmpfs mounted in a user and mount namespace of its own (``unshare``,
no privileges needed), so the disk really fills. What a user sees: a session whose state no longer
fits stays live and says why, keeps answering; nothing half-written is left; the server and other
sessions go on."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.browser import stop_process
from tests.support.live_server import operator_env, session_cell, session_state, wait_until

TMPFS_MIB = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is part of every Debian install"
    folder = tmp_path_factory.mktemp("full-disk") / "paused-sessions"
    folder.mkdir()
    port = _free_port()
    env = operator_env()
    env.update(WASM_RUNNER_AUTH="off", WASM_RUNNER_SNAPSHOT_DIR=str(folder), WASM_RUNNER_PRESTART="0")
    mount = f'mount -t tmpfs -o size={TMPFS_MIB}m,mode=0700 tmpfs "$0" && exec "$@"'
    command = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", mount, str(folder),
               sys.executable, "-m", "wasm_runner.cli", "serve", "--port", str(port)]  # fmt: skip
    log = (folder.parent / "server.log").open("wb")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, (folder.parent / "server.log").read_text(errors="replace")
        try:
            return httpx.get(url + "/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        assert wait_until(ready, timeout=600, step=0.5)
        yield url, folder
    finally:
        stop_process(proc)
        log.close()


def test_a_full_disk_leaves_the_session_live_and_says_so(server: tuple[str, Path]) -> None:
    url, folder = server
    with httpx.Client(base_url=url, timeout=120) as api:
        made = api.post("/api/sessions", json={})
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        session_cell(api, sid, "small = 'kept'")
        assert wait_until(lambda: session_state(api, sid).get("saved") is True, timeout=120, step=0.5)
        # 3 MiB that does not compress: the session's next snapshot cannot fit a 2 MiB disk
        session_cell(api, sid, f"import os; big = os.urandom({3 << 20})")
        assert wait_until(lambda: "snapshot_error" in session_state(api, sid), timeout=120, step=0.5)
        described = session_state(api, sid)
        assert described["snapshot_error"]["code"] == "snapshot_disk_full", described
        assert "full" in described["snapshot_error"]["message"] and described["saved"] is False
        assert described["alive"] is True and described["paused"] is False
        # it stays live and answers, with every variable
        assert session_cell(api, sid, "print(small, len(big))")["stdout"] == f"kept {3 << 20}\n"
        leftovers = [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]
        assert leftovers == []  # no half-written file left on the full disk
        # the server and other sessions go on
        other = api.post("/api/sessions", json={})
        assert other.status_code == 201, other.text
        assert session_cell(api, other.json()["id"], "print(6 * 7)")["stdout"] == "42\n"
        assert api.post("/api/run", json={"code": "print('still here')"}).json()["stdout"] == "still here\n"
        for session in (sid, other.json()["id"]):
            assert api.delete(f"/api/sessions/{session}").status_code == 204
        assert httpx.get(url + "/healthz", timeout=10).json()["status"] == "ok"
