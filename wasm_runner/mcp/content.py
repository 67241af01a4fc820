"""A run's ``Result`` as MCP tool content: text a model reads first, images, tables, files.

The first text block says in one sentence how the run ended (which limit and its value, or the
exception), then shows stdout and a stderr whose tracebacks are trimmed to the user's frames.
Plots become MCP image content; tables their plain-text form; files written to ``/out`` become
resource links (sessions) or embedded resources (one-off runs, whose files are gone afterwards).
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any
from urllib.parse import quote

from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from ..explanations import rendered_result
from ..limits import Limits
from ..messages import exception_line, limit_sentence, trim_traceback
from ..notebook.bundles import BUNDLE_MIME, bundle_of
from ..result import LIMIT_STATUSES, FileOut, Output, Result, Status

__all__ = ["result_to_tool_result", "summary_sentence", "file_uri", "guess_mime", "EMBED_LIMIT_BYTES"]

EMBED_LIMIT_BYTES = 1 << 20  # one-off runs embed files up to this size each
_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")


def summary_sentence(result: Result, limits: Limits) -> str:
    """One sentence on how the run ended, for the top of the tool result."""
    if result.status is Status.OK:
        return f"Ran successfully in {result.wall_ms / 1000:.2f} s."
    if result.status in LIMIT_STATUSES:
        stream = "stderr" if result.stderr_truncated and not result.stdout_truncated else "stdout"
        return limit_sentence(result.status, limits, stream=stream)
    if result.status is Status.ERROR:
        line = exception_line(result.stderr)
        if line:
            return f"The code raised {line}"
        return f"The program exited with code {result.exit_code}."
    if result.status is Status.INVALID_INPUT and result.message:
        return f"Refused before running: {result.message}"
    return limit_sentence(result.status, limits)


def _output_text(result: Result) -> str:
    parts: list[str] = []
    if result.stdout:
        parts.append("stdout:\n" + result.stdout.rstrip("\n"))
        if result.stdout_truncated:
            parts.append("[stdout was cut off at the output limit]")
    if result.stderr:
        parts.append("stderr:\n" + trim_traceback(result.stderr).rstrip("\n"))
        if result.stderr_truncated:
            parts.append("[stderr was cut off at the output limit]")
    return "\n".join(parts)


def guess_mime(path: str) -> str:
    mime, _ = mimetypes.guess_type(path)
    return mime or "application/octet-stream"


def file_uri(session_id: str, path: str) -> str:
    """The resource URI of a file a session's code wrote (``path`` is its guest path)."""
    return f"wasm-runner://sessions/{session_id}/files/{quote(path.lstrip('/'), safe='')}"


def _rich_blocks(outputs: list[Output]) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    has_plain = any(o.mime == "text/plain" for o in outputs)
    for o in outputs:
        if o.mime == BUNDLE_MIME:
            blocks.extend(_bundle_blocks(o))
        elif o.mime in _IMAGE_MIMES:
            blocks.append(_image(o.mime, o.data))
        elif o.mime == "text/plain" or (o.mime == "text/html" and not has_plain):
            label = "table" if o.kind == "table" else "value"
            blocks.append(TextContent(text=f"Out ({label}):\n{o.data}"))
    return blocks


def _image(mime: str, data: str) -> ImageContent:
    return ImageContent(data=data if mime != "image/svg+xml" else base64.b64encode(data.encode()).decode(),
                        mime_type=mime)


def _bundle_blocks(output: Output) -> list[ContentBlock]:
    """A MIME bundle as a model reads it: its image, else its text (LaTeX and Markdown as
    written, a table or any other value as its text/plain)."""
    made = bundle_of(output)
    if made is None:
        return []
    data = made[0]
    for mime in _IMAGE_MIMES:
        if isinstance(data.get(mime), str) and mime != "image/svg+xml":
            return [_image(mime, data[mime])]
    label = "table" if "text/html" in data else "display" if output.kind == "display" else "value"
    for mime in ("text/latex", "text/markdown"):
        if isinstance(data.get(mime), str):
            return [TextContent(text=f"Out ({mime}):\n{data[mime]}")]
    return [TextContent(text=f"Out ({label}):\n{data.get('text/plain', '')}")]


def _file_block(f: FileOut, session_id: str | None) -> ContentBlock:
    mime = guess_mime(f.path)
    if session_id is not None:
        return ResourceLink(
            uri=file_uri(session_id, f.path),
            name=f.path,
            mime_type=mime,
            size=f.size,
            description=f"File {f.path} written by the code ({f.size} bytes).",
        )
    uri = f"wasm-runner://run/files/{quote(f.path.lstrip('/'), safe='')}"
    if f.size > EMBED_LIMIT_BYTES:
        return TextContent(
            text=f"File {f.path} ({f.size} bytes) is too large to return from a one-off run "
            f"(limit {EMBED_LIMIT_BYTES} bytes); write a smaller file or use a session."
        )
    try:
        text = f.content.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and (mime.startswith("text/") or mime in ("application/json", "application/xml")):
        return EmbeddedResource(resource=TextResourceContents(uri=uri, mime_type=mime, text=text))
    return EmbeddedResource(
        resource=BlobResourceContents(
            uri=uri, mime_type=mime, blob=base64.b64encode(f.content).decode("ascii")
        )
    )


def explanation_text(explanation: dict[str, Any]) -> str:
    """A run's explanation (docs/explanations.md) as lines a model or a person reads."""
    span = explanation.get("span")
    where = f" (line {span['line']})" if isinstance(span, dict) else ""
    return f"Explanation{where}: {explanation['title']}. {explanation['text']} Next step: {explanation['hint']}"


def result_to_tool_result(
    result: Result,
    limits: Limits,
    *,
    session_id: str | None = None,
    files: list[FileOut] | None = None,
    note: str = "",
    lang: str | None = None,
) -> CallToolResult:
    """The MCP tool result for ``result``, its explanation in ``lang`` (English when there is no
    catalogue for it).

    ``session_id`` makes files resource links into that session (else they are embedded);
    ``files`` overrides which files are reported (a session reports only new or changed ones);
    ``note`` is appended to the text (e.g. "the session has ended").
    """
    files = result.files if files is None else files
    explanation = rendered_result({"explanation": result.explanation}, lang)["explanation"]
    text = summary_sentence(result, limits)
    body = _output_text(result)
    if body:
        text += "\n" + body
    elif result.status is Status.OK and not result.outputs and not files:
        text += " It printed nothing (print() a value or end the cell with an expression to see it)."
    if explanation:
        text += "\n" + explanation_text(explanation)
    if note:
        text += "\n" + note
    blocks: list[ContentBlock] = [TextContent(text=text)]
    blocks.extend(_rich_blocks(result.outputs))
    blocks.extend(_file_block(f, session_id) for f in files)
    structured: dict[str, Any] = {
        "status": result.status.value,
        "exit_code": result.exit_code,
        "message": summary_sentence(result, limits) if not result.ok else "",
        "limit": result.limit,
        "wall_ms": round(result.wall_ms, 3),
        "fuel_used": result.fuel_used,
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "outputs": [{"kind": o.kind, "mime": o.mime} for o in result.outputs],
        "files": [
            {"path": f.path, "size": f.size, "sha256": f.sha256}
            | ({"uri": file_uri(session_id, f.path)} if session_id else {})
            for f in files
        ],
    }
    if explanation:
        structured["explanation"] = explanation
    if session_id is not None:
        structured["session_id"] = session_id
    return CallToolResult(
        content=blocks, structured_content=structured, is_error=not result.ok
    )
