"""Declared functions' schemas check the value, not only its tagged form (issue 39 item 4): a
``$``-prefixed key, a tuple, a set, bytes, a big int or a non-finite float no longer hides from a
schema without ``type``; only the parameters the schema declares reach the function. The functions
are called as a run calls them (``Catalog.for_caller``), the entry point a real importable one;
the last test writes a forged call with tagged keywords from a real guest."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.host_functions.declared import Caller, Catalog, functions_from

from . import app_functions

CALLER = Caller(key="chat-app", user=None, request_id="req-1")


def take_any(parameters: dict[str, Any] | None = None) -> Any:
    """``take_any`` declared with ``parameters`` (the default schema when None), as a run gets it."""
    table: dict[str, Any] = {"description": "Takes anything.", "keys": ["*"],
                             "entry_point": "tests.host_functions.app_functions:take_any"}
    if parameters is not None:
        table["parameters"] = parameters
    app_functions.RECEIVED.clear()
    return Catalog(functions_from({"take_any": table})).for_caller(["take_any"], CALLER).functions["take_any"]


def refused(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises((TypeError, ValueError)) as e:
        fn(*args, **kwargs)
    assert app_functions.RECEIVED == []  # the function never ran
    return f"{type(e.value).__name__} {e.value}"


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(("schema", "value", "words"), [
    # a "$" key turned the dict into {"$dict": [...]}: "limit" was not seen
    ({"properties": {"limit": {"maximum": 100}}}, {"limit": 10**6, "$x": 0}, "q/limit: 1000000 is greater than"),
    ({"maxProperties": 1}, {"a": 1, "$b": 2}, "q: {'a': 1, '$b': 2} has too many properties"),
    # non-text keys too (a dict of mixed keys is a "$dict" tag)
    ({"properties": {"limit": {"maximum": 100}}}, {"limit": 10**6, 1: 0}, "q/limit: 1000000 is greater than"),
    # a tuple ({"$tuple": [...]}), a set, a frozenset: an array for the schema's array keywords
    ({"maxItems": 2}, (1, 2, 3), "q: [1, 2, 3] is too long"),
    ({"items": {"maximum": 5}}, (1, 50), "q/1: 50 is greater than the maximum of 5"),
    ({"maxItems": 1}, {1, 2}, "is too long"),
    ({"items": {"maxLength": 3}}, frozenset({"toolong"}), "'toolong' is too long"),
    # bytes ({"$bytes": base64}): its length and its bytes for the string keywords
    ({"maxLength": 4}, b"x" * 100, "q: the bytes are longer than 4"),
    ({"pattern": "^[a-z]*$"}, b"AB", "q: the bytes do not match '^[a-z]*$'"),
    # an int beyond 2**53 ({"$int": hex}) and non-finite floats ({"$float": ...}): numbers
    ({"maximum": 100}, 2**60, f"q: {2**60} is greater than the maximum of 100"),
    ({"minimum": 0}, -(2**60), f"q: {-(2**60)} is less than the minimum of 0"),
    ({"maximum": 100}, math.inf, "q: inf is greater than the maximum of 100"),
    ({"minimum": 0}, math.nan, "q: nan is not a number that minimum can compare"),
    ({"multipleOf": 2}, math.inf, "q: inf is not a number that multipleOf can compare"),
    ({"maximum": 100}, 1 + 2j, "q: (1+2j) is not a number that maximum can compare"),
    # keys that would be one key as text cannot be judged: refused whatever the schema
    ({}, {1: "a", "1": "b"}, "a dict whose keys collide as text ('1') cannot be checked"),
    # nested: a tuple inside a "$"-keyed dict
    ({"properties": {"ids": {"maxItems": 1}}}, {"$k": 0, "ids": (1, 2)}, "q/ids: [1, 2] is too long"),
])
def test_a_schema_without_type_checks_the_value_not_its_tag(schema: dict[str, Any], value: Any, words: str) -> None:
    fn = take_any(obj(q=schema))
    message = refused(fn, q=value)
    assert message.startswith("ValueError take_any(): "), message
    assert words in message, message


def test_values_that_keep_to_the_schema_still_pass_and_tag_schemas_still_work() -> None:
    fn = take_any(obj(ids={"maxItems": 2, "items": {"maximum": 5}}, blob={"maxLength": 4},
                      n={"maximum": 2**61}, tags={"maxItems": 3}, q={"properties": {"limit": {"maximum": 100}}},
                      raw={"type": "object", "properties": {"$bytes": {"type": "string"}}, "required": ["$bytes"]},
                      big={"type": "object", "required": ["$int"]}))
    assert fn(ids=(1, 2), blob=b"ab", n=2**60, tags={"a"}, q={"limit": 5, "$x": 0}, raw=b"\x00",
              big=2**70) == ["big", "blob", "ids", "n", "q", "raw", "tags"]
    assert app_functions.RECEIVED == [{"ids": (1, 2), "blob": b"ab", "n": 2**60, "tags": {"a"},
                                       "q": {"limit": 5, "$x": 0}, "raw": b"\x00", "big": 2**70}]
    # a schema naming the tag's type still refuses the value as before (the endpoint gets the tag)
    assert refused(take_any(obj(ids={"type": "array"})), ids=(1,)).startswith(
        "ValueError take_any(): ids: {'$tuple': [1]} is not of type 'array'")


def test_keywords_the_schema_does_not_declare_never_reach_the_function() -> None:
    # the default schema declares no parameter: none may be passed
    assert refused(take_any(), colour="red") == (
        "TypeError take_any() got an unexpected keyword argument 'colour' (not a parameter its schema declares)")
    assert refused(take_any(), **{"$x": 1}) == (
        "TypeError take_any() got an unexpected keyword argument '$x' (not a parameter its schema declares)")
    # a schema without additionalProperties: only its properties
    fn = take_any(obj(order_id={"type": "integer"}))
    assert refused(fn, order_id=1, colour="red").endswith("'colour' (not a parameter its schema declares)")
    assert fn(order_id=1) == ["order_id"] and app_functions.RECEIVED == [{"order_id": 1}]
    # the operator may open it: additionalProperties or patternProperties declare more
    fn = take_any({"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}})
    assert fn(a=1) == ["a"]
    app_functions.RECEIVED.clear()
    assert refused(fn, a="x") == "ValueError take_any(): a: 'x' is not of type 'integer'"
    fn = take_any({"type": "object", "patternProperties": {"^x_": {}}})
    assert fn(x_1=1) == ["x_1"]
    app_functions.RECEIVED.clear()
    assert refused(fn, y=1).endswith("'y' (not a parameter its schema declares)")


RAW = ("import os, json\n"
       "def raw(data):\n"
       "    os.write(0, b'WRHC' + data)\n"
       "    n = int.from_bytes(os.read(0, 4), 'little')\n"
       "    got = b''\n"
       "    while len(got) < n:\n"
       "        got += os.read(0, n - len(got))\n"
       "    return json.loads(got)\n")


def test_tagged_keywords_from_a_guest_are_checked_like_any(default_sandbox: Sandbox) -> None:
    fn = take_any(obj(limit={"maximum": 100}))
    forged = [{"op": "host", "name": "take_any", "args": [], "kwargs": {"$dict": [["limit", 10**6], ["$x", 0]]}},
              {"op": "host", "name": "take_any", "args": [], "kwargs": {"$dict": [["limit", {"$int": hex(2**60)}]]}},
              {"op": "host", "name": "take_any", "args": [], "kwargs": {"$dict": [["limit", 7]]}}]
    code = RAW + "".join(f"print(json.dumps(raw({json.dumps(r).encode()!r})))\n" for r in forged)
    r = default_sandbox.run(code, functions={"take_any": fn}, limits=Limits(wall_seconds=60.0))
    assert r.status is Status.OK, r.stderr
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    assert answers[0]["error"]["type"] == "ValueError"
    assert answers[0]["error"]["message"].startswith("take_any(): limit: 1000000 is greater than the maximum of 100")
    assert answers[1]["error"]["message"].startswith(f"take_any(): limit: {2**60} is greater than the maximum of 100")
    assert answers[2] == {"value": ["limit"]}
    assert app_functions.RECEIVED == [{"limit": 7}]
