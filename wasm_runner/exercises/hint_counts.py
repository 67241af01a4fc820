"""Hints used, per user and exercise (issue 36 §3, docs/exercises.md "Hints"): the exercise page
reveals an exercise's hints one at a time and says with each Check how many the student has
seen (``hints_used``). That is the page's count, not a measurement: the server bounds it by the
exercise's number of hints and keeps, for each user of a key (``X-Wasm-Runner-User`` or a signed
user token) and each exercise, the highest count reported, so a later Check (or a reloaded page)
never lowers it. The count goes with the check result and into its token. Without a user there
is no one to count for: the request's own (bounded) count is used.

Kept in this process's memory (at most ``MAX_ENTRIES``, the oldest forgotten first), or in Redis
with ``redis_url`` (every replica sees the same count; kept ``TTL_SECONDS``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable
from typing import cast

from ..scaleout.state import SharedState, SharedStateUnavailable

log = logging.getLogger("wasm_runner.exercises")

__all__ = ["HintCounts", "MAX_ENTRIES", "TTL_SECONDS"]

MAX_ENTRIES = 100_000
TTL_SECONDS = 90 * 86400

# the stored count raised to the reported one, never lowered; the result is the count now
_RAISE = """
local have = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local said = tonumber(ARGV[2])
if said > have then redis.call('HSET', KEYS[1], ARGV[1], said); have = said end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return have
"""


class HintCounts:
    """The hints each user of each key has seen, per exercise."""

    def __init__(self, shared: SharedState | None = None) -> None:
        self.shared = shared
        self._counts: OrderedDict[tuple[str, str, str], int] = OrderedDict()

    async def record(self, key: str, user: str | None, exercise: str, reported: int, hints: int) -> int:
        """The count for ``user`` of ``key`` on ``exercise`` after the page ``reported`` one (bounded
        by 0 and ``hints``, the exercise's number of hints)."""
        said = max(0, min(int(reported), hints))
        if user is None:
            return said
        if self.shared is not None:
            script = self.shared.redis.eval(_RAISE, 1, self.shared.key("hints", key, user), exercise, said, TTL_SECONDS)
            try:
                return int(await self.shared.call(cast("Awaitable[int]", script), "the hint counts"))
            except SharedStateUnavailable:  # the check's result matters more than the count
                log.warning("Redis did not answer: the hint count of this check is the page's")
                return said
        entry = (key, user, exercise)
        count = max(self._counts.pop(entry, 0), said)
        self._counts[entry] = count
        while len(self._counts) > MAX_ENTRIES:
            self._counts.popitem(last=False)
        return count
