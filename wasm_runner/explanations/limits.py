"""Explanations of the limits the host (or the browser's controller) decided: a run stopped by its
time, CPU, memory, output, input-wait or disk limit. The guest never sees these: it is stopped."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["for_limit"]


def _given(value: Any) -> bool:
    """Whether a limit has a value (as the run's end line decides: ``tiers.py``)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _quantity(name: str, value: Any, whole: bool = False) -> dict[str, int | str]:
    """A limit's value as the catalogues show it (5.0 -> 5, 0.5 -> "0.5"), or no parameter when
    the run had none: the text then says "the time limit", as the end line does."""
    if not _given(value):
        return {}
    if whole or float(value).is_integer():
        return {name: int(value)}
    return {name: f"{value:g}"}


def for_limit(status: str, limit: str | None, limits: dict[str, Any]) -> dict[str, Any] | None:
    """``{id, params, span}`` for a run that ``status``/``limit`` ended (the result's fields),
    with the limits it ran under (``Limits.to_dict()``), or None when no limit stopped it."""
    if status == "timeout" and limit == "input_wait":
        return {"id": "limit_input_wait", "params": _quantity("seconds", limits.get("input_wait_seconds")),
                "span": None}
    if status == "timeout":
        return {"id": "limit_timeout", "params": _quantity("seconds", limits.get("wall_seconds")), "span": None}
    if status == "cpu_limit":
        return {"id": "limit_cpu", "params": _quantity("seconds", limits.get("cpu_seconds")), "span": None}
    if status == "memory_limit":
        return {"id": "limit_memory", "params": _quantity("megabytes", limits.get("memory_mb"), whole=True), "span": None}
    if status == "output_limit":
        return {"id": "limit_output", "params": _quantity("bytes", limits.get("stdout_bytes"), whole=True), "span": None}
    if status == "disk_limit":
        return {"id": "limit_disk", "params": {}, "span": None}
    if status == "error" and limit == "stack":
        return {"id": "recursion", "params": {}, "span": None}
    return None
