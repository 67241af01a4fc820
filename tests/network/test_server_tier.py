"""The guest's network on the server tier, in real wasmtime instances against a loopback HTTP
server standing in for a public API: an operator rule naming 127.0.0.1:port lets a run read JSON
with urllib.request and http.client and a CSV with pandas.read_csv(url); a run without a rule
gets the sentence saying so; the escapes are refused or capped while the run goes on, and the
loopback servers' own logs show what was connected to. (``requests`` is in no image:
``test_requests.py`` mounts it from the test wheelhouse.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.loopback_api import LoopbackAPI, loopback_api
from wasm_runner import Limits, Sandbox, Status
from wasm_runner.network import NetworkRecord, NetworkRule, RunNetwork

WALL = Limits(wall_seconds=60.0)


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def other() -> Iterator[LoopbackAPI]:
    """A second loopback server that no rule names."""
    with loopback_api() as server:
        yield server


def rule(api: LoopbackAPI, **caps: object) -> NetworkRule:
    return NetworkRule.from_table("test-api", {"destinations": [f"http://127.0.0.1:{api.port}"], **caps})


def test_an_allowed_run_reads_json_and_csv(datascience_sandbox: Sandbox, api: LoopbackAPI) -> None:
    heard: list[NetworkRecord] = []
    network = RunNetwork([rule(api)], on_request=heard.append)
    code = (
        "import json, urllib.request, http.client, pandas\n"
        f"data = json.load(urllib.request.urlopen('http://127.0.0.1:{api.port}/data.json'))\n"
        "print('urllib', data['answer'], data['items'])\n"
        f"c = http.client.HTTPConnection('127.0.0.1', {api.port})\n"
        "c.request('GET', '/data.json?via=http.client')\n"
        "r = c.getresponse()\n"
        "print('http.client', r.status, json.loads(r.read())['answer'])\n"
        f"df = pandas.read_csv('http://127.0.0.1:{api.port}/data.csv')\n"
        "print('pandas', list(df.columns), int(df.people.sum()))\n"
    )
    before = len(api.log)
    result = datascience_sandbox.run(code, limits=WALL, network=network)
    assert result.status is Status.OK, result.stderr
    assert result.stdout == ("urllib 42 [1, 2, 3]\nhttp.client 200 42\npandas ['city', 'people'] 842000\n")
    assert api.paths()[before:] == ["/data.json", "/data.json?via=http.client", "/data.csv"]
    assert all(headers["host"] == f"127.0.0.1:{api.port}" for _, _, headers in api.log[before:])
    assert [(r.rule, r.status, r.outcome, r.address) for r in heard] == [("test-api", 200, "ok", "127.0.0.1")] * 3
    assert all(r.bytes_in > 0 and r.bytes_out > 0 for r in heard)


def test_without_a_rule_every_request_gets_the_sentence(datascience_sandbox: Sandbox, api: LoopbackAPI) -> None:
    code = (
        "import urllib.request, socket, pandas\n"
        "for attempt in (\n"
        f"    lambda: urllib.request.urlopen('http://127.0.0.1:{api.port}/data.json'),\n"
        "    lambda: urllib.request.urlopen('https://api.example.org/data.json'),\n"
        f"    lambda: pandas.read_csv('http://127.0.0.1:{api.port}/data.csv'),\n"
        "    lambda: socket.create_connection(('127.0.0.1', 80)),\n"
        "):\n"
        "    try:\n"
        "        attempt()\n"
        "    except OSError as e:\n"
        "        print(type(e).__name__, e)\n"
    )
    before = len(api.log)
    off = RunNetwork((), off="network access is off for this run: no [network] rule of the server names "
                            "the key 'course' and profile 'student'")
    result = datascience_sandbox.run(code, limits=WALL, network=off)
    assert result.status is Status.OK, result.stderr
    line = "NetworkRefused network access is off for this run: no [network] rule of the server names the " \
           "key 'course' and profile 'student'\n"
    assert result.stdout == line * 4
    plain = datascience_sandbox.run(code, limits=WALL)  # no network given: off too
    assert plain.stdout.count("network access is off for this run: it was given no network rule") == 4
    assert api.log[before:] == []  # nothing reached the server


ESCAPES = """\
import http.client, json, urllib.request
def attempt(what, url, headers=None):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}))
        print(what, 'GOT', r.status, len(r.read()))
    except OSError as e:
        print(what, type(e).__name__, str(getattr(e, 'reason', e)))
base = 'http://127.0.0.1:%d' % PORT
attempt('redirect-other', base + '/to-other')
attempt('redirect-metadata', base + '/to-metadata')
attempt('ip-literal', 'http://127.0.0.2:%d/data.json' % PORT)
attempt('ipv6-mapped', 'http://[::ffff:127.0.0.1]:%d/data.json' % PORT)
attempt('metadata', 'http://169.254.169.254/latest/meta-data/')
attempt('private-name', 'http://private.test:%d/data.json' % PORT)
attempt('mapped-name', 'http://mapped.test:%d/data.json' % PORT)
attempt('drip', base + '/drip')
attempt('header-flood', base + '/header-flood')
attempt('request-headers', base + '/data.json', {'X-H%d' % i: 'v' for i in range(200)})
attempt('https-not-named', 'https://127.0.0.1:%d/data.json' % PORT)
ok = refused = 0
for i in range(40):
    try:
        urllib.request.urlopen(base + '/data.json?n=%d' % i).read()
        ok += 1
    except OSError:
        refused += 1
print('many', ok, refused)
attempt('huge', 'http://bulk.test:%d/huge' % PORT)
print('still running')
"""


def test_escapes_are_refused_or_capped(default_sandbox: Sandbox, api: LoopbackAPI, other: LoopbackAPI) -> None:
    api.redirect_to["/to-other"] = other.url("/data.json")
    api.redirect_to["/to-metadata"] = "http://169.254.169.254/latest/meta-data/"
    named = NetworkRule.from_table("named", {
        "destinations": [f"http://private.test:{api.port}", f"http://mapped.test:{api.port}",
                         f"http://bulk.test:{api.port}"],
        "addresses": ["127.0.0.1"], "max_bytes_in": 2 << 20})
    looked_up: list[str] = []

    def resolver(host: str, port: int) -> list[str]:  # the names' DNS, rebinding to inside addresses
        looked_up.append(host)
        return {"private.test": ["10.0.0.5"], "mapped.test": ["::ffff:10.0.0.7"], "bulk.test": ["127.0.0.1"]}[host]

    heard: list[NetworkRecord] = []
    network = RunNetwork([rule(api, max_requests=22, request_seconds=2), named],
                         resolver=resolver, on_request=heard.append)
    before, other_before = len(api.log), len(other.log)
    result = default_sandbox.run(ESCAPES.replace("PORT", str(api.port)), limits=WALL, network=network)
    assert result.status is Status.OK, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["redirect-other"].startswith(f"NetworkRefused http://127.0.0.1:{other.port} is not a destination "
                                              "of this run's network rules ('test-api', 'named')")
    assert lines["redirect-metadata"].startswith("NetworkRefused http://169.254.169.254:80 is not a destination")
    assert lines["metadata"].startswith("NetworkRefused http://169.254.169.254:80 is not a destination")
    assert lines["ip-literal"].startswith(f"NetworkRefused http://127.0.0.2:{api.port} is not a destination")
    assert lines["ipv6-mapped"].startswith(f"NetworkRefused http://[::ffff:127.0.0.1]:{api.port} is not a destination")
    assert lines["private-name"] == ("NetworkRefused private.test resolves to 10.0.0.5, a loopback, private or "
                                     "reserved address that the network rule 'named' does not name (the host "
                                     "connects only to public addresses unless a rule names them)")
    assert lines["mapped-name"].startswith("NetworkRefused mapped.test resolves to 10.0.0.7, a loopback")
    assert lines["huge"] == ("NetworkRefused the answer of bulk.test took the run over the 2097152 bytes in the "
                             "network rule 'named' allows (max_bytes_in)")
    assert lines["drip"].startswith("TimeoutError the request to 127.0.0.1 took longer than the 2 s")
    assert lines["header-flood"].startswith("NetworkRefused the answer of 127.0.0.1 has more than 100 headers")
    assert lines["request-headers"].startswith("NetworkRefused a request may have at most 64 headers (20")
    assert lines["https-not-named"].startswith(f"NetworkRefused https://127.0.0.1:{api.port} is not a destination")
    # 22 requests of test-api in all: the redirects' first hops, the drip, the header flood, 18 of the loop
    assert lines["many"] == "18 22"
    assert lines["still"] == "running"
    assert looked_up == ["private.test", "mapped.test", "bulk.test"]
    # the host's own view: what reached the loopback servers
    assert api.paths()[before:] == ["/to-other", "/to-metadata", "/drip", "/header-flood"] + [
        f"/data.json?n={i}" for i in range(18)] + ["/huge"]
    assert api.log[-1][2]["host"] == f"bulk.test:{api.port}"  # the name in Host, the checked address connected
    assert other.log[other_before:] == []
    outcomes = [r.outcome for r in heard]
    assert outcomes.count("ok") == 2 + 18 and "capped" in outcomes and "timeout" in outcomes
    assert all(r.address is None for r in heard if r.outcome == "refused" and r.rule is None)
    # the host is unharmed: the next run works
    again = default_sandbox.run("print('next run')", limits=WALL)
    assert again.stdout == "next run\n"


def test_a_session_gets_each_cells_rules(default_sandbox: Sandbox, api: LoopbackAPI) -> None:
    fetch = (f"import urllib.request\ntry:\n    print(urllib.request.urlopen('{api.url('/data.json')}').read())\n"
             "except OSError as e:\n    print(e)\n")
    before = len(api.log)
    with default_sandbox.session(limits=WALL) as session:
        first = session.run(fetch, network=RunNetwork((), off="network access is off for this cell"))
        second = session.run(fetch, network=RunNetwork([rule(api)]))
        third = session.run(fetch)
    assert first.stdout == "network access is off for this cell\n"
    assert second.stdout == "b'{\"answer\": 42, \"items\": [1, 2, 3]}'\n"
    assert third.stdout == "network access is off for this run: it was given no network rule\n"
    assert api.paths()[before:] == ["/data.json"]
