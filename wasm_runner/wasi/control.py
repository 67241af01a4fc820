"""The control channel between the host and the guest wrapper (``guest/runner.py``).

Until a job is handed over, the guest's fd 0 serves job frames (``CONTROL_MAGIC``, a length, JSON)
instead of stdin; the wrapper's reports come back as JSON written to fd 0. Reading a frame happens
on the guest's thread, which is where ``on_handover`` arms the run's budgets.

**Host calls**: a run given a ``HostCall`` may write ``CALL_MAGIC`` + a request on fd 0 at any
time; the host hands the request to the ``HostCall`` on the guest's thread (it may block: the run
waits, its CPU budget untouched, its wall clock running) and the next read of fd 0 gets the
answer: 4 bytes of length (little-endian), then the answer's bytes. The exercise checker links a
test's instance to the student's this way (``exercises/crossing.py``).
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import codec
from .abi import CONTROL_MAGIC

__all__ = ["ControlChannel", "HostCall", "MAX_CALL_BYTES", "MAX_REPORT_BYTES", "MAX_REPORT_VALUES"]

MAX_CALL_BYTES = 32 << 20  # one host call's request or answer, at most
# one report of the wrapper's (how the job ended, and its rich outputs, which the host keeps up
# to 16 MiB: sandbox.classify.MAX_OUTPUTS_BYTES), at most; and the values its JSON may hold
MAX_REPORT_BYTES = 17 << 20
MAX_REPORT_VALUES = 100_000

# (request, stop) -> answer, or None to abandon the call: ``stop()`` returns why the run must
# end (limit, cancel) or None; a call that blocks polls it and gives up when it says so.
HostCall = Callable[[bytes, Callable[[], "str | None"]], "bytes | None"]


class ControlChannel:
    """The job queue (host -> guest) and the reports (guest -> host) of one guest."""

    stop_reason: str | None

    def __init__(self) -> None:
        self.jobs: list[bytes] = []
        self.jobs_cv = threading.Condition()
        self.control = True  # fd 0 serves job frames until a job was handed over
        self.pending_frame = b""
        self.reports: list[dict[str, Any]] = []
        self.on_handover: Callable[[Any], None] | None = None  # called on the guest thread
        self.on_report: Callable[[], None] | None = None  # likewise, when a job reports
        self.closed_for_jobs = False
        self.idle = False
        self.outbuf: int | None = None  # where the wrapper keeps output not yet written
        self.tick_addr: int | None = None  # the wrapper's pace flag (a guest address)
        self.host_call: HostCall | None = None  # the run's host calls (None: refused)
        self.call_answer = b""  # what fd 0 reads next: the last host call's answer

    # ---- host side -------------------------------------------------------------------------
    def submit(self, job: dict[str, Any]) -> None:
        data = json.dumps(job).encode()
        with self.jobs_cv:
            self.jobs.append(CONTROL_MAGIC + struct.pack("<I", len(data)) + data)
            self.jobs_cv.notify_all()

    def end_jobs(self) -> None:
        with self.jobs_cv:
            self.closed_for_jobs = True
            self.jobs_cv.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the guest asks for its next job (it finished the previous one)."""
        end = time.monotonic() + timeout
        with self.jobs_cv:
            while not (self.idle and not self.jobs):
                left = end - time.monotonic()
                if left <= 0 or self.stop_reason is not None:
                    return False
                self.jobs_cv.wait(min(left, 0.1))
            return True

    # ---- guest side (called from the host calls, on the guest's thread) ---------------------
    def next_frame(self) -> bytes | None:
        with self.jobs_cv:
            self.idle = True
            self.jobs_cv.notify_all()
            while not self.jobs and not self.closed_for_jobs:
                self.jobs_cv.wait(0.5)
            self.idle = False
            if not self.jobs:
                return None
            return self.jobs.pop(0)

    def read_control(self, want: int) -> bytes:
        """Up to ``want`` bytes of the current job frame, blocking for the next job first; an
        empty answer when no job will come (the run ends)."""
        if not self.pending_frame:
            frame = self.next_frame()
            if frame is None:
                self.stop("closed")
                return b""
            job = json.loads(frame[8:])
            if self.on_handover is not None:
                self.on_handover(job)
            self.pending_frame = frame
        data, self.pending_frame = self.pending_frame[:want], self.pending_frame[want:]
        if not self.pending_frame:
            self.control = False
        return data

    def take_report(self, data: bytes) -> bool:
        """Record one report the wrapper wrote; False when it is not JSON.

        ``{"outbuf": address, "tick": address}`` is no report: the wrapper says where its
        pending output lives (``outbuf``), so that a run stopped by force loses none of it
        (``Guest.recover_output``), and where its pace flag is (``tick``, set by the host every
        ``PACE_S`` while the guest runs: how the wrapper knows time passed without a clock call).
        """
        try:  # bounded before the parse starts: a guest writes these bytes
            report = codec.parse_json(data, max_bytes=MAX_REPORT_BYTES, max_items=MAX_REPORT_VALUES)
        except (ValueError, UnicodeDecodeError):
            return False
        if isinstance(report, dict) and "outbuf" in report and set(report) <= {"outbuf", "tick"}:
            for key in ("outbuf", "tick"):
                value = report.get(key)
                if isinstance(value, int) and 0 <= value < 1 << 32:
                    setattr(self, "tick_addr" if key == "tick" else "outbuf", value)
            return True
        self.reports.append(report)
        if self.on_report is not None:
            self.on_report()
        self.control = True
        return True

    def take_call(self, request: bytes) -> bool:
        """Answer one host call (``request`` without ``CALL_MAGIC``); False when it is refused
        (no host calls in this run, one already unread, too big) or abandoned (the run ends)."""
        handler = self.host_call
        if handler is None or self.call_answer or len(request) > MAX_CALL_BYTES:
            return False
        answer = handler(request, self.should_stop)
        if answer is None or len(answer) > MAX_CALL_BYTES:
            return False
        self.call_answer = struct.pack("<I", len(answer)) + answer
        return True

    def read_answer(self, want: int) -> bytes:
        data, self.call_answer = self.call_answer[:want], self.call_answer[want:]
        return data

    def stop(self, reason: str) -> None:  # pragma: no cover - GuestIO defines it
        raise NotImplementedError

    def should_stop(self) -> str | None:  # pragma: no cover - GuestIO defines it
        raise NotImplementedError
