"""The verdict on one tier × program: did the tier keep the program contained and behave as expected?

A verdict is computed from what was measured in this run (the tier's outcome and the host probes),
never looked up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..result import Status
from .corpus import Program
from .outcome import Outcome
from .probes import ProbeReport

__all__ = [
    "CONTAINED", "OK", "ESCAPED", "NOT_STOPPED", "MISREPORTED", "REFUSED", "TIER_ERROR", "KINDS",
    "Verdict", "judge",
]

# Verdict kinds, best first.
CONTAINED = "contained"  # hostile program: expected ending, nothing reached the host
OK = "ok"  # benign program: ran and printed what it should
ESCAPED = "escaped"  # something reached the host (file, secret, network, process, disk)
NOT_STOPPED = "not-stopped"  # should have been stopped by the tier, was not
MISREPORTED = "misreported"  # should have been reported as a failure, was reported ok
REFUSED = "refused"  # benign program did not run correctly
TIER_ERROR = "tier-error"  # the tier itself failed (internal error)
KINDS = (CONTAINED, OK, ESCAPED, NOT_STOPPED, MISREPORTED, REFUSED, TIER_ERROR)


@dataclass
class Verdict:
    """The judgement on one run, with the reasons that led to it."""

    kind: str
    reasons: list[str] = field(default_factory=list)

    @property
    def good(self) -> bool:
        return self.kind in (CONTAINED, OK)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "good": self.good, "reasons": self.reasons}


def judge(program: Program, outcome: Outcome, probes: ProbeReport) -> Verdict:
    """Judge one run: host breaches first, then the program's expected ending."""
    breaches = probes.breaches()
    if breaches:
        return Verdict(ESCAPED, breaches)
    if outcome.status is Status.INTERNAL_ERROR:
        return Verdict(TIER_ERROR, [outcome.message or "the tier failed"])
    ending = _describe(outcome)
    if program.expect == "ok":
        if not outcome.ok:
            return Verdict(REFUSED, [f"benign program ended {ending}"])
        if program.stdout is not None and program.stdout not in outcome.stdout:
            return Verdict(REFUSED, [f"stdout lacks {program.stdout!r}"])
        return Verdict(OK, [ending])
    if outcome.harness_killed:
        return Verdict(NOT_STOPPED, ["the tier did not end it; the comparison's watchdog did"])
    if program.expect == "stopped" and outcome.ok:
        return Verdict(NOT_STOPPED, [f"ran to completion ({ending})"])
    if program.expect == "failed" and outcome.ok:
        return Verdict(MISREPORTED, [f"reported ok, exit code {outcome.exit_code}"])
    return Verdict(CONTAINED, [ending])


def _describe(outcome: Outcome) -> str:
    text = outcome.status.value
    if outcome.limit:
        text += f" ({outcome.limit})"
    elif outcome.exit_code not in (None, 0):
        text += f" (exit {outcome.exit_code})"
    return text
