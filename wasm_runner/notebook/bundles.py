"""Jupyter MIME bundles: what the host accepts of the guest's bundles, and a result's outputs as
nbformat v4 outputs.

The guest (``wasm_runner/guest/rich.py``) sends each ``display(obj)`` and each last expression's
value as one output of mime ``BUNDLE_MIME`` whose data is the bundle as JSON text. Guest code is
trusted by nobody: ``checked_bundle`` keeps only a JSON object whose ``data`` maps mime types to
text (any JSON for the ``…json`` types) and whose ``metadata`` is an object, and writes it again
as canonical JSON. ``notebook_outputs`` turns a ``Result`` into the ``outputs`` of a notebook's
code cell (``stream``, ``display_data``, ``execute_result``, ``error``), which ``nbformat``
validates: the same list every face returns as ``notebook_outputs``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from enum import Enum
from typing import Any, Protocol

__all__ = ["BUNDLE_KINDS", "BUNDLE_MIME", "Bundle", "bundle_of", "checked_bundle", "notebook_outputs"]

BUNDLE_MIME = "application/vnd.wasm-runner.bundle+json"


class Output(Protocol):
    """What this module reads of a rich output (``result.Output``; ``result.py`` imports this
    module, so it is named by what it has, not imported)."""

    @property
    def kind(self) -> str: ...

    @property
    def mime(self) -> str: ...

    @property
    def data(self) -> str: ...

    @property
    def at(self) -> tuple[int, int] | None: ...


class Result(Protocol):
    """What this module reads of a run's ``result.Result``."""

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...

    @property
    def status(self) -> Enum: ...

    @property
    def limit(self) -> object: ...

    @property
    def message(self) -> str | None: ...

    @property
    def outputs(self) -> Sequence[Output]: ...
BUNDLE_KINDS = ("display", "result")  # display(obj); the last expression's value
_MIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$")
_JSON_MIME = re.compile(r"^application/(.*\+)?json$")
_TRACEBACK = "Traceback (most recent call last):\n"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")

Bundle = tuple[dict[str, Any], dict[str, Any]]  # (data, metadata)


def _no_constant(name: str) -> None:
    return None


def checked_bundle(text: str) -> str | None:
    """The guest's bundle ``text`` as canonical JSON, or None when it is not a bundle: a JSON
    object with ``data`` ({mime type: text}, any JSON for JSON types; ``text/plain`` always there)
    and ``metadata`` (an object: per type, or the display's own keys)."""
    try:
        raw = json.loads(text, parse_constant=_no_constant)  # NaN and Infinity are no JSON: null
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        return None
    data: dict[str, Any] = {}
    for mime, value in raw["data"].items():
        if not _MIME.match(mime):
            continue
        if _JSON_MIME.match(mime) or isinstance(value, str):
            data[mime] = value
    if not isinstance(data.get("text/plain"), str):
        data["text/plain"] = ""
    meta = raw.get("metadata")
    metadata = dict(meta) if isinstance(meta, dict) else {}
    return json.dumps({"data": data, "metadata": metadata}, ensure_ascii=False, separators=(",", ":"))


def bundle_of(output: Output) -> Bundle | None:
    """(data, metadata) of a rich output: a bundle's own, a figure's or the turtle's image, a
    text; None for what a notebook does not show (an exercise check's record)."""
    if output.mime == BUNDLE_MIME:
        try:
            raw = json.loads(output.data)
        except ValueError:
            return None
        return dict(raw.get("data") or {}), dict(raw.get("metadata") or {})
    if output.kind == "image":
        plain = "<Figure>" if output.mime != "image/svg+xml" else "<Turtle drawing>"
        return {output.mime: output.data, "text/plain": plain}, {}
    if output.kind in ("text", "table") and output.mime.startswith("text/"):
        return {output.mime: output.data}, {}
    return None


def _error_output(result: Result) -> tuple[str, dict[str, Any] | None]:
    """(stderr without the traceback, the ``error`` output) of a run that did not end ok."""
    stderr = result.stderr
    if result.status.value == "error" and result.limit is None:
        # an uncaught exception's traceback, or a SyntaxError's (it has no "Traceback" line)
        at = stderr.rfind(_TRACEBACK)
        if at < 0:
            at = stderr.rfind('  File "')
        lines = stderr[at:].rstrip("\n").split("\n") if at >= 0 else []
        match = _EXCEPTION_LINE.match(lines[-1]) if lines else None
        if match is None:  # sys.exit(n), or nothing said: the streams tell it all
            return stderr, None
        ename, evalue = match.group(1), match.group(2) or ""
        return stderr[:at], {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": lines}
    if result.status.value == "ok":
        return stderr, None
    name = "".join(part.capitalize() for part in result.status.value.split("_"))
    text = result.message or f"The run ended with status {result.status.value}."
    return stderr, {"output_type": "error", "ename": name, "evalue": text, "traceback": [text]}


def notebook_outputs(result: Result, execution_count: int | None = None) -> list[dict[str, Any]]:
    """A code cell's ``outputs`` for ``result``, as nbformat v4 has them: its stdout and stderr
    (``stream``), each ``display(obj)`` and figure (``display_data``), the last expression's value
    (``execute_result`` with ``execution_count``), and how an error or a limit ended the run
    (``error``: the exception's name, message and traceback).

    In the order the program made them when every output says how much had been written before
    it (``Output.at``: the stream text up to there, then the output; the browser tier records
    it); otherwise the streams come first, then the outputs (the server tier's runner reports
    its outputs apart from the streams, without positions)."""
    out: list[dict[str, Any]] = []
    stderr, error = _error_output(result)
    shown = [(output, made) for output in result.outputs if (made := bundle_of(output)) is not None]
    placed = bool(shown) and all(output.at is not None for output, _ in shown)
    streams = {"stdout": result.stdout.encode("utf-8", "surrogatepass"),
               "stderr": stderr.encode("utf-8", "surrogatepass")}
    written = {"stdout": 0, "stderr": 0}

    def streams_up_to(at: tuple[int, int] | None) -> None:
        for name, upto in zip(("stdout", "stderr"), at or (len(streams["stdout"]), len(streams["stderr"]))):
            upto = max(written[name], min(upto, len(streams[name])))
            if upto > written[name]:
                text = streams[name][written[name]:upto].decode("utf-8", "replace")
                if out and out[-1]["output_type"] == "stream" and out[-1]["name"] == name:
                    out[-1]["text"] += text
                else:
                    out.append({"output_type": "stream", "name": name, "text": text})
                written[name] = upto

    if not placed:  # the streams as they are (no byte offsets to cut them at)
        out += [{"output_type": "stream", "name": name, "text": text}
                for name, text in (("stdout", result.stdout), ("stderr", stderr)) if text]
        written = {name: len(data) for name, data in streams.items()}
    for output, (data, metadata) in shown:
        if placed:
            streams_up_to(output.at)
        if output.kind == "result":
            out.append({"output_type": "execute_result", "execution_count": execution_count,
                        "data": data, "metadata": metadata})
        else:
            out.append({"output_type": "display_data", "data": data, "metadata": metadata})
    streams_up_to(None)
    if error is not None:
        out.append(error)
    return out
