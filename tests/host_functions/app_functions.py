"""Functions of "the app" that the declared-function tests name as entry points."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["lookup_order", "order_total"]

ORDERS = {42: {"id": 42, "total": 19.5, "items": ["pen", "ink"]}}


def lookup_order(order_id: int, fields: list[str] | None = None) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise LookupError(f"no order {order_id}")
    return {k: v for k, v in ORDERS[order_id].items() if fields is None or k in fields}


async def order_total(order_id: int) -> float:
    await asyncio.sleep(0)
    return float(lookup_order(order_id)["total"])
