"""Explanations of the limits the host (or the browser's controller) decided: a run stopped by its
time, CPU, memory, output, input-wait or disk limit. The guest never sees these: it is stopped."""

from __future__ import annotations

from typing import Any

__all__ = ["for_limit"]


def _number(value: float) -> int | str:
    """A limit's value as the catalogues show it: 5.0 -> 5, 0.5 -> "0.5"."""
    return int(value) if float(value).is_integer() else f"{value:g}"


def for_limit(status: str, limit: str | None, limits: dict[str, Any]) -> dict[str, Any] | None:
    """``{id, params, span}`` for a run that ``status``/``limit`` ended (the result's fields),
    with the limits it ran under (``Limits.to_dict()``), or None when no limit stopped it."""
    if status == "timeout" and limit == "input_wait":
        return {"id": "limit_input_wait", "params": {"seconds": _number(limits.get("input_wait_seconds", 0))},
                "span": None}
    if status == "timeout":
        return {"id": "limit_timeout", "params": {"seconds": _number(limits.get("wall_seconds", 0))}, "span": None}
    if status == "cpu_limit":
        return {"id": "limit_cpu", "params": {"seconds": _number(limits.get("cpu_seconds", 0))}, "span": None}
    if status == "memory_limit":
        return {"id": "limit_memory", "params": {"megabytes": int(limits.get("memory_mb", 0))}, "span": None}
    if status == "output_limit":
        return {"id": "limit_output", "params": {"bytes": int(limits.get("stdout_bytes", 0))}, "span": None}
    if status == "disk_limit":
        return {"id": "limit_disk", "params": {}, "span": None}
    if status == "error" and limit == "stack":
        return {"id": "recursion", "params": {}, "span": None}
    return None
