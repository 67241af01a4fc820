"""Functions of "the app" that the declared-function tests name as entry points."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["RECEIVED", "lookup_order", "order_total", "take_any"]

ORDERS = {42: {"id": 42, "total": 19.5, "items": ["pen", "ink"]}}


def lookup_order(order_id: int, fields: list[str] | None = None) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise LookupError(f"no order {order_id}")
    return {k: v for k, v in ORDERS[order_id].items() if fields is None or k in fields}


async def order_total(order_id: int) -> float:
    await asyncio.sleep(0)
    return float(lookup_order(order_id)["total"])


RECEIVED: list[dict[str, Any]] = []  # what ``take_any`` was called with (the schema tests)


def take_any(**kwargs: Any) -> list[str]:
    """Takes any keywords: shows which ones the rules let through."""
    RECEIVED.append(kwargs)
    return sorted(kwargs)
