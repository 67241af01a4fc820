"""A test check in two instances: the student's program in one, the teacher's test in another.

The student's instance loads the code as the module ``solution`` and serves calls; the test's
instance, which the student's code never touches, runs one teacher test with the student's
public names as proxies. Each use of a proxy is a host call (``wasi.control``) that lands here,
in a ``Bridge``: the message is checked (its shape, and its values with ``codec``: plain data and
handles only, bounded) and handed to the other instance, whose answer comes back the same way.
The test's report reaches the host only from the test's instance. Nothing the student's code
sends can run code on the test's side: the test's instance serves calls of the functions the
test itself handed over, nothing else.

``run_test_check`` runs one check: both instances at once (the student's code loads while the
test compiles), one check's limits for both (CPU and wall each; the memory limit split), a
limit in either fails the check naming it. The guest side is ``guest/check_agent.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.resources import files as _pkg_files
from typing import Any

from .. import codec
from ..errors import WasmRunnerError
from ..limits import Limits
from ..result import LIMIT_STATUSES, Result, Status

__all__ = ["Bridge", "ProtocolError", "program", "run_test_check", "split_limits", "AGENT_FILE"]

AGENT_FILE = "<wasm-runner check>"
MAX_TEXT = 1 << 20  # printed output, messages: characters per field
# one message of either side's, at most, checked before it is parsed (a guest wrote it): its
# values (each at most 4 MiB and 200,000 items: guest/check_agent.py) and printed output
MAX_MESSAGE_BYTES = 16 << 20
MAX_MESSAGE_VALUES = 250_000
SIDES = ("student", "test")
POLL_S = 0.05


def _source(*parts: str) -> str:
    return (_pkg_files("wasm_runner").joinpath(*parts)).read_text()


_SOURCES = {
    "codec": _source("codec.py"),
    "judging": _source("exercises", "judging.py"),
    "agent": _source("guest", "check_agent.py"),
}


def program(role: str) -> str:
    """The program of one side (``student`` or ``test``): the codec, the judging logic (test
    side) and the agent, each loaded as a module of its own, then the agent's ``main``."""
    mods = ["codec", "agent"] + (["judging"] if role == "test" else [])
    lines = ["import sys",
             "def _wr_load(name, src):",
             "    mod = type(sys)('wasm_runner_' + name)",
             "    exec(compile(src, '<wasm-runner ' + name + '>', 'exec'), mod.__dict__)",
             "    return mod"]
    for name in mods:
        lines.append(f"_wr_{name} = _wr_load({name!r}, {_SOURCES[name]!r})")
    judging = "_wr_judging" if role == "test" else "None"
    lines.append(f"_wr_agent.main({role!r}, _wr_codec, {judging})")
    return "\n".join(lines) + "\n"


_PROGRAMS = {role: program(role) for role in SIDES}


def split_limits(limits: Limits) -> tuple[Limits, Limits]:
    """(student's, test's) limits: the check's CPU and wall limits each, its memory shared (the
    test's side a quarter, 16-64 MB; the student's the rest)."""
    test_mb = min(64, max(16, limits.memory_mb // 4))
    student_mb = max(16, limits.memory_mb - test_mb)
    return replace(limits, memory_mb=student_mb), replace(limits, memory_mb=test_mb)


class ProtocolError(WasmRunnerError, ValueError):
    """A message that is not what the protocol allows at that point."""


# -- checking messages -------------------------------------------------------------------------
def _value(data: Any) -> Any:
    """``data`` as a value in the tagged form (plain data and handles), or ProtocolError."""
    try:
        codec.from_tagged(data, handle=lambda tag: tag)
    except (codec.PlainDataError, TypeError, RecursionError) as e:
        raise ProtocolError(f"a value that is not plain data ({e})") from None
    return data


def _text(data: Any, limit: int = MAX_TEXT) -> str:
    if type(data) is not str:
        raise ProtocolError("text expected")
    return data[:limit]


def _exception(data: Any) -> dict[str, Any]:
    if type(data) is not dict:
        raise ProtocolError("an exception must be an object")
    name = data.get("type")
    if type(name) is not str or not name.isidentifier() or len(name) > 100:
        raise ProtocolError("an exception's type must be a name")
    bases = data.get("bases")
    if type(bases) is not list or len(bases) > 50 or any(type(b) is not str or len(b) > 100 for b in bases):
        raise ProtocolError("an exception's bases must be names")
    frames = data.get("frames") or []
    if type(frames) is not list or len(frames) > 50:
        raise ProtocolError("an exception's frames must be a short list")
    clean_frames = []
    for f in frames:
        if (type(f) is not list or len(f) != 4 or type(f[1]) is not int or
                not all(type(x) is str for x in (f[0], f[2], f[3]))):
            raise ProtocolError("a frame must be [file, line, function, text]")
        clean_frames.append([f[0][:200], f[1], f[2][:200], f[3][:300]])
    args = data.get("args")
    return {"op": "raise", "type": name, "bases": bases, "message": _text(data.get("message", ""), 4000),
            "args": None if args is None else _value(args), "frames": clean_frames}


def _output(msg: dict[str, Any], clean: dict[str, Any]) -> dict[str, Any]:
    for key in ("out", "err"):
        if msg.get(key):
            clean[key] = _text(msg[key])
    return clean


def check_message(side: str, msg: Any) -> dict[str, Any]:
    """The message ``side`` sent, rebuilt from what the protocol allows (anything else in it is
    dropped); ProtocolError when it is malformed."""
    if type(msg) is not dict:
        raise ProtocolError("a message must be an object")
    op = msg.get("op")
    if op == "call":
        actions = ("call",) if side == "student" else ("call", "getattr", "setattr", "delattr", "op")
        if msg.get("action") not in actions:
            raise ProtocolError(f"the {side}'s side may not ask for {str(msg.get('action'))[:40]!r}")
        target, name = msg.get("target"), msg.get("name")
        if type(target) is not int or not (name is None or (type(name) is str and len(name) <= 200)):
            raise ProtocolError("a call needs a target number and a name")
        args, kwargs = msg.get("args"), msg.get("kwargs")
        if type(args) is not list or type(kwargs) is not dict:
            raise ProtocolError("a call's arguments must be a list and keywords an object")
        return {"op": "call", "target": target, "action": msg["action"], "name": name,
                "args": _value(args), "kwargs": _value(kwargs)}
    if op == "return":
        clean: dict[str, Any] = {"op": "return", "value": _value(msg.get("value"))}
        changed = msg.get("args")
        if changed:
            if type(changed) is not dict or not all(type(k) is str and k.isdigit() and len(k) < 6 for k in changed):
                raise ProtocolError("changed arguments must be keyed by position")
            clean["args"] = {k: _value(v) for k, v in changed.items()}
        return _output(msg, clean)
    if op == "raise":
        return _output(msg, _exception(msg))
    if op == "ready" and side == "student":
        if msg.get("error") is not None:
            return {"op": "ready", "error": _exception(msg["error"])}
        names = msg.get("names")
        if type(names) is not dict:
            raise ProtocolError("the student's names must be an object")
        # only public names cross (``__builtins__``, ``__wr_compare`` and the like never reach
        # the test's globals); the test's side also keeps builtins' names out of its globals
        public = {k: v for k, v in names.items() if type(k) is str and not k.startswith("_")}
        return {"op": "ready", "names": _value(public)}
    if op == "hello" and side == "test":
        return {"op": "hello"}
    if op == "done" and side == "test":
        return {"op": "done", "passed": msg.get("passed") is True, "message": _text(msg.get("message", "")),
                "explanation": msg.get("explanation")}  # checked by the checker (explanations.checked)
    raise ProtocolError(f"the {side}'s side may not send {str(op)[:40]!r} here")


# -- the bridge --------------------------------------------------------------------------------
@dataclass
class Bridge:
    """Between the two instances of one check: each side's host calls land in ``handler(side)``.

    The sides take turns: a side that sends a message waits for its answer, serving the calls
    that come meanwhile (``stack`` holds who made each outstanding call). The student's "ready"
    waits here until the test says "hello"; the test's "done" is the check's ``record``.
    """

    inbox: dict[str, bytes | None] = field(default_factory=lambda: dict.fromkeys(SIDES))
    ready: bytes | None = None
    waiting_hello: bool = False
    stack: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None
    problem: str | None = None  # why the student's side broke the protocol
    ended: set[str] = field(default_factory=set)
    calls: int = 0
    cv: threading.Condition = field(default_factory=threading.Condition)

    def handler(self, side: str) -> Callable[[bytes, Callable[[], str | None]], bytes | None]:
        def call(request: bytes, stop: Callable[[], str | None]) -> bytes | None:
            return self.call(side, request, stop)
        return call

    def call(self, side: str, request: bytes, stop: Callable[[], str | None]) -> bytes | None:
        other = "test" if side == "student" else "student"
        try:
            msg = check_message(side, codec.parse_json(request, max_bytes=MAX_MESSAGE_BYTES,
                                                      max_items=MAX_MESSAGE_VALUES))
        except (ValueError, RecursionError) as e:
            if isinstance(e, codec.PlainDataError) and not isinstance(e, ProtocolError):
                return self._refuse(side, f"a message that is not JSON within its bounds ({e})")
            return self._refuse(side, str(e) if isinstance(e, ProtocolError) else "a message that is not JSON")
        with self.cv:
            self.calls += 1
            op = msg["op"]
            if op == "ready":
                if self.ready is not None:
                    return self._refuse(side, "ready twice")
                self.ready = json.dumps(msg).encode()
                if self.waiting_hello:
                    self._deliver("test", self.ready)
            elif op == "hello":
                if self.ready is not None:
                    return self.ready
                self.waiting_hello = True
            elif op == "call":
                if side == "student" and (not self.stack or self.stack[-1] != "test"):
                    return self._refuse(side, "a call back while no call of the test's was served")
                self.stack.append(side)
                self._deliver(other, json.dumps(msg).encode())
            elif op in ("return", "raise"):
                if not self.stack or self.stack[-1] != other:
                    return self._refuse(side, "an answer to no call")
                self.stack.pop()
                self._deliver(other, json.dumps(msg).encode())
            else:  # "done": the test's verdict; the student's side may end
                self.record = {"passed": msg["passed"], "message": msg["message"],
                               "explanation": msg.get("explanation")}
                self._deliver("student", b'{"op": "end"}')
                return b'{"op": "end"}'
            return self._wait(side, other, stop)

    def _deliver(self, side: str, data: bytes) -> None:
        self.inbox[side] = data
        self.cv.notify_all()

    def _wait(self, side: str, other: str, stop: Callable[[], str | None]) -> bytes | None:
        while self.inbox[side] is None:
            if stop() is not None:
                return None
            if other in self.ended:  # the other instance is gone
                return b'{"op": "abort"}' if side == "test" else b'{"op": "end"}'
            self.cv.wait(POLL_S)
        data, self.inbox[side] = self.inbox[side], None
        return data

    def _refuse(self, side: str, why: str) -> bytes | None:
        """A message the protocol does not allow. From the student's side it fails the check
        (the test's side is told to end); from the test's side it is a bug of ours."""
        with self.cv:
            if side == "student":
                self.problem = self.problem or why
            else:
                self.problem = self.problem or f"internal: {why}"
            self._deliver("test", b'{"op": "abort"}')
            self._deliver("student", b'{"op": "end"}')
            self.ended.add(side)
        return None

    def end(self, side: str) -> None:
        with self.cv:
            self.ended.add(side)
            self.cv.notify_all()


def run_test_check(
    sandbox: Any,
    code: str,
    tests: str,
    test: str | None,
    limits: Limits,
    *,
    tests_file: str = "tests.py",
    student_file: str = "solution.py",
    cancel: threading.Event | None = None,
    pool: str | None = None,
) -> tuple[Result, dict[str, Any] | None]:
    """Run one test check: (the result that decides it, the test's record or None).

    The result is the student instance's when a limit stopped it (the check fails naming that
    limit), else the test instance's. The record is None when the test did not report (an
    instance ended early, or the student's side broke the protocol: then it says so)."""
    bridge = Bridge()
    student_limits, test_limits = split_limits(limits)
    student_stop = threading.Event()
    results: dict[str, Result] = {}

    def student() -> None:
        try:
            results["student"] = sandbox.run(
                _PROGRAMS["student"], stdin=json.dumps({"student": code, "student_file": student_file}),
                limits=student_limits, filename=AGENT_FILE, cancel=student_stop, pool=pool,
                host_call=bridge.handler("student"))
        finally:
            bridge.end("student")

    thread = threading.Thread(target=student, name="check-student", daemon=True)
    thread.start()
    watcher = None
    if cancel is not None:
        def watch() -> None:
            while not cancel.wait(POLL_S):
                if "test" in bridge.ended:
                    return
            student_stop.set()
        watcher = threading.Thread(target=watch, name="check-cancel", daemon=True)
        watcher.start()
    try:
        payload = {"tests": tests, "tests_file": tests_file, "test": test, "student_file": student_file}
        res_test = sandbox.run(_PROGRAMS["test"], stdin=json.dumps(payload), limits=test_limits,
                               filename=AGENT_FILE, cancel=cancel, pool=pool,
                               host_call=bridge.handler("test"))
    finally:
        bridge.end("test")
    thread.join(1.0)  # told to end: it does at once, unless it is busy with something of its own
    if thread.is_alive():
        student_stop.set()
        thread.join()
    res_student = results.get("student") or Result(status=Status.INTERNAL_ERROR, message="internal error: "
                                                     "the student's instance did not report")
    if res_student.status in LIMIT_STATUSES:
        return res_student, None
    if res_test.status != Status.OK:
        return res_test, None
    if bridge.problem is not None:
        return res_test, {"passed": False, "message": "The check could not talk to your code: "
                          f"{bridge.problem}."}
    return res_test, bridge.record
