"""Session snapshots (issue 25): how long saving a resting session (pause) and resuming it take.

For one image, opens a session, runs a set-up cell, then --rounds times: ``Session.snapshot``
(pause: the changed memory blocks found, copied, compressed unless --raw, sealed), ``Sandbox.resume``
(resume: the snapshot authenticated and inflated, a new instance of the compiled image with the saved
blocks, files and fd table), the resumed session's first cell, and ``Session.fork(1)`` (a copy
without sealing). Prints p50 and p90 of each and the snapshot's size.

    .venv/bin/python benchmarks/session_snapshots.py                 # plain image
    .venv/bin/python benchmarks/session_snapshots.py --image datascience --setup pandas
    .venv/bin/python benchmarks/session_snapshots.py --raw          # snapshots not compressed
    .venv/bin/python benchmarks/session_snapshots.py --codecs       # zlib and zstd on the same body
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import zlib
from collections.abc import Callable

import zstandard

from _support import SESSION_SETUPS as SETUPS, load_average, pct

from wasm_runner import Sandbox
from wasm_runner.sandbox.sealing import open_sealed


def median_ms(work: Callable[[], bytes], times: int = 7) -> tuple[float, bytes]:
    xs, out = [], b""
    for _ in range(times):
        t0 = time.perf_counter()
        out = work()
        xs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(xs), out


def codecs(body: bytes) -> None:
    """Each candidate codec on one snapshot body (its changed blocks, files and header, as sealed
    before compression): size, and the median of 7 compressions and inflations."""
    print(f"body {len(body) / 1024:.0f} KiB; load average {' '.join(f'{x:.2f}' for x in load_average())}")
    for name, pack, unpack in (
        ("zlib 1", lambda: zlib.compress(body, 1), zlib.decompress),
        ("zlib 3", lambda: zlib.compress(body, 3), zlib.decompress),
        ("zstd 1", lambda: zstandard.ZstdCompressor(level=1).compress(body), zstandard.ZstdDecompressor().decompress),
        ("zstd 3", lambda: zstandard.ZstdCompressor(level=3).compress(body), zstandard.ZstdDecompressor().decompress),
    ):
        packed_ms, packed = median_ms(pack)
        inflate_ms, back = median_ms(lambda u=unpack, p=packed: u(p))
        assert back == body
        print(f"{name:8s} {len(packed) / 1024:7.0f} KiB   compress {packed_ms:6.1f} ms   inflate {inflate_ms:6.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="plain")
    ap.add_argument("--setup", default="plain", choices=sorted(SETUPS))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--raw", action="store_true", help="snapshots stored as they are (not compressed)")
    ap.add_argument("--codecs", action="store_true", help="only compare codecs on the set-up session's body")
    args = ap.parse_args()
    secret = os.urandom(32)
    sb = Sandbox(image=args.image, prestart=0)
    try:
        s = sb.session()
        r = s.run(SETUPS[args.setup])
        if not r.ok:
            raise SystemExit(f"set-up failed: {r.status} {r.stderr[-500:]}")
        s.snapshot(owner="bench", secret=secret)  # the sandbox's reference instance, made once
        if args.codecs:
            raw = s.snapshot(owner="bench", secret=secret, compress=False)
            codecs(open_sealed(raw, owner="bench", secret=secret, image=sb.snapshot_image))
            return
        pause, resume, first, fork = [], [], [], []
        size = 0
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            snap = s.snapshot(owner="bench", secret=secret, compress=not args.raw)
            t1 = time.perf_counter()
            s2 = sb.resume(snap, owner="bench", secret=secret)
            t2 = time.perf_counter()
            r = s2.run("print(len(dir()))")
            t3 = time.perf_counter()
            if not r.ok:
                raise SystemExit(f"resumed cell failed: {r.status} {r.stderr[-500:]}")
            s2.close()
            t4 = time.perf_counter()
            (copy,) = s.fork(1)
            fork.append((time.perf_counter() - t4) * 1000)
            copy.close()
            pause.append((t1 - t0) * 1000)
            resume.append((t2 - t1) * 1000)
            first.append((t3 - t2) * 1000)
            size = len(snap)
        s.close()
    finally:
        sb.close()
    print(f"image {args.image}, set-up {args.setup}, {'raw' if args.raw else 'zstd'}, {args.rounds} rounds; load average "
          f"{' '.join(f'{x:.2f}' for x in load_average())}")
    print(f"snapshot size: {size / 1024:.0f} KiB")
    for name, xs in (("pause (snapshot)", pause), ("resume", resume), ("first cell after resume", first),
                     ("fork (one copy)", fork)):
        print(f"{name:26s} p50 {statistics.median(xs):7.1f} ms   p90 {pct(xs, 0.9):7.1f} ms")


if __name__ == "__main__":
    main()
