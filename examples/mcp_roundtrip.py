"""A chat client's round trip through the wasm-runner MCP server, over stdio.

Launches ``wasm-runner mcp`` (here as ``python -m wasm_runner.mcp``) with the official MCP SDK's
client, then does what a data-analysis assistant does: open a session, upload a CSV, clean it with
pandas, plot the monthly trend and get the plot back as an image, then close the session. Prints a
transcript of every tool call and what came back.

    python examples/mcp_roundtrip.py [--save-png trend.png]
"""

from __future__ import annotations

import argparse
import base64
import sys
import textwrap
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ImageContent, ResourceLink, TextContent

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

SALES_CSV = """\
date,region,amount
2024-01-15, north ,120.5
2024-01-20,south,80
2024-02-03,north,
2024-02-10,south,95.5
2024-02-10,south,95.5
2024-03-01,north,150
2024-03-18,south,110
2024-04-02,north,170
2024-04-22,south,
2024-04-23,south,125
"""

CLEAN = """\
import pandas as pd
df = pd.read_csv('/data/sales.csv', parse_dates=['date'])
df['region'] = df['region'].str.strip()
before = len(df)
df = df.dropna(subset=['amount']).drop_duplicates()
print(f'{before - len(df)} rows dropped (missing amount or duplicate), {len(df)} kept')
monthly = df.groupby(df['date'].dt.to_period('M'))['amount'].sum()
monthly
"""

PLOT = """\
import matplotlib.pyplot as plt
ax = monthly.plot(marker='o', title='Monthly sales')
ax.set_xlabel('month'); ax.set_ylabel('amount')
monthly.to_csv('/out/monthly.csv')
print('trend:', 'up' if monthly.iloc[-1] > monthly.iloc[0] else 'down')
"""


def show(title: str, arguments: dict[str, Any], result: CallToolResult, save_png: str | None) -> None:
    print(f"\n>>> {title}")
    for key, value in arguments.items():
        if key == "code" or (key == "content" and "\n" in str(value)):
            print(f"    {key}:")
            print(textwrap.indent(str(value).rstrip("\n"), "      | "))
        else:
            print(f"    {key}: {value}")
    print(f"<<< {'ERROR ' if result.is_error else ''}result")
    for block in result.content:
        if isinstance(block, TextContent):
            print(textwrap.indent(block.text, "    "))
        elif isinstance(block, ImageContent):
            data = base64.b64decode(block.data)
            signature_ok = data[:8] == PNG_SIGNATURE
            print(f"    [image {block.mime_type}, {len(data)} bytes, PNG signature ok: {signature_ok}]")
            if save_png:
                with open(save_png, "wb") as fh:
                    fh.write(data)
                print(f"    [saved to {save_png}]")
        elif isinstance(block, ResourceLink):
            print(f"    [file link {block.name} ({block.size} bytes): {block.uri}]")


async def roundtrip(save_png: str | None) -> int:
    # `wasm-runner mcp` is what a chat client's config names; this is the same, run by this Python.
    server = StdioServerParameters(command=sys.executable, args=["-m", "wasm_runner.cli", "mcp"])
    async with Client(server, read_timeout_seconds=600) as client:
        tools = (await client.list_tools()).tools
        print("tools:", ", ".join(t.name for t in tools))

        async def call(tool: str, **arguments: Any) -> CallToolResult:
            result = await client.call_tool(tool, arguments)
            show(tool, arguments, result, save_png)
            return result

        opened = await call("open_session")
        session_id = opened.structured_content["session_id"]
        await call("upload_file", session_id=session_id, name="sales.csv", content=SALES_CSV)
        await call("run_cell", session_id=session_id, code=CLEAN)
        plotted = await call("run_cell", session_id=session_id, code=PLOT)
        for link in [b for b in plotted.content if isinstance(b, ResourceLink)]:
            read = await client.read_resource(link.uri)
            print(f"\n>>> read {link.name}\n" + textwrap.indent(read.contents[0].text.rstrip(), "    "))
        await call("close_session", session_id=session_id)
        await call("run_python", code="while True:\n    pass")  # contained: stops at the CPU limit
        got_image = any(isinstance(b, ImageContent) for b in plotted.content)
        print(f"\nround trip {'complete' if got_image else 'FAILED'}: CSV -> pandas -> plot -> image")
        return 0 if got_image else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save-png", help="also write the plot to this file")
    return anyio.run(roundtrip, parser.parse_args().save_png)


if __name__ == "__main__":
    sys.exit(main())
