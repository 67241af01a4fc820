"""Runtimes made ready in the background, so a server answers before its modules are compiled.

A ``Warmup`` prepares the process-wide sandbox of a runtime and image on a thread of its own, once
(``start``): the image is built if it is missing and its module compiled (engine.py; the first
time on a machine, a minute or two on 2 cores). Meanwhile callers can ask how it goes (``state``:
``preparing`` with an estimate of the seconds left, ``ready``, or ``failed`` with the reason) or
wait for it, bounded (``wait``): a run that arrives while its runtime is being prepared waits up
to the server's queue timeout, then is refused with ``503 warming`` and a ``Retry-After`` (the
server's ``sandbox.provider.ServerSandboxes.ready``: that wait). A runtime no one asked for is prepared on
its first use the same way.

A failure is logged with its traceback and kept (``/readyz`` and the playground page show it); a
later request tries again, at most once a ``RETRY_SECONDS``. Another process sharing the cache
that compiles the same module at the same time waits for the first one (``cache.build_lock``)
and then loads what it wrote.

A core module: no web framework; its refusals are ``execution.Refused``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .execution import Refused

__all__ = ["LOAD_SECONDS", "Preparation", "RETRY_SECONDS", "Warmup"]

log = logging.getLogger("wasm_runner.warmup")

RETRY_SECONDS = 60.0  # a failed preparation is tried again on demand, at most this often
LOAD_SECONDS = 60.0  # how long a run may wait for a runtime whose modules are all cached
POLL_SECONDS = 0.2  # how often a waiting request looks again (at most)
UNKNOWN_ESTIMATE_S = 60.0  # what the seconds left start from until the estimate is made


@dataclass(eq=False)
class Preparation:
    """One runtime and image being made ready. ``estimate_s`` (None until it is made, on the
    preparing thread): how long it should take here, 0 when its modules are cached already."""

    runtime: str
    image: str | None
    estimate_s: float | None = None
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    refusal: Refused | None = None  # what the maker refused with (a runtime not installed)
    took_s: float | None = None

    @property
    def label(self) -> str:
        return f"{self.runtime}/{self.image}" if self.image else self.runtime

    @property
    def state(self) -> str:
        """``preparing``, ``ready`` or ``failed``."""
        if not self.done.is_set():
            return "preparing"
        return "failed" if self.error is not None else "ready"

    def seconds_left(self) -> int:
        """The estimate minus the time spent, at least 5 s while it is not done (estimates are
        rough on a busy machine: it never says 0 before it is ready)."""
        if self.done.is_set():
            return 0
        estimate = UNKNOWN_ESTIMATE_S if self.estimate_s is None else self.estimate_s
        return max(5, round(estimate - (time.monotonic() - self.started)))

    def describe(self) -> dict[str, Any]:
        """What ``/readyz`` and the playground page show of it."""
        out: dict[str, Any] = {"runtime": self.runtime, "image": self.image, "state": self.state}
        if self.state == "preparing":
            out["seconds_left"] = self.seconds_left()
        elif self.state == "failed":
            out["error"] = "preparing it failed; the server's log says why"
        return out


class Warmup:
    """Prepares sandboxes in the background. ``make(runtime, image)`` builds one (blocking: the
    process-wide ``default_sandbox``); ``estimate(runtime, image)`` says about how many seconds
    that takes on this machine now (0 when everything is cached); ``made(runtime, image)``
    whether it exists already (then nothing runs in the background)."""

    def __init__(
        self,
        make: Callable[[str, str | None], Any],
        estimate: Callable[[str, str | None], float] | None = None,
        made: Callable[[str, str | None], bool] | None = None,
    ) -> None:
        self.make = make
        self.estimate = estimate or (lambda runtime, image: UNKNOWN_ESTIMATE_S)
        self.made = made or (lambda runtime, image: False)
        self._lock = threading.Lock()
        self._preps: dict[tuple[str, str | None], Preparation] = {}

    def start(self, runtime: str, image: str | None) -> Preparation:
        """The preparation of ``runtime`` and ``image``, started now unless it is under way, done,
        or failed less than ``RETRY_SECONDS`` ago."""
        key = (runtime, image)
        with self._lock:
            prep = self._preps.get(key)
            if prep is not None and (prep.state != "failed" or time.monotonic() - prep.started < RETRY_SECONDS):
                return prep
            prep = self._preps[key] = Preparation(runtime, image)
        if self.made(runtime, image):
            prep.estimate_s, prep.took_s = 0.0, 0.0
            prep.done.set()
            return prep
        threading.Thread(target=self._prepare, args=(prep,), name=f"wasm-runner-warmup-{prep.label}",
                         daemon=True).start()  # fmt: skip
        return prep

    def _prepare(self, prep: Preparation) -> None:
        try:
            try:
                prep.estimate_s = max(0.0, float(self.estimate(prep.runtime, prep.image)))
            except Exception:  # noqa: BLE001 - an estimate never stops the preparation
                log.exception("estimating how long the %s runtime takes to prepare failed", prep.label)
                prep.estimate_s = UNKNOWN_ESTIMATE_S
            if prep.estimate_s > 0:
                log.warning("preparing the %s runtime in the background (first start only, about %d s)",
                            prep.label, round(prep.estimate_s))  # fmt: skip
            self.make(prep.runtime, prep.image)
        except BaseException as exc:  # noqa: BLE001 - kept and shown, never swallowed
            prep.error = f"{type(exc).__name__}: {exc}"
            prep.refusal = exc if isinstance(exc, Refused) else None
            log.error("preparing the %s runtime failed", prep.label, exc_info=True)
        else:
            prep.took_s = time.monotonic() - prep.started
            if prep.estimate_s:
                log.warning("the %s runtime is ready (%.1f s)", prep.label, prep.took_s)
        finally:
            prep.done.set()

    def preparations(self) -> list[Preparation]:
        with self._lock:
            return list(self._preps.values())

    async def wait(self, runtime: str, image: str | None, timeout: float) -> None:
        """Return once ``runtime`` and ``image`` are ready (preparing them if needed), waiting at
        most ``timeout`` seconds while they compile (``LOAD_SECONDS`` when their modules are all
        cached: loading them takes seconds); else ``Refused(503, "warming")`` with a
        ``Retry-After``, or ``Refused(503, "runtime_failed")`` when preparing them failed."""
        prep = self.start(runtime, image)
        began = time.monotonic()
        step = 0.01
        while not prep.done.is_set():
            bound = max(timeout, LOAD_SECONDS) if prep.estimate_s == 0 else timeout
            left = began + bound - time.monotonic()
            if left <= 0:
                wait = prep.seconds_left()
                raise Refused(
                    503, "warming",
                    f"the server's {prep.label} runtime is being prepared (first start only, "
                    f"about {wait} s left); try again then, or run it in the browser",
                    headers={"Retry-After": str(wait)},
                )  # fmt: skip
            await asyncio.sleep(min(step, left))
            step = min(step * 2, POLL_SECONDS)
        if prep.refusal is not None:
            raise prep.refusal
        if prep.error is not None:
            raise Refused(
                503, "runtime_failed",
                f"the server's {prep.label} runtime could not be prepared (the server's log says "
                f"why); it is tried again on a request after {round(RETRY_SECONDS)} s",
                headers={"Retry-After": str(round(RETRY_SECONDS))},
            )  # fmt: skip

