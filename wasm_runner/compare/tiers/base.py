"""The one small interface every isolation tier implements."""

from __future__ import annotations

from abc import ABC, abstractmethod

from ...limits import Limits
from ..outcome import Outcome

__all__ = ["Tier"]


class Tier(ABC):
    """An isolation tier: detect it, prepare it, run one program under limits, clean up.

    ``run`` never raises for guest behaviour: a guest that misbehaves is an ``Outcome``. A tier that
    cannot work on this machine says why from ``available()`` and is reported, not run.
    """

    name: str = ""
    family: str = ""  # subprocess, container, microvm, wasm, pyodide
    description: str = ""
    grace: float = 15.0  # seconds past the wall limit before the comparison aborts a run
    # Rules of the description that ``prepare`` measured not to hold on this machine, each said with
    # what was measured (e.g. gVisor: RLIMIT_CPU set but not enforced). Reported beside the row.
    caveats: tuple[str, ...] = ()

    @abstractmethod
    def available(self) -> tuple[bool, str]:
        """``(True, what will run)`` or ``(False, why not here)``. Cheap; no side effects."""

    def prepare(self) -> None:
        """One-time set-up before the first run (build images, compile modules)."""

    @abstractmethod
    def run(self, source: str, limits: Limits) -> Outcome:
        """Run ``source`` once, fresh, under ``limits``."""

    def abort(self) -> None:
        """Stop a run in flight; called from another thread when ``run`` overstays its deadline."""

    def cleanup(self) -> None:
        """Release whatever ``prepare`` or the runs left behind."""
