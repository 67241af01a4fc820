"""The conversation the MCP end-to-end suites drive, over stdio and over HTTP alike.

Each step is what a chat model would do, checked the way the model would read the answer.
"""

from __future__ import annotations

import base64
from typing import Any

from mcp import Client
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent

TOOL_NAMES = {
    "run_python", "open_session", "run_cell", "upload_file", "fork_session", "save_session", "resume_session",
    "delete_saved_session", "close_session", "run_notebook",
}

# A small sales export with the usual problems: a missing amount, a duplicate row, padded names.
SALES_CSV = (
    "date,region,amount\n"
    "2024-01-15, north ,120.5\n"
    "2024-01-20,south,80\n"
    "2024-02-03,north,\n"
    "2024-02-10,south,95.5\n"
    "2024-02-10,south,95.5\n"
    "2024-03-01,north,150\n"
    "2024-03-18,south,110\n"
)
CLEAN_CELL = """\
import pandas as pd
df = pd.read_csv('/data/sales.csv', parse_dates=['date'])
df['region'] = df['region'].str.strip()
df = df.dropna(subset=['amount']).drop_duplicates()
monthly = df.groupby(df['date'].dt.to_period('M'))['amount'].sum()
print(len(df), 'rows after cleaning')
print(monthly.to_string())
monthly
"""
PLOT_CELL = """\
import matplotlib.pyplot as plt
ax = monthly.plot(marker='o', title='Monthly sales')
ax.set_ylabel('amount')
"""


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def images_of(result: CallToolResult) -> list[bytes]:
    return [base64.b64decode(b.data) for b in result.content if isinstance(b, ImageContent)]


async def call(client: Client, tool: str, args: dict[str, Any]) -> CallToolResult:
    return await client.call_tool(tool, args)


async def check_tools_listed(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOL_NAMES
    run = tools["run_python"].description or ""
    assert "no network" in run and "pandas" in run and "of CPU time" in run and "MB of memory" in run
    assert "/data (read-only)" in (tools["open_session"].description or "")
    assert "/out" in (tools["open_session"].description or "")
    assert tools["run_cell"].input_schema["required"] == ["session_id", "code"]


async def check_run_once(client: Client) -> None:
    result = await call(client, "run_python", {"code": "print(6 * 7)"})
    assert not result.is_error, text_of(result)
    assert "42" in text_of(result)
    result = await call(client, "run_python", {"code": "import sys\nprint(sys.stdin.read().upper())", "stdin": "abc"})
    assert "ABC" in text_of(result)


async def check_error_is_trimmed(client: Client) -> None:
    result = await call(client, "run_python", {"code": "import json\n\ndef load(s):\n    return json.loads(s)\n\nload('{bad')\n"})
    assert result.is_error
    text = text_of(result)
    assert text.startswith("The code raised json.decoder.JSONDecodeError")
    assert "line 4, in load" in text and "library code hidden" in text
    assert "json/decoder.py" not in text


async def open_session(client: Client) -> str:
    result = await call(client, "open_session", {})
    assert not result.is_error, text_of(result)
    session_id = result.structured_content["session_id"]
    assert isinstance(session_id, str) and len(session_id) >= 16
    return session_id


async def check_state_kept(client: Client, session_id: str) -> None:
    result = await call(client, "run_cell", {"session_id": session_id, "code": "x = 41"})
    assert not result.is_error, text_of(result)
    result = await call(client, "run_cell", {"session_id": session_id, "code": "x + 1"})
    assert not result.is_error, text_of(result)
    assert "Out (value):\n42" in text_of(result)


async def check_csv_pandas_plot(client: Client, session_id: str) -> None:
    result = await call(
        client, "upload_file", {"session_id": session_id, "name": "sales.csv", "content": SALES_CSV}
    )
    assert not result.is_error, text_of(result)
    assert result.structured_content["path"] == "/data/sales.csv"
    result = await call(client, "run_cell", {"session_id": session_id, "code": CLEAN_CELL})
    text = text_of(result)
    assert not result.is_error, text
    assert "5 rows after cleaning" in text
    assert "2024-01    200.5" in text and "2024-02     95.5" in text and "2024-03    260.0" in text
    assert "Out (table):" in text or "Out (value):" in text
    result = await call(client, "run_cell", {"session_id": session_id, "code": PLOT_CELL})
    assert not result.is_error, text_of(result)
    images = images_of(result)
    assert len(images) == 1 and images[0].startswith(b"\x89PNG\r\n\x1a\n") and len(images[0]) > 2000


async def check_out_file_link(client: Client, session_id: str) -> None:
    code = "monthly.to_csv('/out/monthly.csv')\nprint('saved')"
    result = await call(client, "run_cell", {"session_id": session_id, "code": code})
    assert not result.is_error, text_of(result)
    links = [b for b in result.content if isinstance(b, ResourceLink)]
    assert [link.name for link in links] == ["/out/monthly.csv"]
    read = await client.read_resource(links[0].uri)
    assert "2024-03,260.0" in read.contents[0].text


async def check_hostile_cells(client: Client, session_id: str) -> str:
    """Reading host files and writing /data fail; an endless loop ends at the CPU limit.

    Returns the id of a fresh session (the CPU limit ends the one it stopped).
    """
    result = await call(client, "run_cell", {"session_id": session_id, "code": "open('/etc/passwd').read()"})
    assert result.is_error
    assert "Error" in text_of(result) and "root:" not in text_of(result)
    code = "open('/data/sales.csv', 'w').write('hacked')"
    result = await call(client, "run_cell", {"session_id": session_id, "code": code})
    assert result.is_error and "hacked" not in text_of(result).replace(code, "")
    result = await call(client, "run_cell", {"session_id": session_id, "code": "print(open('/data/sales.csv').read() == " + repr(SALES_CSV) + ")"})
    assert "True" in text_of(result)
    result = await call(client, "run_cell", {"session_id": session_id, "code": "while True:\n    pass"})
    assert result.is_error
    assert result.structured_content["status"] == "cpu_limit"
    first = text_of(result).split("\n")[0]
    assert first.startswith("Stopped: it used more than ")
    # a forced stop ends the session (its state cannot be trusted), and the result says so
    assert "This session has ended" in text_of(result)
    result = await call(client, "run_cell", {"session_id": session_id, "code": "1"})
    assert result.is_error and "open_session" in text_of(result)
    # the server still answers
    result = await call(client, "run_python", {"code": "print('still here')"})
    assert "still here" in text_of(result)
    return await open_session(client)


async def check_close(client: Client, session_id: str) -> None:
    result = await call(client, "close_session", {"session_id": session_id})
    assert not result.is_error, text_of(result)
    result = await call(client, "run_cell", {"session_id": session_id, "code": "1"})
    assert result.is_error and "has ended" in text_of(result) and "open_session" in text_of(result)
    result = await call(client, "close_session", {"session_id": session_id})
    assert not result.is_error and "already ended" in text_of(result)
    result = await call(client, "close_session", {"session_id": "never-opened"})
    assert result.is_error and "no open session" in text_of(result)


def run_async(fn: Any) -> Any:
    """``anyio.run(fn)`` on a thread of its own: other suites in the same pytest process (the
    browser tests' Playwright) may keep an event loop running on the main thread."""
    import threading

    import anyio

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = anyio.run(fn)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")
