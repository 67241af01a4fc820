"""The server's sandbox provider: the process-wide sandbox of a runtime and image as the server asks
for it, and the profiles' warm pools on those sandboxes (``default.py`` makes and keeps them):

- ``server_sandbox``: the sandbox of a runtime and image, ``Refused`` (``503 runtime_unavailable``)
  when that runtime is not installed; ``sandbox_made`` and ``prepare_estimate`` for
  ``warmup.Warmup`` (has it been made, how long making it takes);
- ``ProfilePools``: each profile's warm pool, started on first use (or at start-up).

The server's ``Executor`` is handed these (``http.service.Service`` builds it): ``server_sandbox``
as its ``sandbox_for`` and ``ProfilePools.pool_for`` as its ``pool_for``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..execution.refusal import Refused

__all__ = ["ProfilePools", "prepare_estimate", "sandbox_made", "server_sandbox"]

log = logging.getLogger("wasm_runner.sandbox")


def server_sandbox(runtime: str, image: str | None = None, *, quick_tier: bool = True) -> Any:
    """The process-wide sandbox for ``runtime`` and ``image`` (the image only counts for the
    default runtime; blocking: the first call loads the module, or on a first start compiles
    the quick tier, unless ``quick_tier`` is off, while Cranelift's module compiles behind it:
    ``default.default_sandbox``)."""
    from ..runtimes import RuntimeUnavailable
    from .default import default_sandbox

    try:
        return default_sandbox(runtime, image if runtime == "default" else None, quick_first=quick_tier)
    except RuntimeUnavailable as exc:
        raise Refused(
            503, "runtime_unavailable", f"runtime {runtime!r} is not installed here: {exc}"
        ) from None


def sandbox_made(runtime: str, image: str | None) -> bool:
    from .default import is_made

    return is_made(runtime, image)


def prepare_estimate(runtime: str, image: str | None, *, quick_tier: bool = True) -> float:
    """About how many seconds making that sandbox takes here (0: all cached; the quick tier's
    compile when it has one and ``quick_tier`` is on)."""
    from .default import prepare_estimate as estimate

    return estimate(runtime, image, quick_first=quick_tier)


class ProfilePools:
    """The profiles' warm pools: each profile with a ``pool_size`` keeps that many instances of
    its sandbox warm, started on its first run (or at start-up: ``start``, from ``sandbox``: the
    server's ``server_sandbox``)."""

    def __init__(self, sandbox: Callable[[str, str | None], Any] = server_sandbox) -> None:
        self._lock = threading.Lock()
        self._sandbox = sandbox

    def pool_for(self, sandbox: Any, profile: Any) -> str | None:
        """The profile's warm pool on ``sandbox`` (started on first use), or None without one."""
        if profile.pool_size <= 0 or profile.runtime != sandbox.name:
            return None
        name = f"profile:{profile.name}"
        with self._lock:
            if name not in sandbox.pools:
                sandbox.add_pool(name, size=profile.pool_size, preload=profile.preload,
                                 memory_mb=profile.limits.memory_mb)
        return name

    def start(self, profiles: Any) -> None:
        """Warm the pools of ``profiles`` (a server's, by name) ahead of the first request."""
        for profile in profiles.values():
            if profile.pool_size > 0:
                try:
                    self.pool_for(self._sandbox(profile.runtime, profile.image), profile)
                except Refused:
                    log.warning("profile %s: runtime %s unavailable, no warm pool", profile.name, profile.runtime)
