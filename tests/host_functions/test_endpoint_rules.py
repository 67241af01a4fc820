"""The rules an endpoint's address passes (issue 39 item 8): IPv6 forms that carry an IPv4 address
(NAT64, 6to4, IPv4-compatible) are judged by that address or refused, site-local is refused; the
name's lookup does not block the loop the call runs on; ``http://`` (the signed body in the clear)
only to an address the operator listed. Names are resolved by the endpoint's resolver hook (so a
name can stand for a refused address without leaving this machine); connections go only to the
test's own endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from wasm_runner.host_functions.endpoint import Endpoint, EndpointError, check_address, parse_allow

from ..support.app_endpoint import SECRET, app_endpoint


@pytest.mark.parametrize(("address", "words"), [
    ("64:ff9b::7f00:1", "a NAT64 address (64:ff9b::/96) for 127.0.0.1, a loopback, private or reserved address"),
    ("64:ff9b::a00:1", "a NAT64 address (64:ff9b::/96) for 10.0.0.1"),
    ("64:ff9b:1::a00:1", "a local-use NAT64 address (64:ff9b:1::/48)"),
    ("2002:7f00:1::1", "a 6to4 address (2002::/16) for 127.0.0.1, a loopback, private or reserved address"),
    ("2002:a9fe:a9fe::1", "a 6to4 address (2002::/16) for 169.254.169.254"),
    ("::7f00:1", "an IPv4-compatible address (::/96, deprecated)"),
    ("::808:808", "an IPv4-compatible address (::/96, deprecated)"),
    ("fec0::1", "a site-local address (fec0::/10, deprecated)"),
    ("fec0:0:0:1::5", "a site-local address (fec0::/10, deprecated)"),
])
def test_ipv6_forms_of_refused_addresses_are_refused_naming_the_rule(address: str, words: str) -> None:
    with pytest.raises(EndpointError) as e:
        check_address(address, ())
    assert str(e.value).startswith(f"the app's endpoint resolves to {address}, {words}"), str(e.value)
    assert str(e.value).endswith("the operator did not allow")


@pytest.mark.parametrize(("address", "allow"), [
    ("64:ff9b::808:808", ()), ("2002:808:808::1", ()), ("2606:4700::1111", ()), ("8.8.8.8", ()),
    ("::ffff:8.8.8.8", ()), ("fec0::1", ("fec0::/10",)), ("64:ff9b::a00:1", ("64:ff9b::/96",)),
    ("::ffff:127.0.0.1", ("127.0.0.1",)),
])
def test_public_and_listed_addresses_still_pass(address: str, allow: tuple[str, ...]) -> None:
    check_address(address, parse_allow(allow))


def resolving_to(address: str, delay: float = 0.0) -> Any:
    def resolve(host: str, port: int) -> list[str]:
        time.sleep(delay)  # a slow DNS server: the lookup blocks the thread it runs on
        return [address]
    return resolve


def call(endpoint: Endpoint) -> Any:
    return endpoint.call("lookup_order", {"order_id": 42}, key="chat-app", user=None, request_id="r")


def lookup(call: dict[str, Any], order_id: int) -> dict[str, Any]:
    return {"id": order_id}


# The refusals below are shown on ``Endpoint.target`` and ``Endpoint.resolve`` (what ``call`` does
# first, before it connects) so that no test can connect anywhere but 127.0.0.1 even if a rule
# were missing.
def test_a_name_resolving_to_a_nat64_loopback_is_refused() -> None:
    endpoint = Endpoint("https://shop.test/tools", SECRET.encode(), resolver=resolving_to("64:ff9b::7f00:1"))
    with pytest.raises(EndpointError, match=r"resolves to 64:ff9b::7f00:1, a NAT64 address \(64:ff9b::/96\) for "
                                            r"127\.0\.0\.1"):
        endpoint.target()
    with pytest.raises(EndpointError, match=r"a NAT64 address"):
        asyncio.run(endpoint.resolve())


def test_http_needs_an_address_the_operator_listed() -> None:
    # a public address over http://: refused, naming the rule
    endpoint = Endpoint("http://shop.test/tools", SECRET.encode(), resolver=resolving_to("93.184.216.34"))
    for resolve in (endpoint.target, lambda: asyncio.run(endpoint.resolve())):
        with pytest.raises(EndpointError) as e:
            resolve()
        assert str(e.value) == ("the app's endpoint is http:// and its address 93.184.216.34 is not in allow: "
                                "the signed body would cross in the clear (use https://, or list the address)")
    # a listed address keeps working over http:// (the operator's own network, e.g. loopback)
    with app_endpoint({"lookup_order": lookup}) as app:
        endpoint = Endpoint(app.url("/tools/lookup_order"), SECRET.encode(), parse_allow(["127.0.0.1"]))
        assert asyncio.run(call(endpoint)) == {"id": 42}
        endpoint = Endpoint(app.url("/tools/lookup_order", host="app.test"), SECRET.encode(),
                            parse_allow(["127.0.0.0/8"]), resolver=resolving_to("127.0.0.1"))
        assert asyncio.run(call(endpoint)) == {"id": 42}
    assert len(app.requests) == 2 and app.refused == 0


def test_a_slow_lookup_does_not_stall_the_loop_the_call_runs_on() -> None:
    async def main(endpoint: Endpoint) -> tuple[Any, float]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:  # another run's work on the same loop
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        try:
            value = await call(endpoint)
        finally:
            done.set()
            await ticker
        return value, max(gaps)

    with app_endpoint({"lookup_order": lookup}) as app:
        endpoint = Endpoint(app.url("/tools/lookup_order", host="app.test"), SECRET.encode(),
                            parse_allow(["127.0.0.1"]), resolver=resolving_to("127.0.0.1", delay=1.0))
        value, gap = asyncio.run(main(endpoint))
    assert value == {"id": 42}
    assert gap < 0.5, f"the loop stalled {gap:.2f} s during the lookup"


def test_a_lookup_slower_than_the_timeout_is_an_error_in_time() -> None:
    async def main(endpoint: Endpoint) -> float:
        started = time.monotonic()
        with pytest.raises(EndpointError, match=r"^the app's endpoint shop\.test could not be resolved within "
                                                r"0\.3 s$"):
            await call(endpoint)
        return time.monotonic() - started

    endpoint = Endpoint("https://shop.test/tools", SECRET.encode(), parse_allow(["127.0.0.1"]),
                        timeout_seconds=0.3, resolver=resolving_to("127.0.0.1", delay=2.0))
    assert asyncio.run(main(endpoint)) < 1.0
