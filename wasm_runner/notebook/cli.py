"""``wasm-runner notebook run FILE.ipynb``: the notebook's code cells, in order, in one local
session, and the executed notebook written out (``-o OUT.ipynb``; default: next to the input as
``FILE.out.ipynb``; ``-o -``: stdout). One line on stderr says how the run went; the exit status
is 0 when every cell ran without an error, 1 when a cell failed, 2 for a notebook that cannot
be run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..limits import InvalidLimits, Limits
from .running import NotebookError, read_notebook, run_in_session

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wasm-runner notebook",
                                description="Run a Jupyter notebook's code cells in the sandbox.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run FILE.ipynb's code cells in one session; write the executed notebook")
    r.add_argument("file", help="the notebook (.ipynb, nbformat 4)")
    r.add_argument("-o", "--output", metavar="OUT", help="where the executed notebook goes "
                   "(default FILE.out.ipynb; '-': stdout)")
    d = Limits()
    r.add_argument("--cpu", type=float, default=d.cpu_seconds, metavar="SECONDS",
                   help=f"CPU limit of each cell (default {d.cpu_seconds})")
    r.add_argument("--timeout", type=float, default=d.wall_seconds, metavar="SECONDS",
                   help=f"wall-clock limit of each cell (default {d.wall_seconds})")
    r.add_argument("--memory", type=int, default=d.memory_mb, metavar="MB", help=f"memory cap (default {d.memory_mb})")
    r.add_argument("--runtime", default=None, help="default or small")
    r.add_argument("--allow-errors", action="store_true",
                   help="run the cells after one that raised (a limit still ends the run)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from ..sandbox import Sandbox

    try:
        nb = read_notebook(Path(args.file).read_bytes())
        limits = Limits(cpu_seconds=args.cpu, wall_seconds=args.timeout, memory_mb=args.memory).validate()
    except OSError as exc:
        print(f"wasm-runner: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except (NotebookError, InvalidLimits) as exc:
        print(f"wasm-runner: {exc}", file=sys.stderr)
        return 2
    sandbox = Sandbox(args.runtime, prestart=0)
    try:
        with sandbox.session(limits=limits) as session:
            done = run_in_session(nb, session, allow_errors=args.allow_errors)
    finally:
        sandbox.close()
    text = json.dumps(done.notebook, indent=1, ensure_ascii=False) + "\n"
    target = args.output or str(Path(args.file).with_suffix("")) + ".out.ipynb"
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")
    where = "" if target == "-" else f"; wrote {target}"
    if done.failure is None:
        print(f"wasm-runner: {done.cells_run} code cells ran{where}", file=sys.stderr)
        return 0
    print(f"wasm-runner: cell {done.failed} failed ({done.status}: "
          f"{done.failure.message or 'an exception'}) after {done.cells_run} code cells{where}",
          file=sys.stderr)
    return 1
