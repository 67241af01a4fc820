# wasm-runner's ``host`` module: the app's functions, as the guest's code calls them.
#
#     from host import lookup_order
#     order = lookup_order(42, fields=["total"])
#
# Each call is a host call: the name and the arguments, as plain data in codec.py's tagged JSON
# form, go to the host (a write of ``CALL_MAGIC`` + JSON on fd 0, the answer read back with a
# length prefix: ``wasi/control.py``); the host checks everything again, calls the function and
# answers with its value, or with its exception as data (type name, builtin bases, message),
# which is raised here as a ``HostError`` named like the host's exception. Nothing in this
# module is trusted by the host: the host refuses what the rules refuse whatever this file did.
#
# Shipped to the guest as source with each run that has functions (``host_functions.program``),
# compiled under the wrapper's own file name so that tracebacks show only the user's frames.
# Standard library only; ``_wr_setup`` binds it to the codec and the run's function names.

import builtins as _builtins
import json as _json
import os as _os
import sys as _sys

__all__ = []
_CALL_MAGIC = b"WRHC"
_transport = [None]  # set by _wr_setup in the browser tier
_read, _write = _os.read, _os.write  # the program may replace os.read / os.write: not for us
_encode = _json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_codec = None
_max_bytes = [16 << 20]  # the run's host_call_bytes: a call's encoded arguments, at most
_busy = [False]
_classes = {}
_pending = [None, None]  # the user's last expression (display) and the namespace it runs in
_NESTED = "a host function was called while another host call was in progress"


class HostError(Exception):
    """An exception a host function raised: this class's name is the host exception's type."""


def _read_exactly(n):
    data = b""
    while len(data) < n:
        chunk = _read(0, n - len(data))
        if not chunk:
            raise RuntimeError("the host did not answer the call")
        data += chunk
    return data


_SAFE_INT = (1 << 53) - 1


def _plain(value):
    """Whether ``value`` is JSON as it is (the codec's ``is_plain``, which the host's side of a
    call uses too); the usual arguments, a few scalars, are seen at once. The call then skips the
    codec's walk (the host checks what arrives the same way whatever this says)."""
    t = type(value)
    if t is list and len(value) <= 8:  # the usual arguments: a few scalars
        for v in value:
            tv = type(v)
            if not (v is None or tv is bool or (tv is int and -_SAFE_INT <= v <= _SAFE_INT)
                    or (tv is str and len(v) <= 1000)):
                break
        else:
            return True
    elif t is dict and not value:
        return True
    return _codec.is_plain(value)


def _untagged(value):
    """Whether decoded JSON holds no tag (no "$" key anywhere): it is its own value then."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            for k in v:
                if k[:1] == "$":
                    return False
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
    return True


def _read_answer():
    """The host's answer: 4 bytes of length, then the JSON (one read when it is short)."""
    data = _read(0, 1 << 16)
    if len(data) < 4:
        data += _read_exactly(4 - len(data))
    n = int.from_bytes(data[:4], "little")
    body = data[4:]
    if len(body) < n:
        body += _read_exactly(n - len(body))
    return body


def _exception(error):
    """The exception an ``error`` answer stands for: a subclass of HostError named like the
    host's exception, also a subclass of the builtin of that name (or of the nearest builtin
    base the host named) when one exists and it can be made from the message."""
    if type(error) is not dict:
        return HostError("the host function failed")
    name = error.get("type")
    name = name if type(name) is str and name.isidentifier() and len(name) <= 100 else "HostError"
    message = error.get("message")
    message = message if type(message) is str else ""
    builtin = None
    for candidate in [name] + [b for b in (error.get("bases") or ()) if type(b) is str]:
        c = getattr(_builtins, candidate, None)
        if isinstance(c, type) and issubclass(c, Exception) and c is not Exception:
            builtin = c
            break
    args = None
    if error.get("args") is not None:
        try:
            args = _codec.from_tagged(error["args"])
        except Exception:  # noqa: BLE001 - not plain: the message says it
            args = None
    for base in ((builtin,) if builtin is not None else ()) + (None,):
        if name == "HostError" and base is None:
            cls = HostError
        else:
            cls = _classes.get((name, base))
        if cls is None:
            try:
                cls = type(name, (HostError,) if base is None else (HostError, base), {"__module__": "host"})
            except TypeError:  # a builtin that cannot be a second base
                continue
            _classes[(name, base)] = cls
        try:
            if type(args) is list and base is not None:
                return cls(*args)
            return cls(message)
        except Exception:  # noqa: BLE001 - not constructible so: try without the builtin
            continue
    return HostError(message)


def _call(name, args, kwargs):
    if _busy[0]:
        raise RuntimeError(_NESTED)
    try:
        if _plain(list(args)) and _plain(kwargs):
            request = {"op": "host", "name": name, "args": list(args), "kwargs": kwargs}
        else:
            request = {"op": "host", "name": name,
                       "args": _codec.to_tagged(list(args), max_bytes=_max_bytes[0]),
                       "kwargs": _codec.to_tagged(kwargs, max_bytes=_max_bytes[0])}
    except _codec.TooLarge:
        # over the run's limit: the host ends the run naming it (it would refuse the call anyway)
        request = {"op": "host", "name": name, "oversize": True}
    data = _encode(request).encode("utf-8")
    try:
        _sys.stdout.flush()  # what the program printed before the call goes out first
    except Exception:  # noqa: BLE001
        pass
    _busy[0] = True
    try:
        if _transport[0] is not None:  # the browser tier: the page's functions, over its channel
            answer = _json.loads(_transport[0](data))
        else:
            try:
                _write(0, _CALL_MAGIC + data)
            except OSError:
                raise RuntimeError("the host refused the call to %s: this run may not call it (now)" % name) from None
            answer = _json.loads(_read_answer())
    finally:
        _busy[0] = False
    if type(answer) is dict and "value" in answer:
        value = answer["value"]
        t = type(value)
        if t is int or t is str or t is bool or t is float or value is None or _untagged(value):
            return value  # nothing to decode
        return _codec.from_tagged(value)
    raise _exception(answer.get("error") if type(answer) is dict else None) from None


def _function(name, doc):
    def function(*args, **kwargs):
        return _call(name, args, kwargs)

    function.__name__ = function.__qualname__ = name
    function.__module__ = "host"
    function.__doc__ = doc or "The app's function %s (a host function)." % name
    return function


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError("the app gave this run no function named %r; it may call: %s"
                         % (name, ", ".join(__all__) or "none"))


def _wr_setup(codec, names, docs, max_bytes, transport=None):
    """Bind this module to the codec and the run's functions (``names``, ``docs``: name ->
    description; ``max_bytes``: the run's ``host_call_bytes``). ``transport(request) -> answer``
    (JSON bytes both) carries the calls instead of fd 0 (the browser tier's worker)."""
    global _codec
    _codec = codec
    _max_bytes[0] = max_bytes
    _transport[0] = transport
    module = globals()
    for name in __all__:
        module.pop(name, None)
    del __all__[:]
    for name in sorted(names):
        module[name] = _function(name, docs.get(name))
        __all__.append(name)


def _wr_keep_last(tail, namespace):
    _pending[:] = [tail, namespace]


def _wr_last():
    """The value of the user's last expression (shown like a notebook cell's), or None."""
    tail, namespace = _pending
    _pending[:] = [None, None]
    return None if tail is None else eval(tail, namespace)
