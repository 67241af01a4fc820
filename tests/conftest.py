"""Shared fixtures: one real Sandbox per runtime and image for the whole session (compiled once,
cached: ``wasm-runner warm`` builds and compiles the images before the suite), and real
redis-servers (``tests/support/redis_process.py``)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from collections.abc import Iterator

import pytest

import httpx

from tests.support.live_server import LiveServer, live_server, make_config
from tests.support.redis_process import RedisProcess
from wasm_runner import Sandbox
from wasm_runner.sandbox import default_sandbox as warm_default_sandbox

RUNTIMES = ["default", "small"]
# (runtime, image): both images of the default runtime, and the small runtime (no images)
SANDBOXES = [("default", "plain"), ("default", "datascience"), ("small", None)]
_boxes: dict[tuple[str, str | None], Sandbox] = {}


def shared_sandbox(runtime: str, image: str | None = None) -> Sandbox:
    """One Sandbox per (runtime, image) for the whole test session."""
    key = (runtime, image)
    if key not in _boxes:
        _boxes[key] = Sandbox(runtime, image=image)
    return _boxes[key]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for sb in _boxes.values():
        sb.close()
    _boxes.clear()


@pytest.fixture(scope="session", params=SANDBOXES, ids=lambda p: "-".join(x for x in p if x))
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    runtime, image = request.param
    return shared_sandbox(runtime, image)


@pytest.fixture(scope="session")
def default_sandbox() -> Sandbox:
    return shared_sandbox("default", "plain")


@pytest.fixture(scope="session")
def small_sandbox() -> Sandbox:
    return shared_sandbox("small")


@pytest.fixture(scope="session")
def datascience_sandbox() -> Sandbox:
    return shared_sandbox("default", "datascience")


@pytest.fixture(scope="session", params=["plain", "datascience"])
def image_sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """Each image of the default runtime."""
    return shared_sandbox("default", request.param)


@pytest.fixture
def fake_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "wr-fake-secret-" + os.urandom(8).hex()
    monkeypatch.setenv("WR_FAKE_SECRET", value)
    return value


@pytest.fixture
def sockets() -> Iterator[ExitStack]:
    """Connections a test keeps open across steps (WebSocket clients are context managers):
    entered here, closed at the test's end even when it fails."""
    with ExitStack() as stack:
        yield stack


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One redis-server for the whole test session, for tests that only need *a* Redis (do not
    stop it: a module whose tests do takes ``redis``)."""
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """The test module's own redis-server, which its tests may stop and start again."""
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser suites run last: Playwright's synchronous API keeps an event loop running in
    the main thread for the rest of the process, so every later ``asyncio.run`` (the executor,
    admission and session tests) would be refused. A stable sort keeps every other order."""
    items.sort(key=_drives_a_browser)


def _drives_a_browser(item: pytest.Item) -> bool:
    """A test of ``tests/browser/`` or of a module that uses ``tests/support/browser.py``'s parts."""
    if "browser" in item.path.relative_to(Path(__file__).parent).parts[:1]:
        return True
    module = getattr(item, "module", None)
    return any(getattr(v, "__module__", "") == "tests.support.browser" for v in vars(module).values()) if module else False


# The shared live server (API keys on) and a client for it, for the HTTP tests and the scenarios over
# HTTP. The sandbox is warmed once before any server starts, so no test pays for the module load.
@pytest.fixture(scope="session")
def warm_sandbox() -> None:
    warm_default_sandbox("default", "datascience")  # the profiles' image (tests/support/live_server.py)


@pytest.fixture(scope="session")
def server(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(make_config(tmp_path_factory.mktemp("server"))) as live:
        yield live


@pytest.fixture()
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


@pytest.fixture(scope="session")
def package_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The operator's lock of the test wheelhouse (``tests/support/wheelhouse.py``), fetched."""
    from tests.support.wheelhouse import build_lock

    return build_lock(tmp_path_factory.mktemp("wheelhouse"))
