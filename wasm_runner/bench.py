"""``wasm-runner bench``: the server tier's speed, side by side with native Python, in one run.

Every figure is measured in the run that prints it; ratios are against the native baseline
(``python -I -S`` subprocesses) measured in the same run. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .environment import VARIABLES, variables
from .limits import Limits
from .sandbox import Sandbox

__all__ = ["calibrate", "main"]

HELLO = "print('hi')"
DATAFRAME = (
    "import numpy as np, pandas as pd\n"
    "df = pd.DataFrame({'g': np.arange(100) % 5, 'v': np.arange(100.0)})\n"
    "print(df.groupby('g')['v'].mean().sum())"
)
DS_GROUPBY = (
    "import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
    "df = pd.DataFrame({'g': np.arange(100) % 5, 'v': np.arange(100.0)})\n"
    "print(df.groupby('g')['v'].mean().sum())"
)
FIB = "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(25)"
NBODY = """
import math
def nbody(steps):
    bodies = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 39.47], [4.84, -1.16, -0.10, 0.60, 2.81, -0.02, 0.037],
              [8.34, 4.12, -0.40, -1.01, 1.82, 0.008, 0.011], [12.89, -15.11, -0.22, 1.08, 0.86, -0.01, 0.0017],
              [15.37, -25.91, 0.17, 0.97, 0.59, -0.03, 0.002]]
    dt = 0.01
    for _ in range(steps):
        for i, a in enumerate(bodies):
            for b in bodies[i + 1:]:
                dx, dy, dz = a[0] - b[0], a[1] - b[1], a[2] - b[2]
                d2 = dx * dx + dy * dy + dz * dz
                mag = dt / (d2 * math.sqrt(d2))
                a[3] -= dx * b[6] * mag; a[4] -= dy * b[6] * mag; a[5] -= dz * b[6] * mag
                b[3] += dx * a[6] * mag; b[4] += dy * a[6] * mag; b[5] += dz * a[6] * mag
        for p in bodies:
            p[0] += dt * p[3]; p[1] += dt * p[4]; p[2] += dt * p[5]
nbody(20000)
"""
TIMED = "import time as _t\n_s = _t.perf_counter()\n{body}\nprint(round((_t.perf_counter() - _s) * 1000, 3))"
LIMITS = Limits(cpu_seconds=120, wall_seconds=300, memory_mb=1024)


def _pcts(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.9))]


def _time(fn: Callable[[], Any], n: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def _native(code: str, site: bool = False) -> subprocess.CompletedProcess[str]:
    """Native CPython as a subprocess: ``-I -S``, or ``-I`` with ``site`` (installed packages)."""
    flags = ["-I"] if site else ["-I", "-S"]
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env={}, check=True)


def _inner_ms(out: str) -> float:
    return float(out.strip().splitlines()[-1])


def _throughput(sb: Sandbox, seconds: float, threads: int) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * threads

    def worker(i: int) -> None:
        while time.monotonic() < stop:
            sb.run(HELLO)
            counts[i] += 1

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def calibrate(sb: Sandbox) -> float:
    """Fuel per CPU-second of this runtime: a guest loop's fuel over its thread's CPU time,
    both measured by the host (the guest's own clocks are not trusted for this)."""
    code = "x = 0\nfor i in range(3_000_000): x += i % 7"
    rates = []
    seen: list[float] = []
    sb.on_guest_end = lambda outcome: seen.append(outcome.cpu_s)
    try:
        for _ in range(3):
            r = sb.run(code, limits=LIMITS)
            rates.append(r.fuel_used / seen[-1])
    finally:
        sb.on_guest_end = None
    return statistics.median(rates)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="wasm-runner bench", description=__doc__)
    p.add_argument("-n", type=int, default=40, help="samples per latency figure (default 40)")
    p.add_argument("--seconds", type=float, default=5.0, help="duration of the throughput run")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("--quick", action="store_true", help="fewer samples, skip the small runtime")
    p.add_argument("--calibrate", action="store_true", help="only measure fuel per CPU-second")
    p.add_argument("--images", action="store_true", help="only the native baseline, fresh runs and the images")
    args = p.parse_args(list(argv or []))
    server = _HttpServer()
    try:
        return _bench(args, server)
    finally:
        server.close()


def _bench(args: argparse.Namespace, server: _HttpServer) -> int:
    n = 10 if args.quick else args.n
    rows: list[tuple[str, float, float, str]] = []
    fig: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}

    sb = Sandbox("default")  # the default: runs take instances started ahead of time (prestart)
    if args.calibrate:
        print(f"default: {calibrate(sb):.3g} fuel per CPU-second (shipped: {sb.runtime.fuel_per_cpu_second:.3g})")
        small = Sandbox("small")
        print(f"small:   {calibrate(small):.3g} fuel per CPU-second (shipped: {small.runtime.fuel_per_cpu_second:.3g})")
        return 0

    native = _pcts(_time(lambda: _native(HELLO), n))
    rows.append(("native python -I -S subprocess, print('hi')", *native, "1.00x (baseline)"))

    def add(label: str, ms: list[float], base: float = native[0]) -> tuple[float, float]:
        p50, p90 = _pcts(ms)
        rows.append((label, p50, p90, f"{p50 / base:.2f}x"))
        return p50, p90

    plain = sb.pools["plain"] if "plain" in sb.pools else None

    def one_at_a_time() -> list[float]:
        """Runs as requests come: the pool refilled in between (the wait is not timed)."""
        out = []
        for _ in range(n):
            if plain is not None:
                plain.wait_ready(timeout=60)
            t = time.perf_counter()
            sb.run(HELLO)
            out.append((time.perf_counter() - t) * 1000)
        return out

    fresh = add("wasm fresh run, print('hi'), default (prestarted instance), one at a time", one_at_a_time())
    b2b = add("wasm fresh run, print('hi'), default (prestarted instance), back to back", _time(lambda: sb.run(HELLO), n))
    cold = Sandbox("default", prestart=0)
    started = add("wasm instance started in the run (prestart=0), print('hi'), fuel on", _time(lambda: cold.run(HELLO), n))
    nofuel = Sandbox("default", fuel=False, prestart=0)
    fresh_off = add("wasm instance started in the run (prestart=0), print('hi'), fuel off", _time(lambda: nofuel.run(HELLO), n))
    fig.update(fresh_hello_p50_ms=fresh[0], fresh_hello_back_to_back_p50_ms=b2b[0],
               started_hello_p50_ms=started[0], started_hello_nofuel_p50_ms=fresh_off[0])
    # HTTP: the client here, the server in its own process; one at a time as a class sends them
    # (the server's pool refills in the gaps), and back to back
    spaced = server.times(HELLO, n, HTTP_GAP_S)
    back = server.times(HELLO, n, 0) if spaced is not None else None
    if spaced is not None and back is not None:
        label = "HTTP POST /api/run, student profile (datascience image), print('hi')"
        fig["http_hello_p50_ms"] = add(f"{label}, one at a time ({HTTP_GAP_S:g} s apart)", spaced)[0]
        fig["http_hello_back_to_back_p50_ms"] = add(f"{label}, back to back", back)[0]

    if args.images:
        images(fig, rows, native[0], n, add, server)
        _print(rows, fig, args.json)
        return 0

    rss0 = _rss_kib()
    pool = sb.add_pool("bench", size=4, preload=("numpy", "pandas"))
    pool.wait_ready()
    per_slot_mib = (_rss_kib() - rss0) / 4 / 1024
    fig["idle_slot_rss_mib"] = per_slot_mib

    def pooled(code: str) -> list[float]:
        """Latency of runs that get a warm slot: the wait for a refill is not timed."""
        out = []
        for _ in range(n):
            pool.wait_ready(1, timeout=300)
            t = time.perf_counter()
            r = sb.run(code, pool="bench", limits=LIMITS)
            out.append((time.perf_counter() - t) * 1000)
            assert r.ok, r.stderr
        return out

    pooled_hello = add("wasm pooled instance (numpy+pandas warm), print('hi')", pooled(HELLO))
    pooled_df = add("wasm pooled instance, numpy+pandas DataFrame groupby", pooled(DATAFRAME))
    fresh_df = add("wasm fresh instance, numpy+pandas DataFrame groupby", _time(lambda: sb.run(DATAFRAME, limits=LIMITS), max(3, n // 8), warmup=1))
    native_df = _pcts(_time(lambda: _native(DATAFRAME), max(3, n // 8), warmup=1)) if _has_pandas() else None
    if native_df:
        rows.append(("native subprocess, numpy+pandas DataFrame groupby", *native_df, f"{native_df[0] / native[0]:.2f}x"))
    fig.update(pooled_hello_p50_ms=pooled_hello[0], pooled_df_p50_ms=pooled_df[0], fresh_df_p50_ms=fresh_df[0])
    sb.pools.pop("bench").close()

    # compute: in-guest time of the same program, wasm vs native, fuel on and off
    for name, body in (("fib(25)", FIB), ("n-body 20k steps", NBODY)):
        code = TIMED.format(body=body)
        nat = statistics.median(_inner_ms(_native(code).stdout) for _ in range(3))
        on = statistics.median(_inner_ms(sb.run(code, limits=LIMITS).stdout) for _ in range(3))
        off = statistics.median(_inner_ms(nofuel.run(code, limits=LIMITS).stdout) for _ in range(3))
        rows.append((f"compute {name}: native", nat, nat, "1.00x (baseline)"))
        rows.append((f"compute {name}: wasm fuel on", on, on, f"{on / nat:.2f}x"))
        rows.append((f"compute {name}: wasm fuel off", off, off, f"{off / nat:.2f}x (fuel overhead {100 * (on / off - 1):+.1f}%)"))
        fig[f"compute_{name.split()[0]}"] = {"native_ms": nat, "fuel_on_ms": on, "fuel_off_ms": off}

    images(fig, rows, native[0], n, add, server)
    server.close()  # idle from here: the throughput runs have the machine to themselves

    cores = os.cpu_count() or 1
    tput = _throughput(sb, args.seconds, cores)
    tput_cold = _throughput(cold, args.seconds, cores)
    ntput = cores * 1000 / native[0]
    fig["throughput_runs_per_s"], fig["native_runs_per_s_est"] = tput, ntput
    fig["throughput_prestart0_runs_per_s"] = tput_cold
    if not args.quick:
        small = Sandbox("small")
        add("wasm small runtime (CPython 3.12), fresh, print('hi')", _time(lambda: small.run(HELLO), max(5, n // 4), warmup=2))

    _print(rows, fig, None)
    print(f"throughput, print('hi') fresh instances on {cores} threads: {tput:.0f} runs/s "
          f"(prestart=0: {tput_cold:.0f} runs/s; native subprocess estimate at p50: {ntput:.0f} runs/s)")
    print(f"resident memory per idle pooled slot (numpy+pandas imported): {per_slot_mib:.1f} MiB")
    print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    fig["rows"] = [{"what": r[0], "p50_ms": r[1], "p90_ms": r[2], "ratio": r[3]} for r in rows]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=2)
    return 0


def _print(rows: list[tuple[str, float, float, str]], fig: dict[str, Any], json_path: str | None) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'p50 ms':>9}  {'p90 ms':>9}  vs native")
    for label, p50, p90, ratio in rows:
        print(f"{label:<{width}}  {p50:9.2f}  {p90:9.2f}  {ratio}")
    if json_path:
        fig["rows"] = [{"what": r[0], "p50_ms": r[1], "p90_ms": r[2], "ratio": r[3]} for r in rows]
        with open(json_path, "w") as f:
            json.dump(fig, f, indent=2)


HTTP_GAP_S = 0.25  # between requests sent one at a time: a person runs, reads, edits


class _HttpServer:
    """A real ``wasm-runner serve`` for the HTTP figures, in a process of its own on a free
    loopback port (auth off, the default profile, an anonymous rate no bench reaches), started at
    its first use and stopped by ``close``. The client (this process) shares no interpreter lock
    with it, as no real client does. Without the server's packages there are no HTTP figures."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.folder: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> str | None:
        if self.url is not None or self.folder is not None:
            return self.url
        try:
            import httpx
            import uvicorn  # noqa: F401 - what `serve` needs
        except ImportError:
            return None
        self.folder = tempfile.TemporaryDirectory(prefix="wasm-runner-bench-")
        folder = Path(self.folder.name)
        (folder / "bench.toml").write_text('[server]\nanonymous_rate = "1000000/minute"\n')
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # the engine's variables (cache, allocator, prestart) as in this process; no server settings
        env = dict(os.environ)
        for name in set(variables()) - {v.name for v in VARIABLES}:
            del env[name]
        log = (folder / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wasm_runner.cli", "serve", "--no-auth", "--host", "127.0.0.1", "--port", str(port),
             "--config", str(folder / "bench.toml"), "--log-level", "warning"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 900  # a cold cache compiles the default profile's image first
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=5, trust_env=False).status_code == 200:
                    self.url = url
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        print(f"no HTTP figures: the server did not get ready ({(folder / 'serve.log').read_text()[-500:]})")
        return None

    def times(self, code: str, n: int, gap: float) -> list[float] | None:
        """Milliseconds of ``n`` ``POST /api/run`` of ``code`` (after 3 not timed), sent ``gap``
        seconds apart (0: back to back; the gap is not timed)."""
        url = self.start()
        if url is None:
            return None
        import httpx

        with httpx.Client(base_url=url, timeout=120, trust_env=False) as client:

            def one() -> None:
                r = client.post("/api/run", json={"code": code})
                assert r.status_code == 200 and r.json()["status"] == "ok", r.text

            for _ in range(3):
                one()
            out = []
            for _ in range(n):
                time.sleep(gap)
                t = time.perf_counter()
                one()
                out.append((time.perf_counter() - t) * 1000)
        return out

    def close(self) -> None:
        """Stop the server (it drains first); no HTTP figures after this."""
        self.url = None
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        if self.folder is not None:
            self.folder.cleanup()


def _live_rss_mib(sb: Sandbox, code: str, count: int = 6) -> float:
    """Resident memory a live instance adds to this process: sessions kept open after ``code``,
    measured between ``count`` and ``2 * count`` of them (the engine's warm slots, which keep
    pages resident for reuse, are all taken at the first level)."""
    sessions = []

    def open_more() -> None:
        for _ in range(count):
            s = sb.session(limits=Limits(memory_mb=256))
            r = s.run(code)
            assert r.ok, r.stderr
            sessions.append(s)
        time.sleep(0.2)

    try:
        open_more()
        first = _rss_kib()
        open_more()
        return (_rss_kib() - first) / count / 1024
    finally:
        for s in sessions:
            s.close()


def images(fig: dict[str, Any], rows: list[tuple[str, float, float, str]], native_p50: float, n: int,
           add: Callable[..., tuple[float, float]], server: _HttpServer) -> None:
    """The default runtime's images: fresh data-science runs, size, compile time, memory."""
    from . import engine
    from .images import image_names, image_path, image_runtime
    from .sandbox.wrapper import BOOT_SOURCE

    ds = Sandbox("default", image="datascience")
    ds_fresh = add("wasm fresh datascience image, numpy+pandas+pyplot import + groupby", _time(lambda: ds.run(DS_GROUPBY, limits=LIMITS), n))
    ds_hello = add("wasm fresh datascience image, print('hi')", _time(lambda: ds.run(HELLO), n))
    fig.update(ds_fresh_groupby_p50_ms=ds_fresh[0], ds_fresh_hello_p50_ms=ds_hello[0])
    native_ds = None
    try:
        native_ds = _pcts(_time(lambda: _native(DS_GROUPBY, site=True), max(3, n // 8), warmup=1))
    except subprocess.CalledProcessError:
        pass
    if native_ds:
        rows.append(("native python -I -c subprocess, numpy+pandas+pyplot import + groupby", *native_ds, f"{native_ds[0] / native_p50:.2f}x"))
        print(f"datascience image vs native python -c, same program: {ds_fresh[0] / native_ds[0]:.3f}x")
        fig["ds_vs_native"] = ds_fresh[0] / native_ds[0]
    http = server.times(DS_GROUPBY, n, HTTP_GAP_S)
    if http is not None:
        label = f"HTTP POST /api/run, student profile (datascience image), same program, {HTTP_GAP_S:g} s apart"
        fig["ds_http_groupby_p50_ms"] = add(label, http)[0]
    info = {}
    for name in image_names():
        sb = ds if name == "datascience" else Sandbox("default", image=name)
        path = image_path(sb.runtime, name, BOOT_SOURCE)
        rt = image_runtime(sb.runtime, name, path)
        live = _live_rss_mib(sb, "x = 1")
        info[name] = {
            "module_mib": path.stat().st_size / 2**20,
            "compiled_mib": engine.module_cache_path(rt, True).stat().st_size / 2**20,
            "start_memory_mib": sb.start_memory_bytes / 2**20,
            "compile_s": engine.compile_seconds(rt, True),
            "live_instance_rss_mib": live,
        }
    info["datascience"]["live_instance_after_groupby_rss_mib"] = busy = _live_rss_mib(ds, DS_GROUPBY)
    info["datascience"]["live_instances_in_4_gib"] = int(4096 // busy)
    fig["images"] = info
    for name, d in info.items():
        cs = d["compile_s"]
        print(f"image {name}: module {d['module_mib']:.0f} MiB (compiled {d['compiled_mib']:.0f} MiB, "
              f"compile {f'{cs:.0f} s' if cs is not None else 'time unknown'}), starts with "
              f"{d['start_memory_mib']:.0f} MiB of linear memory; resident per live instance "
              f"{d['live_instance_rss_mib']:.1f} MiB idle"
              + (f", {d['live_instance_after_groupby_rss_mib']:.1f} MiB after a pandas groupby: "
                 f"{d['live_instances_in_4_gib']} such instances in 4 GiB" if name == "datascience" else ""))


def _has_pandas() -> bool:
    try:
        _native("import pandas")
        return True
    except subprocess.CalledProcessError:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
