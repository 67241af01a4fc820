"""What one tier reported for one program: the raw material of a verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..result import Result, Status

__all__ = ["Outcome"]


@dataclass
class Outcome:
    """How one run ended, as the tier saw it.

    ``harness_killed`` is true when the tier did not end the run by itself and the comparison's own
    watchdog (the tier's wall limit plus a grace period) had to stop it.
    """

    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    wall_ms: float = 0.0
    limit: str | None = None
    message: str = ""
    harness_killed: bool = False

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self, max_text: int = 2000) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        d["stdout"] = self.stdout[:max_text]
        d["stderr"] = self.stderr[-max_text:]
        d["wall_ms"] = round(self.wall_ms, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(
            status=Status(d["status"]),
            exit_code=d.get("exit_code"),
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            wall_ms=float(d.get("wall_ms", 0.0)),
            limit=d.get("limit"),
            message=d.get("message", ""),
            harness_killed=bool(d.get("harness_killed", False)),
        )

    @classmethod
    def from_result(cls, result: Result) -> Outcome:
        return cls(
            status=result.status,
            exit_code=result.exit_code,
            stdout=result.stdout,
            stderr=result.stderr,
            wall_ms=result.wall_ms,
            limit=result.limit,
            message=result.message,
        )
