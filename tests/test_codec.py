"""The plain-data codec: what crosses, converted not trusted, bounds, cycles, the tagged form."""

from __future__ import annotations

import json
import math
from collections import namedtuple

import pytest

from wasm_runner import codec


def roundtrip(value):
    return codec.loads(codec.dumps(value))


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**53 - 1, 2**53, -(2**200), 0.5, -0.0, 1e300, "", "é\x00\n",
    b"", b"\x00\xff", 1 + 2j, (), (1, (2, "x")), [], [1, [2, [3]]], {"a": 1}, {1: "a", (1, 2): [3]},
    {"$x": 1, "y": 2}, set(), {1, 2}, frozenset({"a"}), {"a": {frozenset({1}): b"x"}},
])
def test_plain_values_cross_unchanged(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_non_finite_floats_are_tagged():
    text = codec.dumps([math.inf, -math.inf, math.nan, complex(math.inf, 1)])
    assert "Infinity" not in text and "NaN" not in text
    a, b, c, d = codec.loads(text)
    assert a == math.inf and b == -math.inf and math.isnan(c) and d.real == math.inf


def test_the_documented_tagged_form():
    assert json.loads(codec.dumps((1, b"hi", {2}, {3: None}, 2**60))) == {"$tuple": [
        1, {"$bytes": "aGk="}, {"$set": [2]}, {"$dict": [[3, None]]}, {"$int": hex(2**60)}]}


def test_subclasses_cross_as_their_builtin_and_are_not_asked():
    class LyingFloat(float):
        def __eq__(self, other):
            return True

        def __float__(self):
            return 99.0

        def __repr__(self):
            raise RuntimeError("never asked")

    class Shouty(str):
        def __str__(self):
            return "LIES"

    class Sneaky(list):
        def __iter__(self):
            return iter([42])

    class BadInt(int):
        def __int__(self):
            return 5

    P = namedtuple("P", "x y")
    back = roundtrip([LyingFloat(1.5), Shouty("ok"), Sneaky([1, 2]), BadInt(3), P(1, 2)])
    assert back == [1.5, "ok", [1, 2], 3, (1, 2)]
    assert [type(v) for v in back] == [float, str, list, int, tuple]


def test_anything_else_is_a_type_error_naming_the_type():
    class Thing:
        pass

    with pytest.raises(TypeError, match="Thing cannot cross"):
        codec.dumps({"a": [Thing()]})
    with pytest.raises(TypeError, match="bytearray"):
        codec.dumps(bytearray(b"x"))
    with pytest.raises(TypeError, match="function"):
        codec.dumps(lambda: 1)


def test_a_class_lying_about_its_class_is_not_believed():
    class Liar:
        @property
        def __class__(self):
            return float

    assert isinstance(Liar(), float)  # what one interpreter believes
    with pytest.raises(TypeError, match="Liar"):
        codec.dumps(Liar())


def test_handles_replace_what_is_not_plain():
    class Thing:
        pass

    made = []

    def handle(obj):
        made.append(obj)
        return {"$handle": [len(made), type(obj).__name__]}

    t = Thing()
    text = codec.dumps([1, t], handle=handle)
    assert made == [t]
    back = codec.loads(text, handle=lambda tag: ("H", tag["$handle"][0]))
    assert back == [1, ("H", 1)]
    with pytest.raises(codec.PlainDataError, match="unknown tag"):
        codec.loads(text)  # no handles where none are expected


def test_cycles_depth_and_size_are_refused():
    a: list = []
    a.append(a)
    with pytest.raises(codec.PlainDataError, match="contains itself"):
        codec.dumps(a)
    d: dict = {}
    d["d"] = [d]
    with pytest.raises(codec.PlainDataError, match="contains itself"):
        codec.dumps(d)
    shared = [1]
    assert roundtrip([shared, shared]) == [[1], [1]]  # shared, not a cycle
    deep: list = []
    for _ in range(150):
        deep = [deep]
    with pytest.raises(codec.PlainDataError, match="deeper than 100"):
        codec.dumps(deep)
    with pytest.raises(codec.PlainDataError, match="bytes"):
        codec.dumps("x" * 2000, max_bytes=1000)
    with pytest.raises(codec.PlainDataError, match="values"):
        codec.dumps(list(range(100)), max_items=50)


@pytest.mark.parametrize("text, why", [
    ("[" * 100_000 + "]" * 100_000, "not valid JSON|deeper"),
    ("NaN", "not JSON"),
    ('{"$tuple": 1}', "must hold an array"),
    ('{"$set": [[1]]}', "hashable"),
    ('{"$dict": [[[1], 2]]}', "hashable"),
    ('{"$bytes": "***"}', "base64"),
    ('{"$int": "zz"}', "hexadecimal"),
    ('{"$float": "big"}', "float"),
    ('{"$tuple": [], "x": 1}', "exactly one key"),
    ('{"$eval": "1"}', "unknown tag"),
    ('"x' + "y" * 50 + '"', "bytes"),
])
def test_malformed_input_is_refused(text, why):
    with pytest.raises(codec.PlainDataError, match=why):
        codec.loads(text, max_bytes=40 if why == "bytes" else codec.MAX_BYTES)


def test_decoding_builds_only_builtin_types():
    data = codec.dumps({"a": [1, (2.5, b"x", {3}, frozenset(), 1j)], 5: None})
    seen = []

    def walk(v):
        seen.append(type(v))
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, (list, tuple, set, frozenset)):
            for x in v:
                walk(x)

    walk(codec.loads(data))
    assert set(seen) <= set(codec.PLAIN_TYPES)
