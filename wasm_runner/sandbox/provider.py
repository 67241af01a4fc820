"""The server's sandbox provider: the process-wide sandbox of a runtime and image as the server asks
for it, and the profiles' warm pools on those sandboxes (``default.py`` makes and keeps them):

- ``server_sandbox``: the sandbox of a runtime and image, ``Refused`` (``503 runtime_unavailable``)
  when that runtime is not installed; ``sandbox_made`` and ``prepare_estimate`` for
  ``warmup.Warmup`` (has it been made, how long making it takes);
- ``ProfilePools``: each profile's warm pool, started on first use (or at start-up);
- ``ServerSandboxes``: all of it as the server's ``Executor``'s one ``SandboxProvider``
  (``execution.running``): the sandbox of a job, the pool of a profile, the memory a run holds
  (``admission.resident_mb``) and readiness (``warmup.Warmup``: runs wait, bounded, while their
  runtime is prepared in the background). ``wasm_runner.assembly`` builds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
import functools
from collections.abc import Mapping

from ..admission.memory import resident_mb
from ..execution.policy import PolicyLike
from ..execution.refusal import Refused
from ..limits import Limits
from ..warmup import Warmup
from .core import Sandbox

__all__ = ["ProfilePools", "ServerSandboxes", "prepare_estimate", "sandbox_made", "server_sandbox"]

log = logging.getLogger("wasm_runner.sandbox")


def server_sandbox(runtime: str, image: str | None = None, *, quick_tier: bool = True) -> Sandbox:
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

    def __init__(self, sandbox: Callable[[str, str | None], Sandbox] = server_sandbox) -> None:
        self._lock = threading.Lock()
        self._sandbox = sandbox

    def pool_for(self, sandbox: Sandbox, profile: PolicyLike) -> str | None:
        """The profile's warm pool on ``sandbox`` (started on first use), or None without one."""
        if profile.pool_size <= 0 or profile.runtime != sandbox.name:
            return None
        name = f"profile:{profile.name}"
        with self._lock:
            if name not in sandbox.pools:
                sandbox.add_pool(name, size=profile.pool_size, preload=profile.preload,
                                 memory_mb=profile.limits.memory_mb)
        return name

    def start(self, profiles: Mapping[str, PolicyLike]) -> None:
        """Warm the pools of ``profiles`` (a server's, by name) ahead of the first request."""
        for profile in profiles.values():
            if profile.pool_size > 0:
                try:
                    self.pool_for(self._sandbox(profile.runtime, profile.image), profile)
                except Refused:
                    log.warning("profile %s: runtime %s unavailable, no warm pool", profile.name, profile.runtime)


class ServerSandboxes:
    """The server's ``SandboxProvider``: the process-wide sandboxes (``server_sandbox``, with or
    without a first start's quick tier), the profiles' warm pools, the memory a run holds of the
    budget (its limit and its image's resident pages: ``admission.resident_mb``) and readiness:
    a run waits at most ``wait_seconds`` while its runtime is prepared in the background
    (``warmup``, whose preparations ``/readyz`` reports), else ``503 warming``."""

    def __init__(self, *, quick_tier: bool = True, wait_seconds: float = 30.0) -> None:
        self.make = functools.partial(server_sandbox, quick_tier=quick_tier)
        self.pools = ProfilePools(self.make)
        self.warmup = Warmup(self.make, made=sandbox_made,
                             estimate=functools.partial(prepare_estimate, quick_tier=quick_tier))
        self.wait_seconds = wait_seconds

    def sandbox_for(self, runtime: str, image: str | None) -> Sandbox:
        return self.make(runtime, image)

    def pool_for(self, sandbox: Sandbox, policy: PolicyLike) -> str | None:
        return self.pools.pool_for(sandbox, policy)

    def memory_for(self, policy: PolicyLike, runtime: str, limits: Limits) -> int:
        return resident_mb(policy, runtime, limits)

    async def ready(self, runtime: str, image: str | None) -> None:
        from .default import sandbox_key

        runtime, image = sandbox_key(runtime, image)
        await self.warmup.wait(runtime, image, self.wait_seconds)

    def close_pools(self) -> None:
        """Close the profiles' warm pools (at shutdown)."""
        from .default import default_sandboxes

        for sandbox in default_sandboxes():
            for name in [n for n in sandbox.pools if n.startswith("profile:")]:
                sandbox.pools.pop(name).close()
