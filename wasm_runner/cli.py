"""The ``wasm-runner`` command.

``run`` behaves like ``python FILE``: output passes through as it is written, the program reads
the command's own stdin as it asks for it (piped data, a file, or the user's typing in a terminal:
time spent waiting for a line does not count toward the wall limit, ``--input-wait`` bounds one
wait), the exit status is the guest's, and a limit that stopped the
run is explained on stderr in one line (``--json`` prints the result object instead). The run goes
through the same ``wasm_runner.execution.Executor`` as every other face. Other subcommands live
with their concern and are dispatched by name (``SUBCOMMANDS``).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import select
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from .explanations import render
from .images import image_names
from .inputs import MAX_SOURCE_BYTES
from .limits import InvalidLimits, Limits
from .result import Result, Status

__all__ = ["SUBCOMMANDS", "main"]

# name -> (module with `main(argv) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("wasm_runner.http.cli", "serve the playground and the HTTP API (uvicorn)"),
    "compare": ("wasm_runner.compare.cli", "run the hostile corpus against every isolation tier"),
    "mcp": ("wasm_runner.mcp.cli", "serve the chat tools over MCP (stdio)"),
    "tools-schema": ("wasm_runner.tool_schema", "print OpenAI-style tool schemas for the HTTP API"),
    "wheelhouse": ("wasm_runner.browser.wheelhouse", "build the browser tier's local wheelhouse"),
    "packages": ("wasm_runner.packages.cli", "pin (lock), fetch and list the packages runs may ask for"),
    "bench": ("wasm_runner.bench", "measure fresh-run latency, throughput, fuel cost vs native"),
    "exercise": ("wasm_runner.exercises.cli", "validate an exercise (reference passes, starter fails), check code, export"),
    "lint": ("wasm_runner.lint.cli", "mark beginner mistakes in a Python file (Ruff, in plain words)"),
    "lti": ("wasm_runner.lti.cli", "print what an LMS admin registers for this server as an LTI 1.3 tool"),
    "notebook": ("wasm_runner.notebook.cli", "run a Jupyter notebook's code cells in one session; write the executed notebook"),
    "cluster": ("wasm_runner.scaleout.launcher.cli", "a local cluster: Redis, N serve replicas and HAProxy in front"),
}

_EXIT_FOR_STATUS = {
    Status.CPU_LIMIT: 124, Status.TIMEOUT: 124, Status.MEMORY_LIMIT: 137, Status.OUTPUT_LIMIT: 125,
    Status.DISK_LIMIT: 125, Status.INVALID_INPUT: 2, Status.INTERNAL_ERROR: 70, Status.CANCELLED: 130,
    Status.HOST_CALLS_LIMIT: 125, Status.HOST_BYTES_LIMIT: 125, Status.HOST_TIME_LIMIT: 124,
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wasm-runner",
        description="Run untrusted Python in a fresh wasmtime sandbox.",
        epilog="More: " + "; ".join(f"{k}: {h}" for k, (_, h) in SUBCOMMANDS.items()),
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a file or -c CODE in a fresh sandbox")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("file", nargs="?", help="the Python file to run ('-' reads it from stdin)")
    src.add_argument("-c", dest="code", help="program passed in as a string")
    d = Limits()
    r.add_argument("--stdin", metavar="FILE", help="file whose content is the program's stdin ('-': this "
                   "command's stdin, the default unless the program itself is read from stdin)")
    r.add_argument("--cpu", type=float, default=d.cpu_seconds, metavar="SECONDS", help=f"CPU limit (default {d.cpu_seconds})")
    r.add_argument("--timeout", type=float, default=d.wall_seconds, metavar="SECONDS", help=f"wall-clock limit (default {d.wall_seconds})")
    r.add_argument("--input-wait", type=float, default=d.input_wait_seconds, metavar="SECONDS",
                   help=f"how long one input() may wait for a line before the run ends as abandoned; "
                   f"waiting does not count toward --timeout (default {d.input_wait_seconds:g})")
    r.add_argument("--memory", type=int, default=d.memory_mb, metavar="MB", help=f"memory cap (default {d.memory_mb})")
    r.add_argument("--output-limit", type=int, default=d.stdout_bytes, metavar="BYTES", help=f"cap on stdout and on stderr (default {d.stdout_bytes})")
    r.add_argument("--disk-limit", type=float, default=d.disk_mb, metavar="MB", help=f"scratch + /out quota (default {d.disk_mb})")
    r.add_argument("--max-files", type=int, default=d.max_files, metavar="N", help=f"file-count quota (default {d.max_files})")
    r.add_argument("--data", metavar="DIR", help="host folder shown read-only at /data")
    r.add_argument("--out", metavar="DIR", help="host folder shown writable at /out")
    r.add_argument("--runtime", default=None, help="default (CPython 3.15 + numpy, pandas, matplotlib) or small (CPython 3.12)")
    r.add_argument("--image", default=None, choices=image_names(),
                   help="the default runtime's pre-initialized image: plain (default) or datascience "
                        "(numpy, pandas, matplotlib already imported)")
    r.add_argument("--package", action="append", default=[], metavar="NAME", dest="packages",
                   help="a package of the operator's wheelhouse the program may import (repeatable; "
                        "$WASM_RUNNER_PACKAGES_LOCK names the lock; see `wasm-runner packages`)")
    r.add_argument("--no-fuel", action="store_true", help="turn fuel metering off (no CPU limit; the wall limit still holds)")
    r.add_argument("--json", action="store_true", help="print the result object as one JSON document")
    r.add_argument("--lang", help="the language of the explanation under an error (en, de; default: "
                   "from LANG, else English)")
    w = sub.add_parser("warm", help="build and compile, ahead of time, what the server's profiles and runtimes use")
    w.add_argument("--runtime", action="append", help="only this runtime (repeatable; default: every one the config offers)")
    w.add_argument("--config", metavar="TOML", help="the server config whose profiles to prepare (default: the built-in profiles)")
    sn = sub.add_parser("snapshot", help="build (or find cached) the default runtime's pre-initialized images")
    sn.add_argument("--image", action="append", choices=image_names(), help="image(s) to build (default: all)")
    sn.add_argument("--no-fuel", action="store_true", help="compile for the engine without fuel metering")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    if not faulthandler.is_enabled():  # a crash of the process (not of a guest) says where, in its log
        faulthandler.enable()
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[args_list[0]][0])
        return int(module.main(args_list[1:]) or 0)
    args = _parser().parse_args(args_list)
    if args.cmd == "warm":
        status = _warm(args.runtime, args.config)
        return _warm_browser() or status
    if args.cmd == "snapshot":
        return _snapshot(args.image, fuel=not args.no_fuel)
    return _run(args)


def warm_targets(names: list[str] | None, config_path: str | None) -> list[tuple[str, str | None]]:
    """What ``warm`` prepares, each once: the (runtime, image) of every profile of the server's
    config and each offered runtime's default module; only runtimes in ``names`` when given.
    The default runtime's ``plain`` comes before its other images (their set-up runs use it)."""
    from .settings import load_config
    from .sandbox.default import sandbox_key

    config = load_config(config_path)
    keys = [sandbox_key(p.runtime, p.image) for p in config.profiles.values()]
    keys += [sandbox_key(runtime) for runtime in config.runtimes]
    keys = [k for k in dict.fromkeys(keys) if not names or k[0] in names]
    keys += [sandbox_key(n) for n in names or () if n not in {k[0] for k in keys}]
    return sorted(keys, key=lambda k: (k[0], k[1] not in (None, "plain")))


def _warm(names: list[str] | None, config_path: str | None = None) -> int:
    """Prepare every target of ``warm_targets`` (fuel on: what runs use) and run ``print('ok')``
    in each. Runtimes are prepared side by side (one's compile uses the cores while the other
    builds an image), the images of one runtime in order."""
    import threading

    from .execution import Executor, Job, OneSandbox
    from .runtimes import RuntimeUnavailable
    from .sandbox import Sandbox

    from .settings import ConfigError

    try:
        targets = warm_targets(names, config_path)
    except ConfigError as e:
        print(f"wasm-runner warm: {e}", file=sys.stderr)
        return 2
    status = [0]
    lock = threading.Lock()

    def say(line: str, failed: bool = False) -> None:
        with lock:
            print(line, file=sys.stderr if failed else sys.stdout, flush=True)
            if failed:
                status[0] = 1

    def prepare(runtime: str) -> None:
        for name, image in (t for t in targets if t[0] == runtime):
            label = f"{name}{'/' + image if image else ''}"
            try:
                sb = Sandbox(name, image=image, prestart=0)
                executor = Executor(OneSandbox(sb), workers=1)
                res = executor.run_sync(Job("print('ok')", runtime=name, kind="cli"))
                executor.shutdown()
                sb.close()
                say(f"{label}: {res.status.value}, {res.wall_ms:.1f} ms for print('ok')", not res.ok)
            except (RuntimeUnavailable, RuntimeError, ValueError) as e:
                say(f"{label}: unavailable: {e}", True)
                return

    threads = [threading.Thread(target=prepare, args=(rt,), name=f"warm-{rt}")
               for rt in dict.fromkeys(t[0] for t in targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return status[0]


def _warm_browser() -> int:
    """Build the browser tier's Pyodide memory snapshot (when web/ is set up); 0 unless it failed."""
    from .browser.locations import web_dir
    from .browser.pyodide_snapshot import SnapshotStore, snapshot_enabled

    if not snapshot_enabled() or not (web_dir() / "node_modules" / "pyodide").is_dir():
        return 0
    try:
        snap = SnapshotStore(web_dir()).ensure()
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        print(f"browser snapshot: failed ({e}); browser workers will start Python normally", file=sys.stderr)
        return 1
    print(f"browser snapshot: {snap.name}, {len(snap.content) // 1024} KiB (gzip)")
    return 0


def _snapshot(names: list[str] | None, *, fuel: bool) -> int:
    """Build the default runtime's images (cached by their inputs) and report each one."""
    import time

    from .images import image_path
    from .runtimes import RuntimeUnavailable
    from .sandbox import Sandbox
    from .sandbox.wrapper import BOOT_SOURCE

    status = 0
    for image in names or image_names():
        t0 = time.monotonic()
        try:
            sb = Sandbox("default", fuel=fuel, image=image, prestart=0)
        except (RuntimeUnavailable, RuntimeError) as e:
            print(f"{image}: failed: {e}", file=sys.stderr)
            status = 1
            continue
        res = sb.run("print('ok')")
        sb.close()
        path = image_path(sb.runtime, image, BOOT_SOURCE)
        print(f"{image}: {path} ({path.stat().st_size >> 20} MiB module, {sb.start_memory_bytes >> 20} MiB of "
              f"memory at start), ready in {time.monotonic() - t0:.1f} s; print('ok'): {res.status.value}")
        if not res.ok:
            status = 1
    return status


def _read_source(args: argparse.Namespace) -> tuple[str | bytes, str]:
    if args.code is not None:
        return args.code, "<string>"
    if args.file == "-":
        return sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1), "<stdin>"
    with open(args.file, "rb") as f:
        return f.read(MAX_SOURCE_BYTES + 1), args.file.rsplit("/", 1)[-1]


class FdInput:
    """The program's stdin read from a host file descriptor as the program asks for it (the
    sandbox's ``InputSource``): a pipe or file streams through, a terminal answers ``input()``
    with the user's line. ``read`` gives up after ``timeout`` so the run's wall limit holds."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.eof = False

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        if self.eof:
            return b""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        try:
            data = os.read(self.fd, max(1, max_bytes))
        except OSError:  # a terminal that went away
            data = b""
        if not data:
            self.eof = True
        return data


def _stdin_is_open() -> bool:
    try:
        os.fstat(0)
    except OSError:
        return False
    return True


def _run(args: argparse.Namespace) -> int:
    from .execution import Caller, Executor, Job, OneSandbox, Policy
    from .sandbox import Sandbox, default_prestart

    if args.file == "-" and args.stdin == "-":
        print("wasm-runner: the program and its input cannot both come from stdin; give the "
              "input with --stdin FILE", file=sys.stderr)  # fmt: skip
        return 2
    source = None
    try:
        code, filename = _read_source(args)
        stdin = None
        if args.stdin and args.stdin != "-":
            with open(args.stdin, "rb") as f:
                stdin = f.read()
        elif args.file != "-" and _stdin_is_open():
            source = FdInput(0)  # like python FILE: the program reads our stdin as it goes
    except OSError as e:
        print(f"wasm-runner: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        limits = Limits(
            cpu_seconds=args.cpu, wall_seconds=args.timeout, memory_mb=args.memory,
            input_wait_seconds=args.input_wait,
            stdout_bytes=args.output_limit, stderr_bytes=args.output_limit,
            disk_mb=args.disk_limit, max_files=args.max_files,
        ).validate()
    except InvalidLimits as e:
        return _finish(Result.invalid(f"Invalid limit: {e}."), args.json)
    stream = None if args.json else _passthrough
    try:
        # one run per process: its instance starts as soon as the module is loaded, while the
        # run is prepared, and no other is started after it (WASM_RUNNER_PRESTART=0: none)
        sb = Sandbox(args.runtime, fuel=not args.no_fuel, image=args.image, prestart=0)
        if default_prestart():
            sb.add_pool("plain", size=1, refill=False)
    except ValueError as e:
        return _finish(Result.invalid(f"Invalid option: {e}."), args.json)
    from .packages import LockError

    try:
        executor = Executor(OneSandbox(sb), workers=1)
    except LockError as e:
        sb.close()
        return _finish(Result.invalid(f"{e}."), args.json)
    job = Job(
        tenant=Caller("local"), client="cli", kind="cli",
        profile=Policy("cli", limits=limits, runtime=sb.name, data_dir=args.data),
        limits=limits, runtime=sb.name, code=code, stdin=stdin, filename=filename,
        out_dir=args.out, packages=tuple(args.packages),
    )  # fmt: skip
    try:
        result = executor.run_sync(job, on_output=stream, input_source=source)
    except KeyboardInterrupt:  # the guest was stopped on the way out (Sandbox.run's finally)
        print("wasm-runner: interrupted", file=sys.stderr)
        return 130
    finally:
        executor.shutdown()
        sb.close()
    return _finish(result, args.json, args.lang or os.environ.get("LANG"))


def _passthrough(stream: str, chunk: bytes) -> None:
    out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
    out.write(chunk)
    out.flush()


def _say_explanation(explanation: dict[str, Any]) -> None:
    """The explanation under the traceback (docs/explanations.md), on stderr."""
    print(f"\nwasm-runner: {explanation['title']}\n  {explanation['text']}\n  {explanation['hint']}",
          file=sys.stderr)


def _finish(result: Result, as_json: bool, lang: str | None = None) -> int:
    if result.explanation:
        result.explanation = render(result.explanation, lang)
    if as_json:
        print(result.to_json(indent=2))
        return 0 if result.ok else (result.exit_code or _EXIT_FOR_STATUS.get(result.status, 1))
    if result.explanation and result.status is Status.ERROR:  # a limit's one line says what to try
        _say_explanation(result.explanation)
    if result.status in _EXIT_FOR_STATUS:
        print(f"wasm-runner: {result.status.value}: {result.message}", file=sys.stderr)
        return _EXIT_FOR_STATUS[result.status]
    return result.exit_code or 0


if __name__ == "__main__":
    sys.exit(main())
