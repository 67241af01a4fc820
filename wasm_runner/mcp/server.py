"""The MCP server: tools to run Python once, or in a session with uploads, for a chat model.

``build_server(...)`` returns an ``MCPServer`` (official Python MCP SDK) with ten tools:
``run_python``, ``open_session``, ``run_cell``, ``upload_file``, ``fork_session``,
``save_session``, ``resume_session``, ``delete_saved_session``, ``close_session``,
``run_notebook`` (``notebooks.py``), and a resource
template for the files a session's code wrote. The same server runs over stdio
(``wasm-runner mcp``) and streamable HTTP (``wasm_runner.mcp.http``).

The tools reach guests only through a ``wasm_runner.execution.Executor``: over HTTP it is the
server's (admission, audit log, metrics, the one session store shared with ``/api/sessions``);
over stdio a local one (no server: no admission, the same session caps).
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ..execution import Caller, CallerLike, Executor, Job, Policy, PolicyLike, Refused
from ..explanations import LANG_DESCRIPTION, LANG_PATTERN
from ..host_functions.declared import Caller as FunctionCaller
from ..host_functions.declared import Catalog, describe_functions
from ..network import NetworkRule, describe_off, rules_for
from ..result import Status
from ..settings import DEFAULT_TOOL_LIMITS, ToolSettings
from . import descriptions
from .content import result_to_tool_result
from .notebooks import NOTEBOOK_DESCRIPTION, notebook_tool
from .sessions import Locate, SessionError, check_file_name, find_anywhere, moved_message, write_upload

__all__ = [
    "build_server", "local_executor", "warm_in_background", "ToolConfig", "DEFAULT_TOOL_LIMITS",
    "Resolve", "headers_of",
]  # fmt: skip

log = logging.getLogger(__name__)

Resolve = Callable[["Context | None"], "tuple[CallerLike, str]"]  # ctx -> (caller, client address)


def warm_in_background(runtime: str) -> threading.Thread:
    """Start loading the runtime now so the first tool call does not wait for the compile."""

    def warm() -> None:
        from ..sandbox import default_sandbox

        try:
            default_sandbox(runtime)
        except Exception:  # reported again, to the caller, on first use
            log.exception("could not prepare the sandbox")

    thread = threading.Thread(target=warm, name="wasm-runner-warm", daemon=True)
    thread.start()
    return thread


# The tools' settings are a section of the settings (``settings.ToolSettings``); ``ToolConfig`` is
# its name here, as callers know it.
ToolConfig = ToolSettings


def local_executor(config: ToolSettings) -> Executor:
    """The executor of a local (stdio) tool server: no admission, the config's session caps."""
    return Executor(
        workers=config.max_sessions + 4,
        max_sessions=config.max_sessions,
        session_idle_seconds=config.idle_seconds,
        session_max_lifetime_seconds=config.max_lifetime_seconds,
    )


def headers_of(ctx: Context | None) -> Mapping[str, str] | None:
    """The HTTP request's headers, or None over stdio."""
    if ctx is None:
        return None
    try:
        return ctx.headers
    except ValueError:
        return None


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


def _capitalized(text: str) -> str:
    """A refusal's message as the start of a sentence."""
    return text[:1].upper() + text[1:]


def _refusal(exc: Refused, what: str) -> CallToolResult:
    """A refusal (server busy, a cap) as a sentence a model can act on."""
    text = f"{what} was refused: {exc.message}."
    retry = exc.headers.get("Retry-After")
    if exc.status == 429 and retry:
        text += f" Try again in about {retry} s."
    return _error(text)


class _PerCallerTools(MCPServer):
    """An MCP server whose code tools' descriptions end with the host functions the caller may
    use (``describe``: the request's context -> text), so a model writes code that calls them."""

    CODE_TOOLS = ("run_python", "run_cell")

    def __init__(self, *args: Any, describe: Callable[[Context], str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._describe = describe

    async def _handle_list_tools(self, ctx: Any, params: Any) -> Any:
        result = await super()._handle_list_tools(ctx, params)
        if self._describe is not None:
            text = self._describe(Context(request_context=ctx, mcp_server=self))
            if text:
                for tool in result.tools:
                    if tool.name in self.CODE_TOOLS:
                        tool.description = f"{tool.description}\n\n{text}"
        return result


def build_server(
    config: ToolSettings | None = None,
    *,
    executor: Executor | None = None,
    policy: PolicyLike | None = None,
    resolve: Resolve | None = None,
    catalog: Catalog | None = None,
    locate: Locate | None = None,
    network: Sequence[NetworkRule] = (),
) -> tuple[MCPServer, Executor]:
    """The MCP server and the executor its tools run through.

    ``executor`` (default: ``local_executor(config)``) runs every guest and keeps the sessions;
    ``policy`` gives the limits and runtime (default: the config's); ``resolve(ctx)`` says who is
    calling (default: the one local client). Call ``await executor.sessions.close_all()`` when the
    server stops, so no session folder outlives it. ``catalog``: the host functions the server
    declares; each caller's code may call those its key may use under ``policy`` (named in the
    code tools' descriptions, per caller). ``locate``: where a session this store does not
    hold is now (the server's directory: a session whose replica was lost is resumed here from
    its snapshot, ``sessions.find_anywhere``); None: sessions are only this store's.
    """
    config = config or ToolSettings()
    executor = executor or local_executor(config)
    policy = policy or Policy(
        "mcp", limits=config.limits, runtime=config.runtime, files_out=True, display=True
    )
    limits, runtime, store = policy.limits, policy.runtime, executor.sessions
    local = Caller("local", max_concurrent=config.max_sessions_per_owner)
    who: Resolve = resolve or (lambda ctx: (local, "stdio"))

    def allowed(caller: CallerLike) -> list[str]:
        return [f.name for f in catalog.allowed(caller.name, policy.name)] if catalog is not None else []

    def with_functions(job: Job, caller: CallerLike) -> Job:
        job.network_rules = rules_for(network, caller.name, job.profile.name)  # docs/security.md, "Network"
        job.network_off = describe_off(caller.name, job.profile.name)
        names = allowed(caller)
        if catalog is not None and names:
            job.functions = catalog.for_caller(
                names, FunctionCaller(caller.name, getattr(caller, "user_id", None), job.request_id))
        return job

    def describe(ctx: Context) -> str:
        if catalog is None or not catalog.declared:
            return ""
        try:
            caller, _ = who(ctx)
        except PermissionError:
            return ""
        return describe_functions([catalog.declared[n] for n in allowed(caller)])

    server = _PerCallerTools(
        describe=describe,
        name="wasm-runner",
        log_level="WARNING",
        instructions=(
            "Runs Python code safely in a WebAssembly sandbox with no network. Use run_python for a "
            "one-off computation; for data the user gives you, open_session, upload_file (it lands "
            "in /data), run_cell as often as needed, then close_session. "
            + descriptions.environment_text(runtime)
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
        packages: Annotated[list[str] | None, Field(
            description="Packages beyond the built-in ones the program imports, from the server's "
            "allowed list (e.g. [\"rich\"]); an import of an allowed package asks for it too.",
            max_length=64)] = None,
        lang: Annotated[str | None, Field(description=LANG_DESCRIPTION, max_length=35, pattern=LANG_PATTERN)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        problem = check_code(code)
        if problem:
            return _error(problem)
        caller, client = who(ctx)
        job = with_functions(Job(
            tenant=caller, client=client, kind="mcp", profile=policy, limits=limits,
            runtime=runtime, code=code, stdin=stdin or None, display=True, packages=tuple(packages or ()),
        ), caller)  # fmt: skip
        try:
            result = await executor.run(job)
        except Refused as exc:
            return _refusal(exc, "The run")
        except Exception as exc:  # the sandbox could not start at all
            log.exception("run_python failed")
            return _error(f"The sandbox could not run the code: {exc}")
        return result_to_tool_result(result, limits, lang=lang)

    async def open_session(
        packages: Annotated[list[str] | None, Field(
            description="Packages beyond the built-in ones the session's cells import, from the server's "
            "allowed list (e.g. [\"rich\"]), available from its first cell.",
            max_length=64)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        await store.sweep()
        try:
            live = await store.create(caller, policy, limits, runtime, private_folders=True,
                                      packages=tuple(packages or ()))
        except Refused as exc:
            if exc.code == "too_many_sessions":
                return _error(
                    f"{_capitalized(exc.message)}: close one with close_session, "
                    "or use run_python for a one-off run"
                )
            return _refusal(exc, "Opening a session")
        except Exception as exc:
            log.exception("open_session failed")
            return _error(f"The sandbox could not start a session: {exc}")
        return CallToolResult(
            content=[
                TextContent(
                    text=f"Session {live.id} is open. Upload files with upload_file (they appear "
                    f"in /data), run code with run_cell, and close it with close_session."
                )
            ],
            structured_content={"session_id": live.id},
        )

    async def run_cell(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        code: Annotated[str, Field(description="Python code to run in the session.")],
        lang: Annotated[str | None, Field(description=LANG_DESCRIPTION, max_length=35, pattern=LANG_PATTERN)] = None,
        ctx: Context | None = None,
    ) -> CallToolResult:
        problem = check_code(code)
        if problem:
            return _error(problem)
        caller, client = who(ctx)
        await store.sweep()
        try:
            live = await find_anywhere(store, session_id, caller, locate)
        except SessionError as exc:
            return _error(str(exc))
        job = with_functions(Job(
            tenant=caller, client=client, kind="mcp_session", profile=live.profile,
            limits=live.limits, runtime=live.runtime, code=code, display=True, session_id=live.id,
        ), caller)  # fmt: skip
        try:
            result = await store.run(live, job)
        except Refused as exc:
            if exc.code == "unknown_session":
                return _error(
                    f"Session {live.id} has ended (a limit stopped an earlier cell, or it was "
                    "closed); its variables and files are gone. Call open_session to start a new one."
                )
            return _refusal(exc, "The cell")
        except Exception as exc:
            log.exception("run_cell failed")
            return _error(f"The session could not run the cell: {exc}")
        notes = []
        if live.moved:  # said once, on its first cell after the move
            live.moved = False
            notes.append(moved_message(live))
        if live.snapshot_error is not None:  # an earlier cell's save: it cannot move
            notes.append(
                f"This session's state could not be saved ({live.snapshot_error['message']}): it "
                "stays open, but would be lost if the server replica holding it stopped."
            )
        note = ""
        if not live.alive:
            note = (
                "This session has ended (its variables and files are gone); call open_session "
                "to start a new one and upload the data again."
            )
        elif result.status is Status.TIMEOUT or result.status is Status.CPU_LIMIT:
            note = "The session is still open; variables set before this cell are kept."
        return result_to_tool_result(
            result, live.limits, session_id=live.id, files=live.new_files(result),
            note=" ".join([*notes, note]).strip(), lang=lang,
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
        caller, _ = who(ctx)
        try:
            live = await find_anywhere(store, session_id, caller, locate)
            if encoding == "base64":
                try:
                    data = base64.b64decode(content, validate=True)
                except (binascii.Error, ValueError):
                    return _error("content is not valid base64; send text with encoding 'utf-8'")
            else:
                data = content.encode("utf-8", "surrogatepass")
            if destination == "scratch":
                check_file_name(name)
                if len(data) > config.max_upload_bytes:
                    raise SessionError(
                        f"{name} is {len(data)} bytes; uploads are limited to "
                        f"{config.max_upload_bytes} bytes per file"
                    )
                path = await store.upload(live, name, data)
            elif destination == "data":
                path = await store.change_folders(
                    live, lambda: write_upload(live, name, data, config.max_upload_bytes)
                )
            else:
                raise SessionError(f"destination must be 'data' or 'scratch', got {destination!r}")
        except SessionError as exc:
            return _error(str(exc))
        except Refused as exc:
            return _refusal(exc, "The upload")
        return CallToolResult(
            content=[TextContent(text=f"Uploaded {len(data)} bytes to {path}; read it from there in run_cell.")],
            structured_content={"path": path, "size": len(data)},
        )

    async def fork_session(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        copies: Annotated[int, Field(description="How many copies to make.", ge=1, le=64)] = 1,
        keep_seeds: Annotated[
            bool, Field(description="true: the copies' random generators continue as this session's would.")
        ] = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        await store.sweep()
        try:
            live = await find_anywhere(store, session_id, caller, locate)
            made = await store.fork(live, caller, copies, keep_seeds=keep_seeds)
        except SessionError as exc:
            return _error(str(exc))
        except Refused as exc:
            if exc.code == "too_many_sessions":
                return _error(
                    f"{_capitalized(exc.message)}: close sessions with "
                    "close_session, or ask for fewer copies"
                )
            return _refusal(exc, "The fork")
        except Exception as exc:
            log.exception("fork_session failed")
            return _error(f"The session could not be copied: {exc}")
        ids = [c.id for c in made]
        return CallToolResult(
            content=[TextContent(
                text=f"Session {session_id} was copied into {len(ids)} new session(s): "
                f"{', '.join(ids)}. Each continues independently with run_cell; close each with "
                "close_session when done."
            )],
            structured_content={"session_id": session_id, "copies": ids},
        )  # fmt: skip

    async def save_session(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        await store.sweep()
        try:
            live = await find_anywhere(store, session_id, caller, locate)
            saved = await store.save(live, caller)
        except SessionError as exc:
            return _error(str(exc))
        except Refused as exc:
            return _refusal(exc, "Saving the session")
        except Exception as exc:
            log.exception("save_session failed")
            return _error(f"The session could not be saved: {exc}")
        shown = saved.describe()
        return CallToolResult(
            content=[TextContent(
                text=f"Session {session_id} is saved as {saved.handle} (its variables, imports and "
                f"files as of now); it stays open. Call resume_session with saved_id "
                f"{saved.handle} to continue from this state in a new session, within "
                f"{descriptions.duration(saved.expires_at - saved.created_at)}; delete it with "
                "delete_saved_session when it is no longer needed."
            )],
            structured_content={"session_id": session_id, **shown},
        )  # fmt: skip

    async def resume_session(
        saved_id: Annotated[str, Field(description="The saved_id save_session returned.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        await store.sweep()
        try:
            saved = await store.load_saved(caller, saved_id)
            if saved.profile != policy.name or saved.runtime != runtime:
                return _error(
                    f"{saved_id} was saved from a session of profile {saved.profile!r} "
                    f"(runtime {saved.runtime!r}); these tools open sessions of profile "
                    f"{policy.name!r} (runtime {runtime!r}), so it cannot be resumed here"
                )
            pausing = store.pausing
            live = await store.resume(
                caller, policy, limits, runtime, saved.snapshot, owner=caller.name,
                secret=pausing.secret if pausing is not None else None, folders=saved.files,
                saved_id=saved.handle,
            )  # fmt: skip
        except Refused as exc:
            if exc.code == "too_many_sessions":
                return _error(
                    f"{_capitalized(exc.message)}: close one with close_session, "
                    "then resume again"
                )
            if exc.code in ("unknown_saved_session", "saved_session_expired"):
                return _error(f"{_capitalized(exc.message)}.")
            return _refusal(exc, "Resuming the saved session")
        except Exception as exc:
            log.exception("resume_session failed")
            return _error(f"The saved session could not be resumed: {exc}")
        return CallToolResult(
            content=[TextContent(
                text=f"Session {live.id} is open, continuing from {saved_id}: its variables, "
                "imports and files are as they were when it was saved. Use run_cell with this "
                "session_id; the saved state stays until it expires or delete_saved_session."
            )],
            structured_content={"session_id": live.id, "saved_id": saved_id},
        )  # fmt: skip

    async def delete_saved_session(
        saved_id: Annotated[str, Field(description="The saved_id save_session returned.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        try:
            await store.delete_saved(caller, saved_id)
        except Refused as exc:
            if exc.code == "unknown_saved_session":
                return _error(f"{_capitalized(exc.message)}.")
            return _refusal(exc, "Deleting the saved session")
        return CallToolResult(
            content=[TextContent(text=f"The saved session {saved_id} is deleted.")],
            structured_content={"saved_id": saved_id, "deleted": True},
        )

    async def close_session(
        session_id: Annotated[str, Field(description="The id open_session returned.")],
        ctx: Context | None = None,
    ) -> CallToolResult:
        caller, _ = who(ctx)
        try:
            live = await find_anywhere(store, session_id, caller, locate)
        except SessionError as exc:
            if store.ended(session_id, caller):
                return CallToolResult(
                    content=[TextContent(text=f"Session {session_id} had already ended; nothing is left of it.")],
                    structured_content={"session_id": session_id, "closed": True},
                )
            return _error(str(exc))
        await store.close(live.id)
        return CallToolResult(
            content=[TextContent(text=f"Session {session_id} is closed and its files are deleted.")],
            structured_content={"session_id": session_id, "closed": True},
        )

    async def read_session_file(session_id: str, path: str, ctx: Context) -> str | bytes:
        """A file a session's code wrote to /out, as of the last cell (text when it is UTF-8);
        on the event loop, as every other use of the store."""
        caller, _ = who(ctx)
        live = await find_anywhere(store, session_id, caller, locate)
        guest_path = "/" + unquote(path).lstrip("/")
        f = live.seen.get(guest_path)
        if f is None:
            raise SessionError(f"session {session_id} has no file {guest_path}")
        try:
            return f.content.decode("utf-8")
        except UnicodeDecodeError:
            return f.content

    running = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    server.add_tool(
        run_python,
        description=descriptions.run_python_description(limits, runtime),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        open_session,
        description=descriptions.open_session_description(limits, runtime, store.idle_seconds),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        run_cell,
        description=descriptions.run_cell_description(limits, runtime),
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
        fork_session,
        description=descriptions.fork_session_description(store.max_fork_copies),
        annotations=running,
        structured_output=False,
    )
    saved_lifetime = store.pausing.lifetime_seconds if store.pausing is not None else None
    server.add_tool(
        save_session,
        description=descriptions.save_session_description(saved_lifetime),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        resume_session,
        description=descriptions.resume_session_description(),
        annotations=running,
        structured_output=False,
    )
    server.add_tool(
        delete_saved_session,
        description=descriptions.delete_saved_session_description(),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        close_session,
        description=descriptions.close_session_description(),
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        notebook_tool(store, policy, who, _refusal, _error),
        name="run_notebook",
        description=NOTEBOOK_DESCRIPTION,
        annotations=running,
        structured_output=False,
    )
    server.resource(
        "wasm-runner://sessions/{session_id}/files/{path}",
        name="session_file",
        description="A file the session's code wrote to /out (content as of the last cell).",
    )(read_session_file)
    return server, executor
