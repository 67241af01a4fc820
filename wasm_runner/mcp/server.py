"""The MCP server: tools to run Python once, or in a session with uploads, for a chat model.

``build_server(...)`` returns an ``MCPServer`` (official Python MCP SDK) with five tools:
``run_python``, ``open_session``, ``run_cell``, ``upload_file``, ``close_session``, and a resource
template for the files a session's code wrote. The same server runs over stdio
(``wasm-runner mcp``) and streamable HTTP (``wasm_runner.mcp.http``).
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable
from typing import Annotated, Literal, TypeVar
from urllib.parse import unquote

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ..inputs import MAX_SOURCE_BYTES
from ..limits import Limits
from ..result import Result, Status
from . import descriptions
from .content import result_to_tool_result
from .sessions import SandboxLike, SessionError, SessionRegistry

__all__ = ["build_server", "LazySandbox", "ToolConfig", "DEFAULT_TOOL_LIMITS", "owner_of"]

log = logging.getLogger(__name__)
T = TypeVar("T")

STDIO_OWNER = "local"
CALLER_HEADER = "x-wasm-runner-caller"  # set by McpHttp after its key check, never by a client


class LazySandbox:
    """The shared ``wasm_runner.Sandbox``, made on first use (compiling a runtime takes a while)."""

    def __init__(self, runtime: str = "default", factory: Callable[[str], SandboxLike] | None = None):
        self.runtime = runtime
        self._factory = factory
        self._sandbox: SandboxLike | None = None
        self._lock = threading.Lock()

    def __call__(self) -> SandboxLike:
        with self._lock:
            if self._sandbox is None:
                if self._factory is not None:
                    self._sandbox = self._factory(self.runtime)
                else:
                    from ..sandbox import Sandbox  # the core; imported late so the face loads fast

                    self._sandbox = Sandbox(runtime=self.runtime)
            return self._sandbox

    def warm_in_background(self) -> threading.Thread:
        """Start making the sandbox now so the first tool call does not wait for the compile."""

        def warm() -> None:
            try:
                self()
            except Exception:  # reported again, to the caller, on first use
                log.exception("could not prepare the sandbox")

        thread = threading.Thread(target=warm, name="wasm-runner-warm", daemon=True)
        thread.start()
        return thread


# Per call. Importing pandas alone costs about 4.5 s of metered CPU, so chat cells need more room
# than a tutor's exercise; the memory and output caps stay at the core's defaults.
DEFAULT_TOOL_LIMITS = Limits(cpu_seconds=20.0, wall_seconds=60.0)


class ToolConfig:
    """Limits and caps the tools run under."""

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        runtime: str = "default",
        max_sessions: int = 16,
        max_sessions_per_owner: int = 4,
        idle_seconds: float = 900.0,
        max_upload_bytes: int = 16 << 20,
        max_code_bytes: int = MAX_SOURCE_BYTES,
    ) -> None:
        self.limits = (limits or DEFAULT_TOOL_LIMITS).validate()
        self.runtime = runtime
        self.max_sessions = max_sessions
        self.max_sessions_per_owner = max_sessions_per_owner
        self.idle_seconds = idle_seconds
        self.max_upload_bytes = max_upload_bytes
        self.max_code_bytes = max_code_bytes


def owner_of(ctx: Context | None) -> str:
    """Who is calling: the caller ``McpHttp`` authenticated, or the local stdio client."""
    headers = None
    if ctx is not None:
        try:
            headers = ctx.headers
        except ValueError:
            headers = None
    if not headers:
        return STDIO_OWNER
    caller = headers.get(CALLER_HEADER)
    return f"http:{caller}" if caller else "http:anonymous"


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


async def _in_thread(fn: Callable[[], T], cancel: threading.Event) -> T:
    """Run blocking sandbox work in a worker thread; a cancelled request stops the guest."""
    try:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise


def build_server(
    config: ToolConfig | None = None,
    *,
    sandbox: Callable[[], SandboxLike] | None = None,
    registry: SessionRegistry | None = None,
) -> tuple[MCPServer, SessionRegistry]:
    """The MCP server and the session registry its tools use.

    ``sandbox`` returns the shared sandbox (default: a ``LazySandbox`` for ``config.runtime``).
    Close ``registry.close_all()`` when the server stops, so no session folder outlives it.
    """
    config = config or ToolConfig()
    sandbox = sandbox or LazySandbox(config.runtime)
    limits = config.limits
    registry = registry or SessionRegistry(
        sandbox,
        limits,
        max_sessions=config.max_sessions,
        max_sessions_per_owner=config.max_sessions_per_owner,
        idle_seconds=config.idle_seconds,
        max_upload_bytes=config.max_upload_bytes,
    )
    server = MCPServer(
        name="wasm-runner",
        log_level="WARNING",
        instructions=(
            "Runs Python code safely in a WebAssembly sandbox with no network. Use run_python for a "
            "one-off computation; for data the user gives you, open_session, upload_file (it lands "
            "in /data), run_cell as often as needed, then close_session. "
            + descriptions.environment_text(config.runtime)
        ),
    )

    def check_code(code: str) -> str | None:
        if not isinstance(code, str) or not code.strip():
            return "code is empty: pass the Python source to run"
        if len(code.encode("utf-8", "surrogatepass")) > config.max_code_bytes:
            return f"code is longer than {config.max_code_bytes} bytes; send less code per call"
        return None

    async def run_python(
        code: Annotated[str, Field(description="The Python source to run, as a whole program.")],
        stdin: Annotated[str, Field(description="Text given to the program on standard input.")] = "",
    ) -> CallToolResult:
        problem = check_code(code)
        if problem:
            return _error(problem)
        cancel = threading.Event()

        def work() -> Result:
            return sandbox().run(
                code, stdin=stdin or None, limits=limits, cancel=cancel, display=True, collect_out=True
            )

        try:
            result = await _in_thread(work, cancel)
        except Exception as exc:  # the sandbox could not start at all
            log.exception("run_python failed")
            return _error(f"The sandbox could not run the code: {exc}")
        return result_to_tool_result(result, limits)

    async def open_session(ctx: Context | None = None) -> CallToolResult:
        owner = owner_of(ctx)
        cancel = threading.Event()
        try:
            session = await _in_thread(lambda: registry.open(owner), cancel)
        except SessionError as exc:
            return _error(str(exc))
        except Exception as exc:
            log.exception("open_session failed")
            return _error(f"The sandbox could not start a session: {exc}")
        return CallToolResult(
            content=[
                TextContent(
                    text=f"Session {session.id} is open. Upload files with upload_file (they appear "
                    f"in /data), run code with run_cell, and close it with close_session."
                )
            ],
            structured_content={"session_id": session.id},
        )

    async def run_cell(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        code: Annotated[str, Field(description="Python code to run in the session.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        problem = check_code(code)
        if problem:
            return _error(problem)
        try:
            session = registry.get(session_id, owner_of(ctx))
        except SessionError as exc:
            return _error(str(exc))

        def work() -> Result | None:
            with session.lock:
                session.cancel.clear()
                if not session.sandbox_session.alive:
                    return None
                return session.sandbox_session.run(code, limits=limits, cancel=session.cancel)

        try:
            result = await _in_thread(work, session.cancel)
            if result is None:
                registry.close(session.id, session.owner)
                return _error(
                    f"Session {session.id} has ended (a limit stopped an earlier cell, or it was "
                    "closed); its variables and files are gone. Call open_session to start a new one."
                )
        except Exception as exc:
            log.exception("run_cell failed")
            return _error(f"The session could not run the cell: {exc}")
        note = ""
        if not session.sandbox_session.alive:
            registry.close(session.id, session.owner)
            note = (
                "This session has ended (its variables and files are gone); call open_session "
                "to start a new one and upload the data again."
            )
        elif result.status is Status.TIMEOUT or result.status is Status.CPU_LIMIT:
            note = "The session is still open; variables set before this cell are kept."
        return result_to_tool_result(
            result, limits, session_id=session.id, files=session.new_files(result), note=note
        )

    async def upload_file(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        name: Annotated[str, Field(description="Plain file name, e.g. 'sales.csv'.")],
        content: Annotated[str, Field(description="The file's content: text, or base64 for binary files.")],
        encoding: Annotated[
            Literal["utf-8", "base64"], Field(description="'utf-8' for text content, 'base64' for binary.")
        ] = "utf-8",
        destination: Annotated[
            Literal["data", "scratch"],
            Field(description="'data': read-only at /data/<name> (default); 'scratch': writable at /scratch/<name>."),
        ] = "data",
        ctx: Context | None = None,
    ) -> CallToolResult:
        try:
            session = registry.get(session_id, owner_of(ctx))
            if encoding == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    return _error("content is not valid base64; send text with encoding 'utf-8'")
            else:
                data = content.encode("utf-8", "surrogatepass")
            path = await _in_thread(
                lambda: registry.upload(session, name, data, destination), threading.Event()
            )
        except SessionError as exc:
            return _error(str(exc))
        return CallToolResult(
            content=[TextContent(text=f"Uploaded {len(data)} bytes to {path}; read it from there in run_cell.")],
            structured_content={"path": path, "size": len(data)},
        )

    async def close_session(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        owner = owner_of(ctx)
        closed = await _in_thread(lambda: registry.close(session_id, owner), threading.Event())
        if not closed and registry.ended(session_id, owner):
            return CallToolResult(
                content=[TextContent(text=f"Session {session_id} had already ended; nothing is left of it.")],
                structured_content={"session_id": session_id, "closed": True},
            )
        if not closed:
            return _error(f"no open session {session_id!r}; check the id open_session returned")
        return CallToolResult(
            content=[TextContent(text=f"Session {session_id} is closed and its files are deleted.")],
            structured_content={"session_id": session_id, "closed": True},
        )

    def read_session_file(session_id: str, path: str, ctx: Context) -> str | bytes:
        """A file a session's code wrote to /out, as of the last cell (text when it is UTF-8)."""
        session = registry.get(session_id, owner_of(ctx))
        guest_path = "/" + unquote(path).lstrip("/")
        f = session.files.get(guest_path)
        if f is None:
            raise SessionError(f"session {session_id} has no file {guest_path}")
        try:
            return f.content.decode("utf-8")
        except UnicodeDecodeError:
            return f.content

    running = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    server.add_tool(
        run_python,
        description=descriptions.run_python_description(limits, config.runtime),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        open_session,
        description=descriptions.open_session_description(limits, config.runtime, config.idle_seconds),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        run_cell,
        description=descriptions.run_cell_description(limits, config.runtime),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        upload_file,
        description=descriptions.upload_file_description(config.max_upload_bytes),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        close_session,
        description=descriptions.close_session_description(),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.resource(
        "wasm-runner://sessions/{session_id}/files/{path}",
        name="session_file",
        description="A file the session's code wrote to /out (content as of the last cell).",
    )(read_session_file)
    return server, registry
