"""Declared host functions (the HTTP service's and MCP's, issue 24 item 3) against a real HTTP
endpoint of the app started by the test on 127.0.0.1: signed requests naming the key and the
user, replay refused, no redirects followed, loopback refused unless allowed (by address and
by a name resolving to it), arguments checked against the declared schema; entry points."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.host_functions.declared import Caller, Catalog, describe_functions, functions_from
from wasm_runner.host_functions.endpoint import Nonces, sign, verify

from ..support.app_endpoint import SECRET, app_endpoint

WALL = Limits(wall_seconds=60.0)
CALLER = Caller(key="chat-app", user="student-7", request_id="req-1")
PARAMS = {"type": "object", "properties": {"order_id": {"type": "integer"},
                                           "fields": {"type": "array", "items": {"type": "string"}}},
          "required": ["order_id"], "additionalProperties": False}


def lookup(call: dict[str, Any], order_id: int, fields: list[str] | None = None) -> dict[str, Any]:
    if order_id != 42:
        raise LookupError(f"no order {order_id} for {call['user']}")
    order = {"id": 42, "total": 19.5, "blob": b"\x00\x01"}
    return {k: v for k, v in order.items() if fields is None or k in fields}


def catalog(url: str, **extra: Any) -> Catalog:
    table = {"description": "An order by id.", "parameters": PARAMS, "url": url, "secret": SECRET,
             "keys": ["chat-app"], **extra}
    return Catalog(functions_from({"lookup_order": table}))


def run_lookup(sb: Sandbox, cat: Catalog, code: str) -> Any:
    r = sb.run("from host import lookup_order\n" + code, functions=cat.for_caller(["lookup_order"], CALLER),
               limits=WALL)
    assert r.status is Status.OK, r.stderr
    return r.stdout


def test_a_call_is_a_signed_request_naming_the_key_and_the_user(default_sandbox: Sandbox) -> None:
    with app_endpoint({"lookup_order": lookup}) as app:
        cat = catalog(app.url("/tools/lookup_order"), allow=["127.0.0.1"])
        out = run_lookup(default_sandbox, cat, "print(lookup_order(42, fields=['total', 'blob']))\n"
                                               "print(lookup_order(order_id=42)['id'])\n"
                                               "try:\n    lookup_order(7)\nexcept LookupError as e:\n"
                                               "    print(type(e).__name__, e)\n")
    assert out.splitlines() == ["{'total': 19.5, 'blob': b'\\x00\\x01'}", "42", "LookupError no order 7 for student-7"]
    assert app.refused == 0 and len(app.requests) == 3
    bodies = [json.loads(r["body"]) for r in app.requests]
    assert bodies[0] == {"function": "lookup_order", "arguments": {"order_id": 42, "fields": ["total", "blob"]},
                         "key": "chat-app", "user": "student-7", "request_id": "req-1"}
    nonces = [r["headers"]["x-wasm-runner-nonce"] for r in app.requests]
    assert len(set(nonces)) == 3
    assert all(r["headers"]["x-wasm-runner-signature"].startswith("sha256=") for r in app.requests)


def test_a_replayed_or_forged_request_is_refused_by_verify() -> None:
    body, nonces = b'{"function": "f"}', Nonces()
    headers = {"x-wasm-runner-timestamp": "1000", "x-wasm-runner-nonce": "n" * 32,
               "x-wasm-runner-signature": sign(SECRET.encode(), "1000", "n" * 32, body)}
    assert verify(SECRET.encode(), headers, body, nonces, now=1010)
    assert not verify(SECRET.encode(), headers, body, nonces, now=1011)  # the same nonce again
    assert not verify(SECRET.encode(), {**headers, "x-wasm-runner-nonce": "m" * 32}, body, nonces, now=1012)
    assert not verify(SECRET.encode(), headers, body + b" ", Nonces(), now=1010)  # another body
    assert not verify(SECRET.encode(), headers, body, Nonces(), now=2000)  # too old


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_refused_unless_the_operator_allowed_it(default_sandbox: Sandbox, host: str) -> None:
    with app_endpoint({"lookup_order": lookup}) as app:
        cat = catalog(app.url("/tools/lookup_order", host=host))
        out = run_lookup(default_sandbox, cat, "try:\n    lookup_order(42)\nexcept Exception as e:\n"
                                               "    print(type(e).__name__, e)\n")
    assert out.startswith(("EndpointError the app's endpoint resolves to 127.0.0.1, a loopback, private or reserved",
                           "EndpointError the app's endpoint resolves to ::1, a loopback, private or reserved"))
    assert app.requests == []


def test_redirects_are_not_followed(default_sandbox: Sandbox) -> None:
    with app_endpoint({"lookup_order": lookup}) as app:
        cat = catalog(app.url("/redirect"), allow=["127.0.0.0/8"])
        out = run_lookup(default_sandbox, cat, "try:\n    lookup_order(42)\nexcept Exception as e:\n"
                                               "    print(type(e).__name__, e)\n")
    assert out == "EndpointError the app's endpoint answered with a redirect (302); redirects are not followed\n"
    assert [r["path"] for r in app.requests] == ["/redirect"]


def test_arguments_are_checked_against_the_schema(default_sandbox: Sandbox) -> None:
    with app_endpoint({"lookup_order": lookup}) as app:
        cat = catalog(app.url("/tools/lookup_order"), allow=["127.0.0.1"])
        out = run_lookup(default_sandbox, cat, "for call in (lambda: lookup_order('42'), lambda: lookup_order(42, ['a'], 3),\n"
                                               "             lambda: lookup_order(42, colour='red')):\n"
                                               "    try:\n        call()\n    except (TypeError, ValueError) as e:\n"
                                               "        print(type(e).__name__, e)\n")
    assert out.splitlines() == [
        "ValueError lookup_order(): order_id: '42' is not of type 'integer'",
        "TypeError lookup_order() takes at most 2 positional arguments (3 given)",
        "ValueError lookup_order(): the arguments: Additional properties are not allowed ('colour' was unexpected)"]
    assert app.requests == []


def test_entry_points_are_called_in_process(default_sandbox: Sandbox) -> None:
    cat = Catalog(functions_from({
        "lookup_order": {"description": "An order.", "parameters": PARAMS, "keys": ["*"],
                         "entry_point": "tests.host_functions.app_functions:lookup_order"},
        "order_total": {"description": "Its total.", "keys": ["chat-app"], "profiles": ["analyst"],
                        "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"}}},
                        "entry_point": "tests.host_functions.app_functions:order_total"}}))
    assert [f.name for f in cat.allowed("chat-app", "analyst")] == ["lookup_order", "order_total"]
    assert [f.name for f in cat.allowed("other", "analyst")] == ["lookup_order"]
    assert cat.refused(["order_total", "nope"], "chat-app", "student") == ["order_total", "nope"]
    r = default_sandbox.run("from host import lookup_order, order_total\nprint(lookup_order(42, ['items']), order_total(42))",
                            functions=cat.for_caller(["lookup_order", "order_total"], CALLER), limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "{'items': ['pen', 'ink']} 19.5\n"
    text = describe_functions(cat.allowed("chat-app", "analyst"))
    assert "from host import NAME" in text and "- lookup_order(order_id, fields): An order." in text
    assert '"required":["order_id"]' in text


@pytest.mark.parametrize(("table", "words"), [
    ({"parameters": PARAMS, "url": "http://x"}, "needs a description"),
    ({"description": "d", "url": "http://x", "entry_point": "a:b", "secret": SECRET}, "exactly one of url"),
    ({"description": "d", "url": "http://x", "secret": "short"}, "at least 32 characters"),
    ({"description": "d", "url": "ftp://x", "secret": SECRET}, "http:// or https:// URL"),
    ({"description": "d", "url": "http://u:p@x", "secret": SECRET}, "without credentials"),
    ({"description": "d", "entry_point": "a:b", "parameters": {"type": "string"}}, "of type object"),
    ({"description": "d", "entry_point": "a:b", "allow": "10.0.0.1"}, "allow must be a list"),
    ({"description": "d", "entry_point": "a:b", "nope": 1}, "unknown [functions.f] setting"),
])
def test_bad_declarations_are_refused_with_a_plain_message(table: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("[", r"\[")):
        functions_from({"f": table})
