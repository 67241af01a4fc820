"""How a run ended: a guest's host-side state (stop reason, traps, the wrapper's report) turned
into a ``Result`` with its status, limit, exit code and message."""

from __future__ import annotations

import time
from typing import Any

from ..explanations import checked, for_limit, render
from ..limits import Limits
from ..messages import limit_sentence
from ..notebook.bundles import BUNDLE_KINDS, BUNDLE_MIME, checked_bundle
from ..result import Output, Result, Status, output_position
from .guest import Guest

__all__ = ["MAX_OUTPUTS_BYTES", "classify", "outputs"]

MAX_OUTPUTS_BYTES = 16 << 20
# a host-function limit's stop reason (host_functions.HOST_LIMITS) -> its status; the reason is the
# result's ``limit``
HOST_LIMIT_STATUSES = {"host_calls": Status.HOST_CALLS_LIMIT, "host_bytes": Status.HOST_BYTES_LIMIT,
                       "host_time": Status.HOST_TIME_LIMIT}


def classify(guest: Guest, limits: Limits, t0: float, runtime: str, cell_done: bool = False) -> Result:
    """How the run ended. ``cell_done``: a session cell that reported while its instance
    lives on, so it ended like an exit with the code it reported."""
    io, oc = guest.io, guest.outcome
    report = io.reports[-1] if io.reports else None
    res = Result(
        status=Status.OK,
        stdout=io.stdout.text(),
        stderr=io.stderr.text(),
        stdout_truncated=io.stdout.truncated,
        stderr_truncated=io.stderr.truncated,
        fuel_used=oc.fuel_used,
        wall_ms=round((time.perf_counter() - t0) * 1000, 3),
        runtime=runtime,
        input_wait_ms=round(io.input_wait_s * 1000, 3),
    )
    if report is not None:
        res.outputs = outputs(report.get("outputs"))
    reason = "exit" if cell_done else io.stop_reason
    exit_code = None if cell_done else (io.exit_code if reason == "exit" else None)
    if reason == "exit" and exit_code is None and report is not None:
        exit_code = report.get("exit")
    if reason is None and report is not None and isinstance(report.get("exit"), int):
        # the program had ended and reported; freeing what it left then trapped (a structure
        # nested a million deep exhausts the stack): it ended as it reported
        reason, exit_code = "exit", report["exit"]
    if reason == "internal":
        res.status, res.limit = Status.INTERNAL_ERROR, None
        res.message = f"wasm-runner failed inside a host call ({io.internal_error}); the run was stopped."
    elif reason == "cancelled":
        res.status = Status.CANCELLED
    elif reason == "timeout":
        res.status, res.limit = Status.TIMEOUT, "wall"
    elif reason == "input_wait":
        res.status, res.limit = Status.TIMEOUT, "input_wait"
    elif reason == "output":
        res.status, res.limit = Status.OUTPUT_LIMIT, "output"
    elif reason in HOST_LIMIT_STATUSES:  # host functions: calls, bytes of a call, time in them
        res.status, res.limit = HOST_LIMIT_STATUSES[reason], reason
    elif oc.out_of_fuel:
        res.status, res.limit = Status.CPU_LIMIT, "cpu"
    elif exit_code is not None:
        res.exit_code = exit_code
        mem_err = bool(report and report.get("memory_error"))
        if exit_code == 0:
            res.status = Status.OK
        elif mem_err:
            res.status, res.limit = Status.MEMORY_LIMIT, "memory"
        elif io.quota.refused:
            res.status, res.limit = Status.DISK_LIMIT, "disk"
        else:
            res.status = Status.ERROR
    elif oc.trap is not None:
        near_cap = oc.memory_bytes >= guest.module.start_memory_bytes + limits.memory_bytes * 0.9
        if near_cap and not oc.stack_overflow:
            res.status, res.limit = Status.MEMORY_LIMIT, "memory"
        elif oc.stack_overflow:  # as a RecursionError would end it (stderr says so too)
            res.status, res.limit, res.exit_code = Status.ERROR, "stack", 1
            res.message = limit_sentence(Status.ERROR, limits, limit="stack")
        else:
            res.status = Status.ERROR
            res.exit_code = None
            res.message = f"The program crashed the interpreter: {oc.trap}."
    else:
        res.status = Status.INTERNAL_ERROR
        res.message = "The guest ended without reporting how."
    if not res.message and res.status is not Status.OK:
        stream = "stderr" if io.stderr.truncated and not io.stdout.truncated else "stdout"
        res.message = limit_sentence(res.status, limits, stream, limit=res.limit,
                                     exit_code=res.exit_code)
    res.explanation = explanation(res, report, limits)
    return res


def explanation(res: Result, report: dict[str, Any] | None, limits: Limits) -> dict[str, Any] | None:
    """What went wrong for a beginner, in English (a face renders it in another language): the
    guest's, checked, for an error it reported; the limit's, for a limit the host decided."""
    raw = None
    if res.status is Status.ERROR and res.limit is None and report is not None:
        raw = checked(report.get("explanation"))
    if raw is None:
        raw = for_limit(res.status.value, res.limit, limits.to_dict())
    return render(raw) if raw is not None else None


def outputs(raw: Any) -> list[Output]:
    """The rich outputs (images, tables, text, MIME bundles) of a wrapper report, within
    ``MAX_OUTPUTS_BYTES``: a bundle only as ``checked_bundle`` makes it, past the bound nothing."""
    out: list[Output] = []
    total = 0
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, dict):
            continue
        kind, mime, data = item.get("kind"), item.get("mime"), item.get("data")
        if not isinstance(mime, str) or not isinstance(data, str):
            continue
        if kind in BUNDLE_KINDS:
            if mime != BUNDLE_MIME:
                continue
            checked = checked_bundle(data) if len(data) <= MAX_OUTPUTS_BYTES else None
            if checked is None:
                continue
            data = checked
        elif kind not in ("image", "table", "text"):
            continue
        total += len(data)
        if total > MAX_OUTPUTS_BYTES:
            break
        out.append(Output(kind, mime, data, output_position(item.get("at"))))
    return out
