"""Checking a guest's explanation before the host passes it on: the guest is trusted by nobody
(the program can replace any guest code), so only known ids, a few short parameters and a span
of small numbers get through."""

from __future__ import annotations

from typing import Any

from .catalogue import DEFAULT_LANGUAGE, catalogue

__all__ = ["MAX_PARAMS", "MAX_TEXT", "checked", "known_ids"]

MAX_PARAMS = 12
MAX_TEXT = 200  # characters of a text parameter (the guest cuts at 80)


def known_ids() -> frozenset[str]:
    """The ids the English catalogue explains (those with a title: ``unit.*`` entries are none)."""
    return frozenset(key.rsplit(".", 1)[0] for key in catalogue(DEFAULT_LANGUAGE) if key.endswith(".title"))


def checked(raw: Any) -> dict[str, Any] | None:
    """``{id, params, span}`` from what the guest reported, or None when it is not a valid one."""
    if not isinstance(raw, dict):
        return None
    ident = raw.get("id")
    if not isinstance(ident, str) or ident not in known_ids():
        return None
    params: dict[str, str | int] = {}
    given = raw.get("params")
    if isinstance(given, dict):
        for key, value in list(given.items())[:MAX_PARAMS]:
            if not isinstance(key, str) or not key.isidentifier() or len(key) > 40:
                continue
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and abs(value) < 1 << 53:
                params[key] = value
            elif isinstance(value, str):
                params[key] = value[:MAX_TEXT]
    return {"id": ident, "params": params, "span": _span(raw.get("span"))}


def _span(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    values: list[int] = []
    for key in ("line", "col", "end_col"):
        v = raw.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 31:
            return None
        values.append(v)
    line, col, end_col = values
    if line < 1 or end_col < col:
        return None
    return {"line": line, "col": col, "end_col": end_col}
