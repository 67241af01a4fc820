"""Which programs get the network loader when their run has no rule (``may_reach_network``): every
way the server tier's tests reach the network does, a program that cannot does not, and both
still run as the student wrote them."""

from __future__ import annotations

import pytest

from wasm_runner import Sandbox
from wasm_runner.network import may_reach_network

REACHING = [
    "import urllib.request\nurllib.request.urlopen('https://example.org/')",
    "from urllib.request import urlopen",
    "import http.client",
    "import socket\nsocket.create_connection(('a', 1))",
    "import requests",
    "import pandas as pd\npd.read_csv('data.csv')",
    "m = __import__('sock' + 'et')",
    "import importlib\nimportlib.import_module('x')",
    "exec(open('other.py').read())",
]
NOT_REACHING = [
    "print(1)",
    "import math\nprint(math.pi)",
    "name = input('Your name? ')\nprint('Hi', name)",
    "import random\nfor i in range(3):\n    print(random.randint(1, 6))",
]


@pytest.mark.parametrize("code", REACHING)
def test_a_program_that_may_reach_the_network_gets_the_loader(code: str) -> None:
    assert may_reach_network(code)


@pytest.mark.parametrize("code", NOT_REACHING)
def test_a_program_that_cannot_runs_without_it(code: str) -> None:
    assert not may_reach_network(code)


def test_both_kinds_run_as_written_without_a_rule(default_sandbox: Sandbox) -> None:
    plain = default_sandbox.run("x = 6 * 7\nprint(x)\nx")
    assert plain.status == "ok" and plain.stdout == "42\n"
    refused = default_sandbox.run(
        "import urllib.request\ntry:\n    urllib.request.urlopen('http://127.0.0.1:9/')\n"
        "except OSError as e:\n    print(e)\n"
    )
    assert refused.status == "ok"
    assert "network access is off for this run" in refused.stdout
