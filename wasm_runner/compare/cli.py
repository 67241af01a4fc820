"""``wasm-runner compare``: run the hostile corpus on every isolation tier available here."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .corpus import CorpusError, load_corpus
from .report import render_table, to_document, write_chart, write_json
from .runner import COMPARE_LIMITS, compare_tier
from .tiers import all_tiers

__all__ = ["build_parser", "run_from_args", "main"]


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="wasm-runner compare")
    p.description = ("Run one hostile corpus on every isolation tier available here (subprocess, "
                     "containers, microVM, wasmtime, Pyodide) and compare safety and latency.")
    p.add_argument("--tier", action="append", metavar="NAME",
                   help="run only this tier (repeatable); see --list")
    p.add_argument("--program", action="append", metavar="ID",
                   help="run only this corpus program or category (repeatable)")
    p.add_argument("--corpus", type=Path, help="corpus folder (default: corpus/ in the source tree)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the full results as JSON")
    p.add_argument("--chart", type=Path, metavar="FILE", help="write a safety-vs-latency chart (.png or .svg)")
    p.add_argument("--latency-runs", type=int, default=10, metavar="N",
                   help="fresh runs of a one-line program per tier for start-up p50/p90 (default 10)")
    p.add_argument("--throughput-runs", type=int, default=8, metavar="N",
                   help="runs of a small compute program, 2 at a time, for runs/s (default 8)")
    p.add_argument("--prepare", action="store_true",
                   help="build and cache every available tier's images (rootfs, initramfs, compiled module), then exit")
    p.add_argument("--list", action="store_true", help="list tiers and whether each is available here, then exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def run_from_args(args: argparse.Namespace, argv_for_record: list[str] | None = None) -> int:
    say = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    tiers = all_tiers()
    known = {t.name for t in tiers}
    if args.tier:
        unknown = set(args.tier) - known
        if unknown:
            print(f"wasm-runner compare: unknown tier(s): {', '.join(sorted(unknown))}; "
                  f"known: {', '.join(t.name for t in tiers)}", file=sys.stderr)
            return 2
        tiers = [t for t in tiers if t.name in args.tier]
    for name in ("latency_runs", "throughput_runs"):
        if not 0 <= getattr(args, name) <= 1000:
            print(f"wasm-runner compare: --{name.replace('_', '-')} must be between 0 and 1000", file=sys.stderr)
            return 2
    if args.chart and args.chart.suffix.lower() not in (".png", ".svg"):
        print("wasm-runner compare: --chart must end in .png or .svg", file=sys.stderr)
        return 2
    if args.list:
        for t in tiers:
            ok, detail = t.available()
            print(f"{t.name:16} {t.family:10} {'available' if ok else 'not available here'}: {detail}")
        return 0
    if args.prepare:
        failed = 0
        for t in tiers:
            ok, detail = t.available()
            if not ok:
                print(f"{t.name}: not available here: {detail}")
                continue
            try:
                t.prepare()
                print(f"{t.name}: prepared ({detail})")
            except Exception as exc:  # noqa: BLE001 - report every tier, whatever broke
                failed += 1
                print(f"{t.name}: prepare failed: {exc}")
            finally:
                t.cleanup()
        return 1 if failed else 0
    try:
        programs = load_corpus(args.corpus, args.program)
    except CorpusError as exc:
        print(f"wasm-runner compare: {exc}", file=sys.stderr)
        return 2
    reports = [compare_tier(t, programs, COMPARE_LIMITS, latency_runs=args.latency_runs,
                            throughput_runs=args.throughput_runs, progress=say) for t in tiers]
    print(render_table(reports, programs))
    command = "wasm-runner compare " + shlex.join(argv_for_record or [])
    if args.json:
        write_json(args.json, to_document(reports, programs, COMPARE_LIMITS, command.strip()))
        say(f"wrote {args.json}")
    if args.chart:
        try:
            write_chart(args.chart, reports)
            say(f"wrote {args.chart}")
        except (ImportError, ValueError) as exc:
            print(f"wasm-runner compare: no chart: {exc}", file=sys.stderr)
    return 1 if any(r.error for r in reports) else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``wasm-runner compare`` (and ``python -m wasm_runner.compare``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    return run_from_args(args, argv)
