"""The MCP face: tools that let a chat model run Python in the sandbox.

``build_server`` makes the server (stdio via ``wasm-runner mcp``), ``McpHttp`` mounts it on the
HTTP app (streamable HTTP behind API keys). The tools reach guests only through a
``wasm_runner.execution.Executor``. The SDK is imported only when these are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .http import McpHttp
    from .server import ToolConfig, build_server

__all__ = ["build_server", "ToolConfig", "McpHttp", "main"]


def __getattr__(name: str) -> Any:
    if name in ("build_server", "ToolConfig"):
        from . import server

        return getattr(server, name)
    if name == "McpHttp":
        from .http import McpHttp

        return McpHttp
    if name == "main":
        from .cli import main

        return main
    raise AttributeError(name)
