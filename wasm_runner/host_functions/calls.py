"""One run's host calls: ``HostCalls`` answers the guest's calls of the app's functions.

A call arrives as a host call (``wasi.control``: bytes written on fd 0, on the guest's thread)
holding ``{"op": "host", "name": ..., "args": [...], "kwargs": {...}}`` in codec.py's tagged
JSON form. Nothing the guest's ``host`` module did is trusted: the request's size, shape, name
and values are checked here again. The answer is ``{"value": ...}`` or ``{"error": {"type",
"bases", "message", "args"}}`` (the function's exception as data: never its traceback).

The run's limits: ``host_calls`` calls, ``host_call_bytes`` per request or answer, and
``host_seconds`` inside the functions in all (the guest's fuel is untouched while the host
works; its wall clock runs). Going over one ends the run (``run.stop(limit name)``) and the
call's result is dropped; so does Stop or the wall limit during a call. A synchronous function
runs on the guest's thread, where nothing can interrupt it: the run ends when it returns. A
coroutine runs on the app's loop (or a background loop) and is cancelled when the run ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .. import codec
from ..errors import WasmRunnerError
from ..limits import Limits
from .functions import HostFunctions
from .loop import background_loop
from .records import UNKNOWN_NAME, CallRecord

__all__ = ["HOST_LIMITS", "HostCalls", "RunState", "describe_exception"]

# the limits a host call can hit: the stop reason a run ends with, the Limits field it names
HOST_LIMITS = {"host_calls": "host_calls", "host_bytes": "host_call_bytes", "host_time": "host_seconds"}
POLL_S = 0.05  # how often a call waiting for a coroutine looks for Stop
MAX_MESSAGE = 4000  # characters of an exception's message that cross


class _Record:
    """What is known of the call so far (a ``CallRecord`` at its end)."""

    def __init__(self, name: str, request_bytes: int) -> None:
        self.name, self.request_bytes = name, request_bytes
        self.outcome, self.answer_bytes, self.seconds = "refused", 0, 0.0


class _Refusal(WasmRunnerError):
    """A request that the rules refuse: answered as an error of ``kind`` (a builtin's name)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Ended(WasmRunnerError):
    """The run ends during this call (``why``: a limit name, or None for Stop/the wall limit)."""

    def __init__(self, why: str | None, name: str | None = None, *, refused: bool = False) -> None:
        super().__init__(why)
        self.why, self.name, self.refused = why, name, refused


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """An exception as the guest gets it: its type's name, builtin bases, message, and its args
    when it is a builtin's and they are plain data. Never its traceback."""
    t = type(exc)
    bases = [c.__name__ for c in t.__mro__ if c.__module__ == "builtins" and issubclass(c, BaseException)]
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - its __str__ failed: say what it is
        message = f"<unprintable {t.__name__}>"
    args = None
    if t.__module__ == "builtins":
        try:
            args = codec.to_tagged(list(exc.args), max_bytes=MAX_MESSAGE * 2)
        except (TypeError, ValueError, RecursionError):
            args = None
    name = t.__name__ if t.__name__.isidentifier() and len(t.__name__) <= 100 else "HostError"
    return {"type": name, "bases": bases[:8], "message": message[:MAX_MESSAGE], "args": args}


_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON as it is and as the codec would leave it (``codec.is_plain``);
    the common call then skips the codec's walk. A scalar is seen at once."""
    t = type(value)
    if value is None or t is bool or (t is int and -codec.SAFE_INT <= value <= codec.SAFE_INT):
        return True
    return codec.is_plain(value)


def _refusal(kind: str, message: str) -> dict[str, Any]:
    return {"type": kind, "bases": [kind, "Exception", "BaseException"], "message": message, "args": None}


class RunState(Protocol):
    """What ``HostCalls`` reads of the run (``wasi.GuestIO``): the program's reports (in: it has
    finished), why the run is stopping, its Stop event; and how to stop it."""

    reports: list[dict[str, Any]]
    stop_reason: str | None
    cancel: threading.Event | None
    deadline: float  # time.monotonic() of the wall limit

    def stop(self, reason: str) -> None: ...


class HostCalls:
    """Answers one run's host calls (a ``wasi.HostCall``) for the run ``run``: a host limit
    (``HOST_LIMITS``) stops it by name; no call starts once the program has finished (its report
    is in: a finalizer at exit) or the run is being stopped."""

    def __init__(self, functions: HostFunctions, limits: Limits, run: RunState) -> None:
        self.functions = functions
        self.limits = limits
        self.run = run
        self.calls = 0  # calls that reached the host
        self.seconds = 0.0  # time inside the functions
        self._coroutine = {name: inspect.iscoroutinefunction(fn) for name, fn in functions.functions.items()}

    def ended(self) -> bool:
        run = self.run
        return bool(run.reports) or run.stop_reason is not None or (run.cancel is not None and run.cancel.is_set())

    def __call__(self, request: bytes, stop: Callable[[], str | None]) -> bytes | None:
        record = _Record(UNKNOWN_NAME, len(request))
        try:
            answer = self._answer_call(request, stop, record)
            if len(answer) > self.limits.host_call_bytes:
                raise _Ended("host_bytes")
            record.answer_bytes = len(answer)
            return answer
        except _Ended as e:
            record.name = e.name or record.name
            if e.why is not None:
                record.outcome = "limit"
                self.run.stop(e.why)
            else:
                record.outcome = "refused" if e.refused else "stopped"
            return None
        finally:
            self._record(CallRecord(record.name, record.outcome, record.request_bytes,
                                    record.answer_bytes, record.seconds))

    def _answer_call(self, request: bytes, stop: Callable[[], str | None], record: _Record) -> bytes:
        self.calls += 1
        if self.ended():  # a finalizer after the program's end: refused, nothing to stop
            raise _Ended(None, refused=True)
        if self.calls > self.limits.host_calls:
            raise _Ended("host_calls")
        if len(request) > self.limits.host_call_bytes:
            raise _Ended("host_bytes")
        try:
            name, fn, args, kwargs = self._parse(request)
        except _Refusal as r:
            return self._error(_refusal(r.kind, str(r)))
        record.name = name
        started = time.perf_counter()
        failure: BaseException | None = None
        try:
            value = self._invoke(name, fn, args, kwargs, stop)
        except _Ended:
            self._spent(record, started)
            raise
        except BaseException as exc:  # noqa: BLE001 - the function's failure (SystemExit too): the guest gets it
            failure = exc
        self._spent(record, started)
        if (self.ended() or time.monotonic() >= self.run.deadline) and stop() is not None:
            raise _Ended(None)  # the run ends: what the call gave is dropped
        if failure is not None:
            record.outcome = "error"
            return self._error(describe_exception(failure))
        try:
            tagged = self._value(name, value)
        except _Refusal as r:
            return self._error(_refusal(r.kind, str(r)))
        except codec.TooLarge:
            raise _Ended("host_bytes") from None
        record.outcome = "ok"
        return self._answer({"value": tagged})

    # -- the parts of a call -----------------------------------------------------------------
    def _spent(self, record: _Record, started: float) -> None:
        """Count the time the call spent in its function; over ``host_seconds``: the run ends."""
        record.seconds = time.perf_counter() - started
        self.seconds += record.seconds
        if self.seconds > self.limits.host_seconds:
            raise _Ended("host_time")

    def _parse(self, request: bytes) -> tuple[str, Callable[..., Any], list[Any], dict[str, Any]]:
        try:  # within host_call_bytes (checked before) and codec's bound on values, counted first
            msg = codec.parse_json(request)
        except codec.PlainDataError as e:
            raise _Refusal("ValueError", f"a host call that is not JSON within its bounds ({e})") from None
        except (ValueError, RecursionError):
            raise _Refusal("ValueError", "a host call that is not JSON") from None
        if type(msg) is not dict or msg.get("op") != "host":
            raise _Refusal("ValueError", "a host call must be an object with \"op\": \"host\"")
        name, args, kwargs = msg.get("name"), msg.get("args"), msg.get("kwargs", {})
        fn = self.functions.functions.get(name) if type(name) is str else None
        if fn is None or not isinstance(name, str):
            raise _Refusal("NameError", "this run was given no host function of that name; it may call: "
                           + (", ".join(sorted(self.functions.functions)) or "none"))
        if msg.get("oversize") is True:  # the guest found its arguments over host_call_bytes
            raise _Ended("host_bytes", name)
        try:
            if not (type(args) is list and type(kwargs) is dict and _plain(args) and _plain(kwargs)):
                args = codec.from_tagged(args)
                kwargs = codec.from_tagged(kwargs)
        except (codec.PlainDataError, RecursionError) as e:
            raise _Refusal("ValueError", f"arguments that are not plain data ({e})") from None
        if type(args) is not list or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
            raise _Refusal("TypeError", "a host call's arguments must be a list and its keywords an object")
        return name, fn, args, kwargs

    def _invoke(self, name: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                stop: Callable[[], str | None]) -> Any:
        budget = self.limits.host_seconds - self.seconds
        if self._coroutine[name]:
            return self._wait(fn(*args, **kwargs), stop, budget)
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):  # a plain callable that hands back a coroutine
            return self._wait(value, stop, budget)
        return value

    def _wait(self, awaitable: Awaitable[Any], stop: Callable[[], str | None], budget: float) -> Any:
        """The coroutine's value, run on the app's loop (or the background loop); cancelled when
        the run must stop or the host time runs out."""
        loop = self.functions.loop or background_loop()

        async def run() -> Any:
            return await awaitable

        try:
            future = asyncio.run_coroutine_threadsafe(run(), loop)
        except RuntimeError:  # the app's loop is closed
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise RuntimeError("the app's event loop is closed") from None
        give_up = time.monotonic() + max(budget, 0.0)
        while True:
            left = give_up - time.monotonic()
            try:
                return future.result(timeout=max(0.0, min(POLL_S, left)))
            except concurrent.futures.TimeoutError:
                if stop() is not None:
                    future.cancel()
                    raise _Ended(None) from None
                if time.monotonic() >= give_up:
                    future.cancel()
                    raise _Ended("host_time") from None
            except concurrent.futures.CancelledError:
                raise RuntimeError("the host function was cancelled") from None

    def _value(self, name: str, value: Any) -> Any:
        if _plain(value):
            return value
        try:
            return codec.to_tagged(value, max_bytes=self.limits.host_call_bytes)
        except TypeError as e:
            raise _Refusal("TypeError", f"the host function {name} returned what cannot cross: {e}") from None
        except codec.TooLarge:
            raise
        except (codec.PlainDataError, RecursionError) as e:
            raise _Refusal("ValueError", f"the host function {name} returned what cannot cross: {e}") from None

    def _error(self, error: dict[str, Any]) -> bytes:
        """An error answer that fits the run's ``host_call_bytes``: the message shortened (an
        eighth of the limit: JSON may write a character as six), the args dropped if need be."""
        room = min(MAX_MESSAGE, self.limits.host_call_bytes // 8)
        error = {**error, "message": error["message"][:room]}
        answer = self._answer({"error": error})
        if len(answer) > self.limits.host_call_bytes:
            answer = self._answer({"error": {**error, "args": None}})
        return answer

    def _answer(self, answer: dict[str, Any]) -> bytes:
        return _ENCODE(answer).encode("utf-8")

    def _record(self, record: CallRecord) -> None:
        hook = self.functions.on_call
        if hook is not None:
            try:
                hook(record)
            except Exception:  # noqa: BLE001 - an observer never breaks a run
                pass
