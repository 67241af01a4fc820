"""Memory accounting for the budget (``memory_budget_mb``): what a run or session holds of it
(``resident_mb``, the executor's ``memory_for``) and what the server holds of it for itself, before
any run (``server_memory_mb``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..execution.policy import PolicyLike
from ..limits import Limits

__all__ = ["ServerShape", "resident_mb", "server_memory_mb"]


def resident_mb(profile: PolicyLike, runtime: str, limits: Limits) -> int:
    """What a run or session counts against the memory budget: what it may add (memory_mb) plus
    the resident cost of its image's pages (images.RESIDENT_MB; the default runtime only)."""
    from ..images import RESIDENT_MB

    image = getattr(profile, "image", None)
    return limits.memory_mb + (RESIDENT_MB.get(image, 0) if runtime == "default" and image else 0)


class ServerShape(Protocol):
    """What of a server's settings (``settings.ServerConfig``) decides what it holds itself: the
    runtimes a request may ask for and the profiles (their runtime, image and warm pool)."""

    @property
    def runtimes(self) -> Sequence[str]: ...

    @property
    def profiles(self) -> Mapping[str, PolicyLike]: ...


def server_memory_mb(config: ServerShape) -> int:
    """What a server holds of ``memory_budget_mb`` for itself, counted before any run: the
    instances its sandboxes keep started ahead of time (each sandbox's ``prestart`` and the
    profiles' warm pools; each instance its image's resident pages, ``images.RESIDENT_MB``) and the
    most the instance allocator keeps resident between instances (``engine.retained_bytes``)."""
    from ..engine import retained_bytes
    from ..images import RESIDENT_MB
    from ..sandbox import default_prestart

    def slot_mb(runtime: str, image: str | None) -> int:
        return RESIDENT_MB.get((image or "plain") if runtime == "default" else "plain", RESIDENT_MB["plain"])

    # one sandbox per (runtime, image) a request can reach: each profile's, and any other
    # runtime a request may ask for (with the profile's limits, on that runtime's only image)
    slots: dict[tuple[str, str | None], int] = {
        (runtime, "plain"): default_prestart() for runtime in config.runtimes if runtime != "default"
    }
    for profile in config.profiles.values():
        where = (profile.runtime, profile.image if profile.runtime == "default" else "plain")
        slots[where] = slots.get(where, default_prestart()) + max(0, profile.pool_size)
    held = sum(count * slot_mb(*where) for where, count in slots.items())
    return held + -(-retained_bytes() // (1 << 20))
