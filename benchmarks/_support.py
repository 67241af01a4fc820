"""What the benchmark scripts share: percentiles, the machine and its load, a server config with one
API key, and a real server to measure against: ``wasm-runner serve`` in a process of its own
(``serve``), or the app under uvicorn in this process (``serve_here``).

Private to ``benchmarks/``: a script run as ``python benchmarks/NAME.py`` has this folder first on
its path and imports it as ``_support``; importing it puts the repository on the path too.
"""

from __future__ import annotations

import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from wasm_runner.scaleout.launcher.children import free_port  # noqa: E402

__all__ = ["ROOT", "RESULTS", "SESSION_SETUPS", "free_port", "pct", "percentiles", "machine", "load_average",
           "server_toml", "Served", "serve", "serve_here"]  # fmt: skip

# a session's set-up cell, by name: what the session benchmarks save, resume and fork
SESSION_SETUPS = {
    "plain": "import json, random\nstate = {'n': list(range(1000)), 'seen': random.random()}\n",
    "pandas": ("import numpy as np, pandas as pd\n"
               "df = pd.DataFrame({'k': list('abcab'), 'v': np.arange(5.0)})\nprint(df.groupby('k').v.sum())\n"),
}


# -- figures ------------------------------------------------------------------------------------
def pct(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values`` by nearest rank: one of the values, NaN when there
    are none."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def percentiles(values: Sequence[float], qs: Sequence[float] = (0.5, 0.9), digits: int = 3) -> dict[str, float]:
    """``{"p50": ..., "p90": ...}`` of ``values`` (nearest rank), rounded to ``digits``."""
    return {f"p{round(q * 100):g}": round(pct(values, q), digits) for q in qs}


def machine() -> str:
    """This machine, as the figures in docs/performance.md name it."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages now."""
    return [round(x, 2) for x in os.getloadavg()]


# -- a server config ----------------------------------------------------------------------------
def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string: the same escapes as JSON's


def _table(header: str, values: Mapping[str, Any]) -> str:
    return "\n".join([header, *(f"{k} = {_toml(v)}" for k, v in values.items())]) + "\n"


def server_toml(key: str, *, server: Mapping[str, Any] | None = None, profile: Mapping[str, Any] | None = None,
                analyst: Mapping[str, Any] | None = None, api_key: Mapping[str, Any] | None = None) -> str:
    """A ``serve`` config: ``[server]`` with the profile "bench" as default (plus ``server``), that
    profile (``profile``; the plain image unless it says otherwise), the built-in profile "analyst"
    without a warm pool (it would take memory and CPU no benchmark measures; plus ``analyst``) and
    one API key, ``key``, with a rate no benchmark reaches (plus ``api_key``)."""
    return "\n".join([
        _table("[server]", {"default_profile": "bench", **(server or {})}),
        _table("[profiles.bench]", {"image": "plain", **(profile or {})}),
        _table("[profiles.analyst]", {"pool_size": 0, **(analyst or {})}),
        _table("[[api_keys]]", {"name": "bench", "key": key, "rate": "1000000/minute", **(api_key or {})}),
    ])  # fmt: skip


# -- a real server ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Served:
    """A ``wasm-runner serve`` started by ``serve``: its base URL and its process."""

    url: str
    process: subprocess.Popen[bytes]


def _wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}{why}")
        try:
            if httpx.get(url + "/readyz", timeout=5, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server did not get ready in {seconds:.0f} s{why}")


@contextmanager
def serve(config: Path, *, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
          log: Path | None = None, cwd: Path | None = None, ready_seconds: float = 300,
          stop_seconds: float = 60) -> Iterator[Served]:
    """``wasm-runner serve --config config`` on a free 127.0.0.1 port (plus ``args``), this
    repository's code, without the caller's ``WASM_RUNNER_*`` settings but the module cache (plus
    ``env``); its output to ``log`` (else discarded). Yields once ``/readyz`` answers 200; ends it
    with SIGTERM (it drains), killed after ``stop_seconds``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_") or k == "WASM_RUNNER_CACHE"}
    clean.update(PYTHONPATH=str(ROOT), **(env or {}))
    argv = [sys.executable, "-m", "wasm_runner.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--config", str(config), "--log-level", "warning", *args]  # fmt: skip
    out: IO[bytes] | int = log.open("wb") if log else subprocess.DEVNULL
    process = subprocess.Popen(argv, env=clean, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        _wait_ready(url, process, ready_seconds, f": {log.read_text()[-2000:]}" if log else "")
        yield Served(url, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(stop_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log:
            out.close()  # type: ignore[union-attr]


@contextmanager
def serve_here(config: Any) -> Iterator[str]:
    """The app for ``config`` (a ``ServerConfig``) under uvicorn in a thread of this process (the
    end-to-end tests' server), on a free 127.0.0.1 port; yields its base URL. A client in this
    process shares the interpreter lock with the server: time requests against ``serve``."""
    from tests.support.live_server import live_server

    with live_server(config) as server:
        yield server.url
