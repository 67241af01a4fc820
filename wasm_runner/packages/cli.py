"""``wasm-runner packages``: pin the wheelhouse (``lock``), fetch it at install time (``fetch``),
show what runs may ask for (``list``). The lock file is ``--lock`` or ``$WASM_RUNNER_PACKAGES_LOCK``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..environment import PACKAGES_LOCK
from .fetching import FetchError, fetch, lock_requirements
from .lock import LockError
from .store import PackageStore, image_modules
from .wheels import WheelError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wasm-runner packages", description=__doc__.splitlines()[0])
    p.add_argument("--lock", type=Path, default=None,
                   help=f"the lock file (default: ${PACKAGES_LOCK.name})")
    sub = p.add_subparsers(dest="cmd", required=True)
    lock = sub.add_parser("lock", help="pin requirements (name==version, with their dependencies) into the lock")
    lock.add_argument("requirements", nargs="+", help="e.g. rich==13.9.4")
    sub.add_parser("fetch", help="download the locked wheels (sha256 checked), unpack and compile them")
    sub.add_parser("list", help="the packages of the lock and where each is served from")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    named = PACKAGES_LOCK.text()
    lock_path = args.lock or (Path(named) if named else None)
    if lock_path is None:
        print(f"wasm-runner packages: name the lock file: --lock FILE or ${PACKAGES_LOCK.name}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "lock":
            lock = lock_requirements(args.requirements, lock_path)
            print(f"{lock_path}: " + ", ".join(f"{p.name}=={p.version}" for p in lock.packages.values()))
            return 0
        store = PackageStore.open(lock_path)
        if args.cmd == "fetch":
            done = fetch(store, progress=lambda line: print(line, file=sys.stderr))
            print(f"ready: {len(store.lock.packages)} package(s), {len(done)} fetched now")
            return 0
        modules = image_modules()
        for pkg in store.lock.packages.values():
            where = ("the image has it (server tier)" if store.in_image(pkg, modules)
                     else "ready" if store.is_ready(pkg) else "not fetched")
            print(f"{pkg.name}=={pkg.version}  imports {', '.join(pkg.imports) or '-'}  {where}")
        return 0
    except (LockError, FetchError, WheelError) as exc:
        print(f"wasm-runner packages: {exc}", file=sys.stderr)
        return 1
