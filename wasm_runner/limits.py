"""Limits on one run, their defaults, their checks, and how a request tightens them.

Every limit has a sane default and a hard ceiling. A value outside ``[minimum, ceiling]`` is
refused with ``InvalidLimits``, whose message names the limit and the allowed range.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .errors import WasmRunnerError

__all__ = ["InvalidLimits", "Limits", "limit_ranges"]



class InvalidLimits(WasmRunnerError, ValueError):
    """A limit is not a number, or lies outside its documented range."""


@dataclass(frozen=True)
class _Range:
    minimum: float
    ceiling: float
    integer: bool
    unit: str


# name -> allowed range. Ceilings keep one run from holding a host hostage.
_RANGES: dict[str, _Range] = {
    "cpu_seconds": _Range(0.01, 600.0, False, "s"),
    "wall_seconds": _Range(0.05, 3600.0, False, "s"),
    "memory_mb": _Range(16, 4096, True, "MB"),
    "stdout_bytes": _Range(0, 256 << 20, True, "bytes"),
    "stderr_bytes": _Range(0, 256 << 20, True, "bytes"),
    "disk_mb": _Range(0, 16384, False, "MB"),
    "max_files": _Range(0, 100_000, True, "files"),
    "input_wait_seconds": _Range(1.0, 86_400.0, False, "s"),
    "host_calls": _Range(0, 10_000_000, True, "calls"),
    "host_call_bytes": _Range(1024, 16 << 20, True, "bytes"),
    "host_seconds": _Range(0.01, 3600.0, False, "s"),
}


@dataclass(frozen=True)
class Limits:
    """Limits on one run. Every field has a default; ``validate`` checks them all.

    - ``cpu_seconds``: CPU time, enforced by fuel metering (converted with the runtime's
      calibrated fuel per CPU-second).
    - ``wall_seconds``: wall-clock deadline, enforced by epoch interruption; blocking calls
      (sleep, reading stdin given up front) end at the deadline too. Time spent waiting for
      interactive input (``input()`` with an input source: the WebSocket, a session's input)
      does not count: a student thinking about an answer is not running.
    - ``input_wait_seconds``: how long one wait for interactive input may last before the run
      is ended as abandoned (status ``timeout``, limit ``input_wait``); a waiting run uses no CPU.
    - ``memory_mb``: cap on the guest's linear memory.
    - ``stdout_bytes`` / ``stderr_bytes``: output caps; reaching one ends the run.
    - ``disk_mb`` / ``max_files``: quota over all writable grants (scratch and ``/out``).
    - ``host_calls`` / ``host_call_bytes`` / ``host_seconds``: host functions (the app's
      functions the run may call, ``functions=``): calls per run, the encoded size of one call's
      arguments or result, and the time spent inside them in all (not CPU time of the run; it
      counts in the wall-clock limit). Going over one ends the run.
    """

    cpu_seconds: float = 5.0
    wall_seconds: float = 10.0
    memory_mb: int = 512
    stdout_bytes: int = 1 << 20
    stderr_bytes: int = 1 << 20
    disk_mb: float = 64.0
    max_files: int = 256
    input_wait_seconds: float = 300.0
    host_calls: int = 100_000
    host_call_bytes: int = 1 << 20
    host_seconds: float = 5.0

    def validate(self) -> Limits:
        """Return ``self`` when every limit is in range; raise ``InvalidLimits`` otherwise."""
        for f in fields(self):
            value = getattr(self, f.name)
            rng = _RANGES[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidLimits(f"{f.name} must be a number, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidLimits(f"{f.name} must be finite, got {value!r}")
            if rng.integer and value != int(value):
                raise InvalidLimits(f"{f.name} must be a whole number, got {value!r}")
            if not rng.minimum <= value <= rng.ceiling:
                raise InvalidLimits(
                    f"{f.name} must be between {_fmt(rng.minimum)} and {_fmt(rng.ceiling)} "
                    f"{rng.unit}, got {value!r}"
                )
        return self

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_mb * 1024 * 1024)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_mb) * 1024 * 1024

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], base: Limits | None = None) -> Limits:
        """Limits from a mapping; unknown names are refused, missing ones come from ``base``."""
        base = base or cls()
        unknown = set(d) - set(_RANGES)
        if unknown:
            raise InvalidLimits(
                f"unknown limit(s): {', '.join(sorted(unknown))}; known: {', '.join(_RANGES)}"
            )
        return replace(base, **{k: v for k, v in d.items() if v is not None}).validate()

    def tightened(self, request: dict[str, Any] | Limits | None) -> Limits:
        """This profile's limits, tightened by a request: a request may lower a limit, never raise it.

        A requested value above the profile's is refused with ``InvalidLimits`` rather than
        silently clamped, so a caller learns the ceiling it is under.
        """
        if request is None:
            return self
        asked = request.to_dict() if isinstance(request, Limits) else dict(request)
        wanted = Limits.from_dict(asked, base=self)
        for name in asked:
            if getattr(wanted, name) > getattr(self, name):
                raise InvalidLimits(
                    f"{name}={getattr(wanted, name)!r} exceeds this profile's limit of "
                    f"{getattr(self, name)!r}; a request may only tighten limits"
                )
        return wanted


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def limit_ranges() -> dict[str, dict[str, Any]]:
    """The documented range of every limit, for help texts and API schemas."""
    return {
        name: {"minimum": r.minimum, "maximum": r.ceiling, "integer": r.integer, "unit": r.unit}
        for name, r in _RANGES.items()
    }
