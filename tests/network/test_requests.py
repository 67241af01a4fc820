"""``requests`` (and ``urllib3`` 2.x under it) on the server tier, in real wasmtime instances: the
test set-up's wheelhouse (``tests/support/wheelhouse.py``) mounts them, the guest's network shim
carries each request to the host, which checks it against the operator's rule and connects to
a loopback HTTP server standing in for a public API. An allowed run reads JSON (GET and POST;
``urllib3`` on its own too);
an address no rule names, and a redirect to one (``requests`` follows it: the host checks it
again), raise ``requests``' ``ConnectionError`` with the rule's sentence in it, and the servers'
own logs show nothing reached them; an https:// URL goes to the host too (no ``ssl`` in the
guest) and is refused with the sentence when the rule names only http."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.loopback_api import LoopbackAPI, loopback_api
from wasm_runner import Limits, Sandbox, Status
from wasm_runner.execution import Executor, Job, OneSandbox
from wasm_runner.network import NetworkRule
from wasm_runner.packages import PackageStore
from wasm_runner.result import Result

WALL = Limits(wall_seconds=120.0)

ALLOWED = """\
import requests
r = requests.get('BASE/data.json', params={'via': 'requests'}, headers={'X-Course': 'intro'})
print(r.status_code, r.headers['content-type'], r.json()['items'])
r = requests.post('BASE/data.json', json={'n': 1})
print('post', r.status_code)
with requests.Session() as s:
    print('session', [s.get('BASE/data.json?n=%d' % i).json()['answer'] for i in range(2)])
print('missing', requests.get('BASE/nothing-here').status_code)
"""
URLLIB3 = "import urllib3\nprint('urllib3', urllib3.request('GET', 'BASE/data.json?via=urllib3').json()['answer'])\n"

REFUSED = """\
import requests
for url in ('OTHER/data.json', 'BASE/to-other', 'https://127.0.0.1:PORT/data.json'):
    try:
        requests.get(url, timeout=30)
    except requests.ConnectionError as e:
        print(type(e).__name__, e)
print('still running')
"""


@pytest.fixture(scope="module")
def store(package_lock: Path) -> PackageStore:
    return PackageStore.open(package_lock)


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def other() -> Iterator[LoopbackAPI]:
    """A second loopback server that no rule names."""
    with loopback_api() as server:
        yield server


def _run(sandbox: Sandbox, store: PackageStore, job: Job) -> Result:
    executor = Executor(OneSandbox(sandbox), workers=1, packages=store)
    try:
        return executor.run_sync(job)
    finally:
        executor.shutdown()


def _rule(api: LoopbackAPI) -> NetworkRule:
    return NetworkRule.from_table("test-api", {"destinations": [f"http://127.0.0.1:{api.port}"]})


def test_requests_reads_json_from_an_allowed_api(default_sandbox: Sandbox, store: PackageStore,
                                                 api: LoopbackAPI) -> None:
    job = Job(ALLOWED.replace("BASE", api.url("")), limits=WALL, network_rules=(_rule(api),))
    before = len(api.log)
    result = _run(default_sandbox, store, job)
    assert result.status is Status.OK, result.stderr
    assert result.stdout == ("200 application/json [1, 2, 3]\npost 501\nsession [42, 42]\nmissing 404\n")
    assert "requests==2.34.2" in job.packages_granted and any(p.startswith("urllib3==") for p in job.packages_granted)
    seen = api.log[before:]
    assert [(method, path) for method, path, _ in seen] == [
        ("GET", "/data.json?via=requests"), ("GET", "/data.json?n=0"), ("GET", "/data.json?n=1"),
        ("GET", "/nothing-here")]  # the POST reached http.server, which has no POST route (501), unlogged
    first = seen[0][2]
    assert first["x-course"] == "intro" and first["host"] == f"127.0.0.1:{api.port}"
    assert first["user-agent"].startswith("python-requests/")
    assert [(r.rule, r.status, r.outcome) for r in job.network_requests] == [
        ("test-api", 200, "ok"), ("test-api", 501, "ok"), ("test-api", 200, "ok"), ("test-api", 200, "ok"),
        ("test-api", 404, "ok")]
    alone = _run(default_sandbox, store, Job(URLLIB3.replace("BASE", api.url("")), limits=WALL,
                                             network_rules=(_rule(api),)))  # urllib3 imported first, on its own
    assert (alone.status, alone.stdout) == (Status.OK, "urllib3 42\n"), alone.stderr
    assert api.paths()[-1] == "/data.json?via=urllib3"


def test_requests_refusals_carry_the_sentence_and_reach_nothing(default_sandbox: Sandbox, store: PackageStore,
                                                                api: LoopbackAPI, other: LoopbackAPI) -> None:
    api.redirect_to["/to-other"] = other.url("/data.json")
    code = REFUSED.replace("OTHER", other.url("")).replace("BASE", api.url("")).replace("PORT", str(api.port))
    job = Job(code, limits=WALL, network_rules=(_rule(api),))
    before, other_before = len(api.log), len(other.log)
    result = _run(default_sandbox, store, job)
    assert result.status is Status.OK, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4 and lines[3] == "still running", result.stdout
    refused_other = (f"http://127.0.0.1:{other.port} is not a destination of this run's network rules "
                     f"('test-api'); the operator allows: http://127.0.0.1:{api.port}")
    assert lines[0].startswith("ConnectionError ") and refused_other in lines[0]
    assert lines[1].startswith("ConnectionError ") and refused_other in lines[1]  # the redirect, checked again
    assert lines[2].startswith("ConnectionError ")
    assert f"https://127.0.0.1:{api.port} is not a destination of this run's network rules ('test-api')" in lines[2]
    assert other.log[other_before:] == []  # the host's view: nothing connected to the refused server
    assert api.paths()[before:] == ["/to-other"]  # only the allowed request that answered with the redirect
    assert [r.outcome for r in job.network_requests] == ["refused", "ok", "refused", "refused"]


def test_without_a_rule_requests_gets_the_off_sentence(default_sandbox: Sandbox, store: PackageStore,
                                                       api: LoopbackAPI) -> None:
    code = ("import requests\ntry:\n    requests.get('BASE/data.json')\n"
            "except requests.ConnectionError as e:\n    print(type(e).__name__, e)\n").replace("BASE", api.url(""))
    before = len(api.log)
    result = _run(default_sandbox, store, Job(code, limits=WALL))
    assert result.status is Status.OK, result.stderr
    assert result.stdout.startswith("ConnectionError ")
    assert "network access is off for this run: it was given no network rule" in result.stdout
    assert api.log[before:] == []
