"""Shared fixtures: one real Sandbox per runtime for the whole session (compiled once, cached)."""

from __future__ import annotations

import os

import pytest

from wasm_runner import Sandbox

RUNTIMES = ["default", "small"]


@pytest.fixture(scope="session", params=RUNTIMES)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    sb = Sandbox(request.param)
    yield sb
    sb.close()


@pytest.fixture(scope="session")
def default_sandbox() -> Sandbox:
    sb = Sandbox("default")
    yield sb
    sb.close()


@pytest.fixture
def fake_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "wr-fake-secret-" + os.urandom(8).hex()
    monkeypatch.setenv("WR_FAKE_SECRET", value)
    return value
