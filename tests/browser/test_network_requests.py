"""``requests`` on the browser tier (issue 37 §1), in Chromium: the test set-up's lock
(``tests/support/wheelhouse.py``) becomes the browser's wheelhouse, so ``import requests`` installs
requests and urllib3 from our own origin; Pyodide's urllib3 would send with its own
``XMLHttpRequest`` (which the frame's policy blocks), and the guest's network shim routes it through
the runner's ``POST /api/network/fetch`` instead, under the run's grant. A key whose rule names the
loopback API reads its JSON; an address no rule names, and a redirect to one, raise ``requests``'
``ConnectionError`` with the server tier's sentence; a key without a rule gets the sentence naming
it. The loopback servers' own logs show what reached them. (``pandas.read_csv(url)`` is not tested
here: pandas comes from Pyodide's official index, which the closed test machine cannot reach.)
The first run installs requests itself: the page asks for the run's grant before the worker loads
its packages, and the grant's wall limit counts from the run's first request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import REPO, _free_socket, playground_page, run_with_key
from tests.support.browser import stop_process as stop
from tests.support.live_server import KEY, OTHER_KEY
from tests.support.loopback_api import LoopbackAPI, loopback_api

WASM_RUNNER = str(Path(sys.executable).with_name("wasm-runner"))

CODE = """\
import requests
r = requests.get('BASE/data.json', params={'via': 'requests'})
print(r.status_code, r.json()['items'])
for url in ('BASE/to-other', 'OTHER/data.json'):
    try:
        requests.get(url)
    except requests.ConnectionError as e:
        print(type(e).__name__, e)
print('still running')
"""


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def other() -> Iterator[LoopbackAPI]:
    """A second loopback server that no rule names."""
    with loopback_api() as server:
        yield server


@dataclass
class Served:
    """``wasm-runner serve`` in its own process (the browser's wheelhouse is process-wide: the
    test process's other servers keep theirs), with its audit log."""

    url: str
    audit_log: Path


@pytest.fixture(scope="module")
def server(api: LoopbackAPI, package_lock: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("browser-requests")
    wheelhouse = folder / "wheelhouse"
    built = subprocess.run([WASM_RUNNER, "wheelhouse", "--from-lock", str(package_lock), "--out", str(wheelhouse)],
                           cwd=REPO, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    config = folder / "wasm-runner.toml"
    config.write_text(
        f'[server]\naudit_log = "{folder / "audit.jsonl"}"\n\n'
        f'[[api_keys]]\nname = "alice"\nkey = "{KEY}"\n\n[[api_keys]]\nname = "bob"\nkey = "{OTHER_KEY}"\n\n'
        f'[network.test-api]\ndestinations = ["http://127.0.0.1:{api.port}"]\nkeys = ["alice"]\n')
    sock = _free_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = {**os.environ, "WASM_RUNNER_WHEELHOUSE": str(wheelhouse), "WASM_RUNNER_PYODIDE_INDEX_URL": "",
           "WASM_RUNNER_PACKAGES_LOCK": str(package_lock)}
    process = subprocess.Popen([WASM_RUNNER, "serve", "--config", str(config), "--port", str(port)], cwd=REPO,
                               env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/embed.js", timeout=2):
                break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "wasm-runner serve did not start"
            time.sleep(0.2)
    yield Served(base, folder / "audit.jsonl")
    stop(process)


@pytest.fixture(scope="module")
def page(server: Served) -> Iterator[Any]:
    with playground_page(server.url, internet=False) as page:
        yield page


def test_requests_reads_the_api_in_the_browser_and_refusals_carry_the_sentence(
    server: Served, api: LoopbackAPI, other: LoopbackAPI, page: Any
) -> None:
    api.redirect_to["/to-other"] = other.url("/data.json")
    before, other_before = len(api.log), len(other.log)
    result = run_with_key(page, KEY, CODE.replace("BASE", api.url("")).replace("OTHER", other.url("")))
    assert result["status"] == "ok" and result["tier"] == "browser", result
    lines = result["stdout"].splitlines()
    assert lines[0] == "200 [1, 2, 3]" and lines[3] == "still running" and len(lines) == 4, result
    refused = (f"http://127.0.0.1:{other.port} is not a destination of this run's network rules ('test-api'); "
               f"the operator allows: http://127.0.0.1:{api.port}")
    assert lines[1].startswith("ConnectionError ") and refused in lines[1]  # the redirect, checked again
    assert lines[2].startswith("ConnectionError ") and refused in lines[2]
    assert api.paths()[before:] == ["/data.json?via=requests", "/to-other"]
    assert api.log[before][2]["user-agent"].startswith("python-requests/")
    assert other.log[other_before:] == []  # nothing reached the server no rule names
    heard = [e for e in map(json.loads, server.audit_log.read_text().splitlines()) if e.get("event") == "network"]
    assert [(e["tier"], e["rule"], e["url"], e["status"], e["outcome"]) for e in heard[-4:]] == [
        ("browser", "test-api", api.url("/data.json?via=requests"), 200, "ok"),
        ("browser", "test-api", api.url("/to-other"), 302, "ok"),
        ("browser", None, other.url("/data.json"), None, "refused"),  # the redirect's target
        ("browser", None, other.url("/data.json"), None, "refused")]
    assert page.errors == []


def test_requests_without_a_rule_gets_the_sentence_in_the_browser(api: LoopbackAPI, page: Any) -> None:
    before = len(api.log)
    code = ("import requests\ntry:\n    requests.get('BASE/data.json')\n"
            "except requests.ConnectionError as e:\n    print(type(e).__name__, e)\n").replace("BASE", api.url(""))
    result = run_with_key(page, OTHER_KEY, code)
    assert result["status"] == "ok" and result["tier"] == "browser", result
    assert result["stdout"].startswith("ConnectionError ")
    assert ("network access is off for this run: no [network] rule of the server names the key 'bob' and "
            "profile 'student'") in result["stdout"]
    assert api.log[before:] == []
    assert run_with_key(page, OTHER_KEY, "print('still answering')")["stdout"] == "still answering\n"
