"""Fixtures for the HTTP tests: the shared live server (API keys on) and a client for it.

The sandbox is warmed once before any server starts, so no test pays for the module load.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from tests.support.live_server import LiveServer, live_server, make_config

from wasm_runner.sandbox import default_sandbox


@pytest.fixture(scope="session")
def warm_sandbox() -> None:
    default_sandbox("default", "datascience")  # the profiles' image (tests/support/live_server.py)


@pytest.fixture(scope="session")
def server(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(make_config(tmp_path_factory.mktemp("server"))) as live:
        yield live


@pytest.fixture()
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client
