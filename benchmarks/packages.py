"""Packages beyond the image on the server tier: what a run pays to import a package of the
operator's wheelhouse (issue 37's goal: the first import of a cached package adds <= 50 ms).

Runs of the default sandbox (``plain`` image, its warm pool), interleaved round by round so
that the machine's load hits every kind alike; figures are medians:

- ``pass``, without packages and with the wheelhouse's set mounted: what the mount costs a run
  (the view of the wrapper's folder is cached; the run gets a grant and the loader);
- ``import sympy`` (and one ``integrate``) from the image and from the wheelhouse (the same
  sympy 1.14.0, unpacked and compiled by ``wasm-runner packages fetch``'s code, forced onto
  the mount): the difference is what being outside the image adds to the first import;
- ``import markdown_it`` and ``import mdurl`` from the wheelhouse (not in the image), for scale.

Each figure is the guest's own clock around the import (``time.perf_counter``) and the run's
wall time as the host measured it. Nothing here is a test.

    .venv/bin/python benchmarks/packages.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _support import load_average, machine
from wasm_runner import Limits
from wasm_runner.packages import PackageStore
from wasm_runner.packages.fetching import compile_in_guest, fetch, lock_requirements
from wasm_runner.packages.store import COMPLETE
from wasm_runner.packages.wheels import unpack_wheel
from wasm_runner.sandbox import default_sandbox

REQUIREMENTS = ["markdown-it-py==4.2.0", "sympy==1.14.0"]
TIMED = "import time\nt = time.perf_counter()\n{body}\nprint(time.perf_counter() - t)\n"
SYMPY = "import sympy\nx = sympy.Symbol('x')\nsympy.integrate(x**2, x)"


def _forced(store: PackageStore, name: str) -> Path:
    """``name``'s unpacked, compiled folder even when the image has it (fetch leaves those out)."""
    pkg = store.lock.packages[name]
    folder = store.folder(pkg)
    if not (folder / COMPLETE).is_file():
        folder.mkdir(parents=True)
        unpack_wheel(store.wheel_path(pkg), folder)
        compile_in_guest(folder)
        (folder / COMPLETE).write_text(pkg.sha256 + "\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lock = Path(tmp) / "packages.lock.json"
        lock_requirements(REQUIREMENTS, lock)
        store = PackageStore.open(lock)
        fetch(store)
        markdown = store.folders_for("import markdown_it")
        sympy = [_forced(store, "sympy"), _forced(store, "mpmath")]
    sandbox = default_sandbox("default", "plain")
    kinds = {  # name -> (program body, package folders)
        "pass, no packages": ("pass", []),
        "pass, markdown-it-py + mdurl mounted": ("pass", markdown),
        "import sympy + integrate, from the image": (SYMPY, []),
        "import sympy + integrate, from the wheelhouse": (SYMPY, sympy),
        "import mdurl, from the wheelhouse": ("import mdurl", markdown),
        "import markdown_it, from the wheelhouse": ("import markdown_it", markdown),
    }
    limits = Limits(cpu_seconds=30, wall_seconds=120)
    guest: dict[str, list[float]] = {k: [] for k in kinds}
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds + 1):  # the first round warms the caches and is dropped
        for name, (body, folders) in kinds.items():
            t0 = time.perf_counter()
            result = sandbox.run(TIMED.format(body=body), packages=folders, limits=limits)
            took = time.perf_counter() - t0
            assert result.ok, (name, result.stderr)
            guest[name].append(float(result.stdout) * 1000)
            wall[name].append(took * 1000)
    rows = {k: {"guest_ms": round(statistics.median(guest[k][1:]), 1),
                "run_wall_ms": round(statistics.median(wall[k][1:]), 1)} for k in kinds}
    image, mounted = rows["import sympy + integrate, from the image"], rows["import sympy + integrate, from the wheelhouse"]
    summary = {
        "machine": machine(), "load_average": load_average(), "rounds": args.rounds, "runs": rows,
        "mount_added_run_wall_ms": round(rows["pass, markdown-it-py + mdurl mounted"]["run_wall_ms"]
                                         - rows["pass, no packages"]["run_wall_ms"], 1),
        "sympy_first_import_added_ms": round(mounted["guest_ms"] - image["guest_ms"], 1),
        "sympy_run_added_ms": round(mounted["run_wall_ms"] - image["run_wall_ms"], 1),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
