"""Run the corpus on every tier: probes around each run, a verdict per cell, latency per tier."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..limits import Limits
from ..result import Status
from .corpus import Program
from .outcome import Outcome
from .probes import HostProbes, ProbeReport
from .process import become_subreaper
from .tiers.base import Tier
from .verdict import Verdict, judge

__all__ = [
    "COMPARE_LIMITS", "Cell", "TierReport", "compare_tier", "measure_startup",
    "measure_throughput", "run_cell", "run_guarded", "tier_work_dir",
]

# The limits every tier gets: small, so hostile programs end quickly.
COMPARE_LIMITS = Limits(
    cpu_seconds=1.0,
    wall_seconds=3.0,
    memory_mb=256,
    stdout_bytes=64 << 10,
    stderr_bytes=64 << 10,
    disk_mb=16,
    max_files=64,
)
LATENCY_PROGRAM = 'print("hi")\n'
THROUGHPUT_PROGRAM = "print(sum(i * i for i in range(200_000)))\n"


@dataclass
class Cell:
    """One tier × program."""

    program: Program
    outcome: Outcome
    probes: ProbeReport
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "program": self.program.id,
            "category": self.program.category,
            "expect": self.program.expect,
            "verdict": self.verdict.to_dict(),
            "outcome": self.outcome.to_dict(max_text=500),
            "probes": self.probes.to_dict(),
        }


@dataclass
class TierReport:
    """Everything measured for one tier."""

    name: str
    family: str
    description: str
    available: bool
    detail: str
    cells: list[Cell] = field(default_factory=list)
    prepare_seconds: float = 0.0
    startup_ms: list[float] = field(default_factory=list)
    throughput_rps: float | None = None
    error: str = ""
    caveats: list[str] = field(default_factory=list)  # rules measured not to hold (Tier.caveats)

    def percentile(self, q: float) -> float | None:
        if not self.startup_ms:
            return None
        data = sorted(self.startup_ms)
        if len(data) == 1:
            return data[0]
        return statistics.quantiles(data, n=100, method="inclusive")[int(q) - 1]

    def counts(self) -> dict[str, int]:
        hostile = [c for c in self.cells if not c.program.benign]
        benign = [c for c in self.cells if c.program.benign]
        return {
            "hostile": len(hostile),
            "contained": sum(c.verdict.good for c in hostile),
            "benign": len(benign),
            "benign_ok": sum(c.verdict.good for c in benign),
            "escaped": sum(c.verdict.kind == "escaped" for c in self.cells),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "description": self.description,
            "available": self.available,
            "detail": self.detail,
            "caveats": list(self.caveats),
            "error": self.error,
            "prepare_seconds": round(self.prepare_seconds, 3),
            "startup_ms": {
                "runs": len(self.startup_ms),
                "p50": _round(self.percentile(50)),
                "p90": _round(self.percentile(90)),
                "samples": [round(x, 3) for x in self.startup_ms],
            },
            "throughput_rps": _round(self.throughput_rps),
            "counts": self.counts(),
            "cells": [c.to_dict() for c in self.cells],
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def run_guarded(tier: Tier, source: str, limits: Limits, grace: float) -> Outcome:
    """Run once on ``tier``; if the tier lets it run past its deadline plus ``grace``, abort it."""
    box: list[Outcome] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            box.append(tier.run(source, limits))
        except BaseException as exc:  # noqa: BLE001 - a tier bug, reported as such
            failure.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=target, daemon=True, name=f"compare-{tier.name}")
    worker.start()
    worker.join(limits.wall_seconds + grace)
    harness_killed = worker.is_alive()
    if harness_killed:
        tier.abort()
        worker.join(30)
    wall_ms = (time.monotonic() - started) * 1000
    if failure:
        exc = failure[0]
        return Outcome(Status.INTERNAL_ERROR, wall_ms=wall_ms,
                       message=f"tier raised {type(exc).__name__}: {exc}",
                       stderr="".join(traceback.format_exception(exc))[-2000:])
    if not box:
        return Outcome(Status.INTERNAL_ERROR, wall_ms=wall_ms, harness_killed=True,
                       message="the tier could not be stopped")
    outcome = box[0]
    outcome.harness_killed = outcome.harness_killed or harness_killed
    return outcome


def run_cell(tier: Tier, program: Program, limits: Limits, work_dir: str | None = None) -> Cell:
    """One program on one tier, with the host probes laid out around it.

    ``work_dir`` is where the tier keeps its host-side files (see ``tier_work_dir``); the disk probe
    measures it. Without one, a fresh work folder is made for this run.
    """
    if work_dir is None:
        with tier_work_dir() as fresh:
            return run_cell(tier, program, limits, fresh)
    probes = HostProbes(work_dir)
    probes.start()
    try:
        source = program.render(probes.placeholders())
        outcome = run_guarded(tier, source, limits, tier.grace)
        report = probes.finish(
            outcome.stdout,
            outcome.stderr,
            disk_slack=limits.disk_bytes * 2 + (64 << 20),
            inode_slack=int(limits.max_files) * 4 + 200,
        )
    finally:
        probes.close()
    return Cell(program, outcome, report, judge(program, outcome, report))


@contextlib.contextmanager
def tier_work_dir():
    """A fresh folder that every ``tempfile`` call in this process uses while the tier runs.

    Tiers keep their host-side files (scratch folders, bundles, images of one run) there, so the
    disk probe can measure them apart from whatever else the host is writing.
    """
    saved = tempfile.tempdir
    work = tempfile.mkdtemp(prefix="wasm-runner-compare-")
    os.chmod(work, 0o755)  # tiers that drop to nobody must reach their scratch inside
    tempfile.tempdir = work
    try:
        yield work
    finally:
        tempfile.tempdir = saved
        shutil.rmtree(work, ignore_errors=True)


def measure_startup(tier: Tier, limits: Limits, runs: int) -> list[float]:
    """Host-side wall time of ``runs`` fresh runs of a one-line benign program, in ms."""
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        outcome = tier.run(LATENCY_PROGRAM, limits)
        elapsed = (time.perf_counter() - t0) * 1000
        if outcome.ok and "hi" in outcome.stdout:
            samples.append(elapsed)
    return samples


def measure_throughput(tier: Tier, limits: Limits, runs: int, workers: int = 2) -> float | None:
    """Completed runs per second of a small compute program, ``workers`` at a time."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(lambda _: tier.run(THROUGHPUT_PROGRAM, limits), range(runs)))
    elapsed = time.perf_counter() - t0
    done = sum(o.ok for o in outcomes)
    return done / elapsed if done else None


def compare_tier(
    tier: Tier,
    programs: list[Program],
    limits: Limits = COMPARE_LIMITS,
    *,
    latency_runs: int = 10,
    throughput_runs: int = 8,
    progress: Callable[[str], None] | None = None,
) -> TierReport:
    """Detect, prepare, run the corpus, measure latency, clean up. Never raises for tier trouble."""
    say = progress or (lambda _msg: None)
    ok, detail = tier.available()
    report = TierReport(tier.name, tier.family, tier.description, ok, detail)
    if not ok:
        say(f"{tier.name}: not available here: {detail}")
        return report
    become_subreaper()
    work = tier_work_dir()
    work_dir = work.__enter__()
    try:
        t0 = time.monotonic()
        say(f"{tier.name}: preparing")
        tier.prepare()
        report.prepare_seconds = time.monotonic() - t0
        report.description, report.caveats = tier.description, list(tier.caveats)
        for program in programs:
            cell = run_cell(tier, program, limits, work_dir)
            say(f"{tier.name}: {program.id}: {cell.verdict.kind} ({cell.outcome.status.value}, "
                f"{cell.outcome.wall_ms:.0f} ms)")
            report.cells.append(cell)
        if latency_runs:
            report.startup_ms = measure_startup(tier, limits, latency_runs)
        if throughput_runs:
            report.throughput_rps = measure_throughput(tier, limits, throughput_runs)
    except Exception as exc:  # noqa: BLE001 - the tier broke: report it instead of the run
        report.error = f"{type(exc).__name__}: {exc}"
        say(f"{tier.name}: failed: {report.error}")
    finally:
        try:
            tier.cleanup()
        except Exception as exc:  # noqa: BLE001
            report.error = report.error or f"cleanup failed: {exc}"
        work.__exit__(None, None, None)
    return report
