"""Plain data across a boundary: the one codec for everything that links two worlds.

Exercise checks (a teacher's test in one instance calling the student's functions in another,
``wasm_runner/exercises/crossing.py``) and host functions (a guest calling the app's functions)
pass values through here, and only here. Standard library only, no imports from this package:
the host imports it and the guests run the same file (shipped like ``guest/check_agent.py``).

**What crosses**: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
``tuple``, ``list``, ``dict``, ``set``, ``frozenset``, nested; anything else is refused with a
``TypeError`` naming its type, or, when the caller passes ``handle=``, replaced by what that
function returns (the checker's handles). Values are **converted, not trusted**: a subclass of a
builtin type crosses as the builtin (a ``float`` subclass arrives as a plain ``float``, a
namedtuple as a ``tuple``; its own methods are never asked, the builtin's storage is read), and a
numpy scalar as the Python number it holds. Decoding builds only builtin types.

**Bounds**: at most ``max_depth`` levels of nesting (default 100), ``max_items`` values in all
(default 1 000 000) and ``max_bytes`` of encoded text (default 16 MiB); a value that contains
itself is refused. Every refusal is a ``PlainDataError`` (a ``ValueError``; ``TooLarge`` for
the size bound) or a ``TypeError`` with a message that says which rule.

**The tagged JSON form** (what ``dumps`` writes and ``loads`` reads; the HTTP face of host
functions uses the same form):

=====================  =====================================================================
value                  JSON
=====================  =====================================================================
None, bool, str        ``null``, ``true``/``false``, a string
int                    a number; beyond ±(2**53 - 1): ``{"$int": "-0x1f..."}`` (hexadecimal)
float                  a number; nan/inf/-inf: ``{"$float": "nan"}`` / ``"inf"`` / ``"-inf"``
complex                ``{"$complex": [real, imag]}`` (each a float as above)
bytes                  ``{"$bytes": "<base64>"}``
list                   an array
tuple                  ``{"$tuple": [...]}``
set, frozenset         ``{"$set": [...]}``, ``{"$frozenset": [...]}``
dict, str keys         an object, when no key starts with ``$``
other dict             ``{"$dict": [[key, value], ...]}``
handle                 ``{"$handle": n}`` or ``{"$handle": [n, "TypeName"]}`` (an object of the
                       sender's) / ``{"$remote": n}`` (one of the receiver's; only with ``handle=``)
=====================  =====================================================================

An object with one key starting with ``$`` is a tag; any other use of ``$`` keys is refused.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["PlainDataError", "TooLarge", "to_tagged", "from_tagged", "dumps", "loads", "parse_json",
           "json_values", "describe_type", "is_plain", "MAX_DEPTH", "MAX_ITEMS", "MAX_BYTES", "PLAIN_TYPES"]

MAX_DEPTH = 100
MAX_ITEMS = 1_000_000
MAX_BYTES = 16 << 20
SAFE_INT = (1 << 53) - 1
PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)
HANDLE_TAGS = ("$handle", "$remote")

Handler = Callable[[Any], Any]  # encode: a non-plain object -> a tag ({"$handle": n}); decode: tag -> object


class PlainDataError(ValueError):
    """A value that cannot cross: too deep, too big, a cycle, or malformed encoded data."""


class TooLarge(PlainDataError):
    """A value whose encoded text would pass ``max_bytes`` (a size limit, not a malformed value)."""


def describe_type(value: Any) -> str:
    t = type(value)
    module = getattr(t, "__module__", "")
    module = module if type(module) is str else ""
    name = str(getattr(t, "__qualname__", None) or getattr(t, "__name__", "?"))
    return name if module in ("builtins", "") else f"{module}.{name}"


def _refuse(value: Any) -> TypeError:
    return TypeError(f"a value of type {describe_type(value)} cannot cross: only None, bool, int, "
                     "float, complex, str, bytes, tuple, list, dict, set and frozenset do")


def _float(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"$float": "nan" if x != x else ("inf" if x > 0 else "-inf")}


def _numpy_scalar(value: Any) -> Any:
    """A numpy scalar's Python value (numpy's ``item``), or a sentinel when it is none."""
    t = type(value)
    module = getattr(t, "__module__", "")
    if type(module) is not str or module.split(".")[0] != "numpy" or getattr(value, "shape", None) != ():
        return _NOT_PLAIN
    try:
        item = value.item()
    except Exception:  # noqa: BLE001 - numpy's own failure: not plain then
        return _NOT_PLAIN
    return item if type(item) in (bool, int, float, complex, str, bytes) else _NOT_PLAIN


_NOT_PLAIN = object()


class _Encoder:
    def __init__(self, handle: Handler | None, max_depth: int, max_items: int, max_bytes: int):
        self.handle, self.max_depth, self.max_items, self.max_bytes = handle, max_depth, max_items, max_bytes
        self.items = 0
        self.size = 0
        self.path: set[int] = set()  # ids of the containers being encoded (a cycle comes back to one)

    def count(self, size: int) -> None:
        self.items += 1
        self.size += size
        if self.items > self.max_items:
            raise PlainDataError(f"more than {self.max_items} values")
        if self.size > self.max_bytes:
            raise TooLarge(f"more than {self.max_bytes} bytes")

    def enter(self, value: Any, depth: int) -> None:
        if depth >= self.max_depth:
            raise PlainDataError(f"nested deeper than {self.max_depth} levels")
        if id(value) in self.path:
            raise PlainDataError(f"a value that contains itself (a {describe_type(value)} in a cycle)")
        self.path.add(id(value))

    def encode(self, value: Any, depth: int) -> Any:
        t = type(value)
        if value is None or t is bool:
            self.count(5)
            return value
        if issubclass(t, int) and t is not bool:
            v = int.__int__(value)  # the int a subclass holds, its methods unasked
            self.count(24)
            return v if -SAFE_INT <= v <= SAFE_INT else {"$int": hex(v)}
        if issubclass(t, float):
            self.count(24)
            return _float(float.__float__(value))
        if issubclass(t, str):
            s = str.__str__(value)
            self.count(len(s) + 2)
            return s
        if issubclass(t, bytes):
            b = bytes(memoryview(value))
            self.count(len(b) * 4 // 3 + 14)
            return {"$bytes": base64.b64encode(b).decode("ascii")}
        if issubclass(t, complex):
            self.count(48)
            return {"$complex": [_float(complex.real.__get__(value)), _float(complex.imag.__get__(value))]}
        if issubclass(t, (list, tuple, set, frozenset, dict)):
            self.enter(value, depth)
            self.count(2)
            try:
                if issubclass(t, dict):
                    return self.encode_dict(value, depth + 1)
                if issubclass(t, list):
                    return [self.encode(v, depth + 1) for v in list.__iter__(value)]
                if issubclass(t, tuple):
                    return {"$tuple": [self.encode(v, depth + 1) for v in tuple.__iter__(value)]}
                tag = "$frozenset" if issubclass(t, frozenset) else "$set"
                it = frozenset.__iter__(value) if issubclass(t, frozenset) else set.__iter__(value)
                return {tag: [self.encode(v, depth + 1) for v in it]}
            finally:
                self.path.discard(id(value))
        item = _numpy_scalar(value)
        if item is not _NOT_PLAIN:
            return self.encode(item, depth)
        if self.handle is None:
            raise _refuse(value)
        self.count(16)
        return self.handle(value)

    def encode_dict(self, value: dict[Any, Any], depth: int) -> Any:
        pairs = list(dict.items(value))
        if all(type(k) is str and not k.startswith("$") for k, _ in pairs):
            out = {}
            for k, v in pairs:
                self.count(len(k) + 3)
                out[k] = self.encode(v, depth)
            return out
        return {"$dict": [[self.key(k, depth), self.encode(v, depth)] for k, v in pairs]}

    def key(self, k: Any, depth: int) -> Any:
        if issubclass(type(k), (list, dict, set)):
            raise _refuse(k)
        return self.encode(k, depth)


def is_plain(value: Any) -> bool:
    """Whether ``value`` is its own tagged form, cheaply seen: lists, dicts with text keys not
    starting with "$", scalars that need no tag, at most ``MAX_DEPTH`` deep. Exact types only (a
    subclass is not plain); many values (100 000) or much text (a string over 1000 characters,
    256 Ki in all) is not plain either: ``to_tagged`` then walks it and counts it against its
    bounds. Host functions use it on both sides of a call to skip that walk (``host_functions``'
    ``calls.py`` and the guest's ``host_module.py``, which this file is shipped with)."""
    stack, count, chars = [(value, 0)], 0, 0
    while stack:
        v, depth = stack.pop()
        count += 1
        if count > 100_000:
            return False
        t = type(v)
        if t is str:
            chars += len(v)
            if len(v) > 1000 or chars > 1 << 18:
                return False
        elif t is int:
            if not -SAFE_INT <= v <= SAFE_INT:
                return False
        elif t is float:
            if not math.isfinite(v):
                return False
        elif t is list or t is dict:
            if depth >= MAX_DEPTH or count + len(stack) + len(v) > 100_000:
                return False
            if t is dict:
                if any(type(k) is not str or k[:1] == "$" for k in v):
                    return False
                stack.extend((item, depth + 1) for item in v.values())
            else:
                stack.extend((item, depth + 1) for item in v)
        elif t is not bool and v is not None:
            return False
    return True


def to_tagged(value: Any, *, handle: Handler | None = None, max_depth: int = MAX_DEPTH,
              max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES) -> Any:
    """``value`` as the tagged JSON form (Python lists, dicts, strings and numbers)."""
    return _Encoder(handle, max_depth, max_items, max_bytes).encode(value, 0)


def dumps(value: Any, *, handle: Handler | None = None, max_depth: int = MAX_DEPTH,
          max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES) -> str:
    """``value`` as tagged JSON text, within the bounds."""
    text = json.dumps(to_tagged(value, handle=handle, max_depth=max_depth, max_items=max_items,
                                max_bytes=max_bytes), allow_nan=False, separators=(",", ":"),
                      ensure_ascii=False)
    if len(text) > max_bytes:
        raise TooLarge(f"more than {max_bytes} bytes")
    return text


# -- decoding ----------------------------------------------------------------------------------
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _hashable(value: Any, what: str) -> Any:
    try:
        hash(value)
    except TypeError:
        raise PlainDataError(f"{what} must be hashable, not {describe_type(value)}") from None
    return value


class _Decoder:
    def __init__(self, handle: Handler | None, max_depth: int, max_items: int):
        self.handle, self.max_depth, self.max_items = handle, max_depth, max_items
        self.items = 0

    def number(self, v: Any) -> float:
        if type(v) is float or type(v) is int:
            return float(v)
        if type(v) is dict and len(v) == 1 and type(v.get("$float")) is str and v["$float"] in _FLOATS:
            return _FLOATS[v["$float"]]
        raise PlainDataError("a float must be a number or a $float tag")

    def decode(self, data: Any, depth: int) -> Any:
        self.items += 1
        if self.items > self.max_items:
            raise PlainDataError(f"more than {self.max_items} values")
        if depth > self.max_depth:
            raise PlainDataError(f"nested deeper than {self.max_depth} levels")
        t = type(data)
        if data is None or t is bool or t is str or t is int:
            return data
        if t is float:
            if not math.isfinite(data):
                raise PlainDataError("a non-finite float must be a $float tag")
            return data
        if t is list:
            return [self.decode(v, depth + 1) for v in data]
        if t is not dict:
            raise PlainDataError(f"unexpected {describe_type(data)} in encoded data")
        tags = [k for k in data if type(k) is str and k.startswith("$")]
        if not tags:
            return {k: self.decode(v, depth + 1) for k, v in data.items()}
        if len(data) != 1:
            raise PlainDataError("a tag object must have exactly one key")
        tag, body = tags[0], data[tags[0]]
        if tag in ("$tuple", "$set", "$frozenset", "$dict", "$complex") and type(body) is not list:
            raise PlainDataError(f"{tag} must hold an array")
        if tag == "$tuple":
            return tuple(self.decode(v, depth + 1) for v in body)
        if tag in ("$set", "$frozenset"):
            items = [_hashable(self.decode(v, depth + 1), "a set element") for v in body]
            return set(items) if tag == "$set" else frozenset(items)
        if tag == "$dict":
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise PlainDataError("$dict must hold [key, value] pairs")
                out[_hashable(self.decode(pair[0], depth + 1), "a dict key")] = self.decode(pair[1], depth + 1)
            return out
        if tag == "$bytes":
            if type(body) is not str:
                raise PlainDataError("$bytes must hold base64 text")
            try:
                return base64.b64decode(body.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                raise PlainDataError("$bytes must hold base64 text") from None
        if tag == "$float":
            return self.number(data)
        if tag == "$int":
            if type(body) is not str or len(body) > 4 * MAX_BYTES:
                raise PlainDataError("$int must hold hexadecimal text")
            try:
                return int(body, 16)
            except ValueError:
                raise PlainDataError("$int must hold hexadecimal text") from None
        if tag == "$complex":
            if len(body) != 2:
                raise PlainDataError("$complex must hold [real, imag]")
            return complex(self.number(body[0]), self.number(body[1]))
        if tag in HANDLE_TAGS and self.handle is not None:
            if not (type(body) is int or (tag == "$handle" and type(body) is list and len(body) == 2
                                          and type(body[0]) is int and type(body[1]) is str
                                          and len(body[1]) <= 200)):
                raise PlainDataError(f"{tag} must hold an integer (a handle: or [integer, type name])")
            return self.handle(data)
        raise PlainDataError(f"unknown tag {tag[:40]!r}")


def from_tagged(data: Any, *, handle: Handler | None = None, max_depth: int = MAX_DEPTH,
                max_items: int = MAX_ITEMS) -> Any:
    """The value the tagged JSON form ``data`` stands for, built of builtin types only (and of
    what ``handle`` makes of ``{"$handle": n}`` / ``{"$remote": n}`` tags; refused without it)."""
    return _Decoder(handle, max_depth, max_items).decode(data, 0)


def _no_constant(name: str) -> Any:
    raise PlainDataError(f"{name} is not JSON (a non-finite float is a $float tag)")


_SMALL_JSON = 64 << 10  # below this many bytes a parse cannot build much: no count first


def json_values(data: bytes, limit: int = MAX_ITEMS) -> int:
    """At most how many values ``json.loads(data)`` builds before it ends or fails: one, plus one
    for every ``[``, ``{``, ``,`` and ``:`` outside strings (what separates or opens values).

    Counted with a few passes of ``bytes`` methods (C loops), copying ``data`` at most twice: an
    escaped backslash or quote is dropped, then the text between quotes is left out. For text
    that is not JSON the count may be off only after the first place the parser fails. Past
    ``limit`` strings the count stops there (the text has more than ``limit`` values already)."""
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = plain.count(b'"')
    if quotes // 2 > limit:  # more strings than the bound: no need to split them out
        return quotes // 2
    outside = b"".join(plain.split(b'"')[0::2])
    return 1 + sum(outside.count(c) for c in (b"[", b"{", b",", b":")) + quotes // 2


def parse_json(data: str | bytes, *, max_bytes: int = MAX_BYTES, max_items: int = MAX_ITEMS) -> Any:
    """``json.loads`` of text another world wrote, bounded before the parse starts: at most
    ``max_bytes`` of text (``TooLarge``) and ``max_items`` values (``PlainDataError``), so that
    what the parse builds stays within a small multiple of the text (a string's characters, up to
    4 bytes each) plus ``max_items`` objects. Non-finite constants (``NaN``) are refused."""
    if len(data) > max_bytes:
        raise TooLarge(f"more than {max_bytes} bytes")
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > _SMALL_JSON and json_values(raw, max_items) > max_items:
        raise PlainDataError(f"more than {max_items} values")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except PlainDataError:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise PlainDataError(f"not valid JSON ({type(e).__name__})") from None


def loads(text: str | bytes, *, handle: Handler | None = None, max_depth: int = MAX_DEPTH,
          max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES) -> Any:
    """The value tagged JSON ``text`` stands for, within the bounds (``PlainDataError`` else)."""
    data = parse_json(text, max_bytes=max_bytes, max_items=max_items)
    try:
        return from_tagged(data, handle=handle, max_depth=max_depth, max_items=max_items)
    except RecursionError:
        raise PlainDataError(f"nested deeper than {max_depth} levels") from None
