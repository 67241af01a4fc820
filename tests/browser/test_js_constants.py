"""The browser tier's JavaScript mirrors Python's status names, default limits, limit ranges and
source cap (web/src/protocol.js, used by client.js); read as text and compared here."""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
from pathlib import Path
from typing import Any

import pytest

from wasm_runner import Limits, Status
from wasm_runner.inputs import MAX_SOURCE_BYTES
from wasm_runner.limits import limit_ranges

WEB_SRC = Path(__file__).resolve().parents[2] / "web" / "src"
_OPS = {ast.LShift: operator.lshift, ast.Mult: operator.mul, ast.Add: operator.add}


def _value(node: ast.AST) -> Any:
    """A JS literal parsed as Python: numbers, strings, shifts, arrays, objects; nothing else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    raise ValueError(f"not a plain literal: {ast.dump(node)}")


def js_constants(path: Path) -> dict[str, Any]:
    """``export const NAME = <literal>`` and ``export const NAME = Object.freeze(<literal>)``."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)
    found: dict[str, Any] = {}
    for m in re.finditer(r"export const (\w+) = (Object\.freeze\()?(.*?)\)?;\n", text, flags=re.S):
        literal = re.sub(r"([{,]\s*)([A-Za-z_]\w*)\s*:", r'\1"\2":', m.group(3))  # quote keys
        try:
            found[m.group(1)] = _value(ast.parse(literal.strip(), mode="eval").body)
        except (SyntaxError, ValueError):
            continue  # a function or expression, not a constant
    return found


@pytest.fixture(scope="module")
def protocol() -> dict[str, Any]:
    return js_constants(WEB_SRC / "protocol.js")


def test_the_parser_reads_the_constants(protocol: dict[str, Any]) -> None:
    assert {"STATUS", "DEFAULT_LIMITS", "LIMIT_RANGES", "SERVER_ONLY_LIMITS", "MAX_SOURCE_BYTES"} <= set(protocol)


def test_status_names_match(protocol: dict[str, Any]) -> None:
    assert protocol["STATUS"] == {s.name: s.value for s in Status}


def test_default_limits_match(protocol: dict[str, Any]) -> None:
    defaults = Limits()
    assert protocol["DEFAULT_LIMITS"], "no browser defaults found"
    for name, value in protocol["DEFAULT_LIMITS"].items():
        assert value == getattr(defaults, name), name


def test_limit_ranges_match(protocol: dict[str, Any]) -> None:
    ranges = limit_ranges()
    for name, (low, high) in protocol["LIMIT_RANGES"].items():
        assert (low, high) == (ranges[name]["minimum"], ranges[name]["maximum"]), name


def test_every_limit_is_known_to_the_browser(protocol: dict[str, Any]) -> None:
    """A request valid for the server tier is not refused by the browser for a limit's name."""
    python = {f.name for f in dataclasses.fields(Limits)}
    browser = set(protocol["DEFAULT_LIMITS"]) | set(protocol["LIMIT_RANGES"]) | set(protocol["SERVER_ONLY_LIMITS"])
    assert browser == python


def test_source_cap_matches(protocol: dict[str, Any]) -> None:
    assert protocol["MAX_SOURCE_BYTES"] == MAX_SOURCE_BYTES


def test_client_uses_the_shared_statuses() -> None:
    """client.js names statuses only through protocol.js's STATUS, never as its own strings."""
    client = (WEB_SRC / "client.js").read_text()
    assert re.search(r'import \{[^}]*\bSTATUS\b[^}]*\} from "\./protocol\.js"', client)
    own = re.findall(r"status\s*(?:[:=]|===|!==)\s*[\"']([a-z_]+)[\"']", client)
    assert own == []
    assert "STATUS." in client


def test_the_bundle_mime_matches() -> None:
    """render.js shows MIME bundles by the mime the guest and the host give them."""
    from wasm_runner.notebook import BUNDLE_MIME

    assert js_constants(WEB_SRC / "render.js")["BUNDLE_MIME"] == BUNDLE_MIME
    guest = (WEB_SRC.parents[1] / "wasm_runner" / "guest" / "rich.py").read_text()
    assert f'BUNDLE_MIME = "{BUNDLE_MIME}"' in guest
