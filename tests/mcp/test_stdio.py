"""End to end: the MCP server as a chat client launches it (`wasm-runner mcp` over stdio), driven by
the official SDK's client. Real subprocess, real sandbox."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.support import mcp_checks as checks

pytestmark = pytest.mark.timeout(900)


def _server(tmp_path: Path, *extra: str) -> StdioServerParameters:
    # a chat client's environment, and where compiled modules are cached (a CI run's own folder:
    # without it the server would compile the default runtime again into the user's cache)
    keep = ("PATH", "HOME", "LANG", "XDG_CACHE_HOME", "WASM_RUNNER_CACHE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["TMPDIR"] = str(tmp_path)  # every folder the server makes lands here, so we can check it
    return StdioServerParameters(
        command=str(Path(sys.executable).parent / "wasm-runner"),  # the installed console script
        args=["mcp", "--cpu-seconds", "10", "--wall-seconds", "600", *extra],  # wall: a busy machine still ends the loop by CPU
        env=env,
    )


def _files_holding(root: Path, marker: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and marker in path.read_bytes():
            found.append(path)
    return found


def test_round_trip_over_stdio(tmp_path: Path) -> None:
    marker = b"2024-03-18,south,110"
    secret = tmp_path / "host-secret.txt"
    secret.write_text("do not read")

    async def conversation() -> None:
        async with Client(_server(tmp_path), read_timeout_seconds=600) as client:
            await checks.check_tools_listed(client)
            await checks.check_run_once(client)
            await checks.check_error_is_trimmed(client)
            session_id = await checks.open_session(client)
            await checks.check_state_kept(client, session_id)
            await checks.check_csv_pandas_plot(client, session_id)
            assert _files_holding(tmp_path, marker), "the upload is on disk while the session is open"
            await checks.check_out_file_link(client, session_id)
            session_id = await checks.check_hostile_cells(client, session_id)
            result = await client.call_tool(
                "run_cell", {"session_id": session_id, "code": f"open({str(secret)!r}).read()"}
            )
            assert result.is_error and "do not read" not in checks.text_of(result)
            await client.call_tool(
                "upload_file", {"session_id": session_id, "name": "sales.csv", "content": checks.SALES_CSV}
            )
            # no server, no store for saved states: a clear refusal, and the session goes on
            refused = await client.call_tool("save_session", {"session_id": session_id})
            assert refused.is_error and "keeps no saved sessions" in checks.text_of(refused)
            await checks.check_close(client, session_id)
            assert _files_holding(tmp_path, marker) == [], "closing deletes the session's files"

    checks.run_async(conversation)
    assert secret.read_text() == "do not read"


def test_bad_flags_are_a_clear_error(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [str(Path(sys.executable).parent / "wasm-runner"), "mcp", "--cpu-seconds", "-1"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cpu_seconds must be between" in done.stderr and "Traceback" not in done.stderr
