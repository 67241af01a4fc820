"""Reporting a comparison: a terminal table, a JSON document, a safety-vs-latency chart."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ..limits import Limits
from .corpus import Program
from .runner import TierReport
from .verdict import (
    CONTAINED,
    ESCAPED,
    MISREPORTED,
    NOT_STOPPED,
    OK,
    REFUSED,
    TIER_ERROR,
)

__all__ = ["cell_text", "render_table", "to_document", "write_json", "write_chart"]

_SHORT = {
    CONTAINED: "held",
    OK: "ok",
    ESCAPED: "ESCAPED",
    NOT_STOPPED: "NOT-STOPPED",
    MISREPORTED: "MISREPORTED",
    REFUSED: "REFUSED",
    TIER_ERROR: "TIER-ERROR",
}
_LIMIT_SHORT = {"cpu": "cpu", "wall": "wall", "memory": "mem", "output": "out", "disk": "disk"}


def cell_text(kind: str, status: str, limit: str | None) -> str:
    """``held cpu``, ``held err``, ``ok``, ``ESCAPED`` ..."""
    text = _SHORT.get(kind, kind)
    if kind == CONTAINED:
        if limit:
            text += " " + _LIMIT_SHORT.get(limit, limit)
        elif status in ("error", "invalid_input"):
            text += " " + ("err" if status == "error" else "inval")
    return text


def _fmt_ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def render_table(reports: list[TierReport], programs: list[Program]) -> str:
    """The comparison as fixed-width text: programs down, tiers across, summaries at the bottom."""
    ran = [r for r in reports if r.available and r.cells]
    lines: list[str] = []
    if ran:
        first = max([len("program (expect)")] + [len(f"{p.id} ({p.expect})") for p in programs])
        widths = [max(12, len(r.name)) for r in ran]
        header = "program (expect)".ljust(first) + "  " + "  ".join(r.name.ljust(w) for r, w in zip(ran, widths))
        lines += [header, "-" * len(header)]
        by_tier = [{c.program.id: c for c in r.cells} for r in ran]
        for p in programs:
            row = f"{p.id} ({p.expect})".ljust(first)
            for cells, w in zip(by_tier, widths):
                c = cells.get(p.id)
                text = cell_text(c.verdict.kind, c.outcome.status.value, c.outcome.limit) if c else "-"
                row += "  " + text.ljust(w)
            lines.append(row.rstrip())
        lines.append("-" * len(header))
        summaries = [
            ("hostile contained", lambda r: "{contained}/{hostile}".format(**r.counts())),
            ("benign ok", lambda r: "{benign_ok}/{benign}".format(**r.counts())),
            ("escapes", lambda r: str(r.counts()["escaped"])),
            ("start-up p50 ms", lambda r: _fmt_ms(r.percentile(50))),
            ("start-up p90 ms", lambda r: _fmt_ms(r.percentile(90))),
            ("runs/s (2 workers)", lambda r: "-" if r.throughput_rps is None else f"{r.throughput_rps:.2f}"),
            ("prepare s", lambda r: f"{r.prepare_seconds:.1f}"),
        ]
        for label, fn in summaries:
            row = label.ljust(first)
            for r, w in zip(ran, widths):
                row += "  " + fn(r).ljust(w)
            lines.append(row.rstrip())
    lines.append("")
    for r in reports:
        if not r.available:
            lines.append(f"{r.name}: not available here: {r.detail}")
        elif r.error:
            lines.append(f"{r.name}: failed: {r.error}")
        else:
            lines.append(f"{r.name}: {r.detail}")
        lines += [f"  measured here: {c}" for c in r.caveats]
    problems = [(r.name, c) for r in ran for c in r.cells if not c.verdict.good]
    if problems:
        lines += ["", "Findings (every cell that is not ok/held):"]
        for name, c in problems:
            lines.append(f"  {name} / {c.program.id}: {c.verdict.kind}: {'; '.join(c.verdict.reasons)}")
    legend = ("held = the tier stopped or contained it (limit that stopped it, or err = reported as "
              "failure); ok = benign program ran correctly.")
    lines += ["", legend]
    return "\n".join(lines)


_SOURCE_TREE = str(Path(__file__).resolve().parents[2])


def _scrub(value: Any, home: str) -> Any:
    """Write this machine's source tree as ``<repo>`` and home as ``~`` (results get published)."""
    if isinstance(value, str):
        value = value.replace(_SOURCE_TREE, "<repo>")
        return value.replace(home, "~") if home and home != "/" else value
    if isinstance(value, list):
        return [_scrub(v, home) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, home) for k, v in value.items()}
    return value


def to_document(reports: list[TierReport], programs: list[Program], limits: Limits,
                command: str = "") -> dict[str, Any]:
    """The whole comparison as one JSON-ready dict, machine paths written as ``<repo>`` and ``~``."""
    return _scrub(_document(reports, programs, limits, command), str(Path.home()))


def _document(reports: list[TierReport], programs: list[Program], limits: Limits,
              command: str) -> dict[str, Any]:
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "host": {"platform": platform.platform(), "python": platform.python_version(),
                 "cpus": os.cpu_count()},
        "limits": limits.to_dict(),
        "corpus": [p.to_dict() for p in programs],
        "tiers": [r.to_dict() for r in reports],
    }


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")


def write_chart(path: Path, reports: list[TierReport]) -> None:
    """Safety (share of hostile programs contained) against start-up latency (p50, bar to p90)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [r for r in reports if r.available and r.cells and r.percentile(50) is not None]
    if not points:
        raise ValueError("no tier produced both verdicts and latency; nothing to chart")
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for r in points:
        counts = r.counts()
        safety = 100.0 * counts["contained"] / counts["hostile"] if counts["hostile"] else 0.0
        p50, p90 = r.percentile(50), r.percentile(90)
        assert p50 is not None and p90 is not None
        spread = [[0.0], [max(0.0, p90 - p50)]]
        ax.errorbar([p50], [safety], xerr=spread, fmt="o", capsize=4, markersize=8)
        ax.annotate(f"{r.name}\n{counts['contained']}/{counts['hostile']}, benign {counts['benign_ok']}/{counts['benign']}",
                    (p50, safety), textcoords="offset points", xytext=(8, 6), fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("start-up latency of a one-line program, ms (dot p50, bar to p90; log scale)")
    ax.set_ylabel("hostile programs contained, %")
    ax.set_ylim(0, 105)
    ax.set_title("wasm-runner compare: safety vs latency per isolation tier")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="svg" if path.suffix.lower() == ".svg" else "png")
    plt.close(fig)
