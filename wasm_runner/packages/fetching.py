"""Filling the wheelhouse at install time: ``lock`` pins requirements (pip resolves them to
pure-Python wheels from the package index, whose published hashes pip checks; their sha256 go into
the lock file the operator commits), ``fetch`` downloads exactly the locked wheels (pip
``--require-hashes``, and each file's sha256 checked again here), unpacks each once into the
cache and compiles its modules to ``.pyc`` inside the guest (the guest's own CPython: its
bytecode), so that runs import them from a read-only folder without compiling."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import WasmRunnerError
from .lock import LockedPackage, PackageLock
from .store import COMPLETE, PackageStore, image_modules
from .wheels import WheelError, read_wheel, sha256_of, unpack_wheel

__all__ = ["FetchError", "GUEST_PYTHON", "compile_in_guest", "fetch", "lock_requirements"]

GUEST_PYTHON = "3.15"  # the default runtime's CPython: the wheels must install there
Compiler = Callable[[Path], None]


class FetchError(WasmRunnerError, RuntimeError):
    """pip failed, a wheel is not pure Python, or a file's hash is not the lock's."""


def _pip(args: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:", "--platform", "any",
               "--python-version", GUEST_PYTHON, "--implementation", "py", "--abi", "none", *args]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise FetchError(f"pip could not fetch pure-Python wheels: {done.stderr.strip()[-800:]}")


def lock_requirements(requirements: Sequence[str], lock_path: Path) -> PackageLock:
    """Pin ``requirements`` (``name==version``, with their dependencies) into the lock at
    ``lock_path`` (entries already there are kept unless a requirement names them again)."""
    unpinned = [r for r in requirements if "==" not in r]
    if unpinned:
        raise FetchError(f"pin each requirement to one version (name==version): {', '.join(unpinned)}")
    with tempfile.TemporaryDirectory() as tmp:
        _pip(["--dest", tmp, *requirements])
        entries = {}
        for wheel in sorted(Path(tmp).glob("*.whl")):
            try:
                info = read_wheel(wheel)
            except WheelError as exc:
                raise FetchError(str(exc)) from None
            entries[info.name] = LockedPackage(info.name, info.version, wheel.name, sha256_of(wheel),
                                               info.imports, info.requires)
        # what pip installed for the guest's Python (its markers evaluated) is what each requires
        entries = {n: replace(e, requires=tuple(r for r in e.requires if r in entries)) for n, e in entries.items()}
    previous = dict(PackageLock.read(lock_path).packages) if lock_path.is_file() else {}
    lock = PackageLock.from_dict(PackageLock({**previous, **entries}).to_dict())  # checks requires
    lock.write(lock_path)
    return lock


def _download(store: PackageStore, pkg: LockedPackage) -> Path:
    """The locked wheel of ``pkg`` in the store's ``wheels/``, downloaded unless there and intact."""
    target = store.wheel_path(pkg)
    if target.is_file() and sha256_of(target) == pkg.sha256:
        return target
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(f"{pkg.name}=={pkg.version} --hash=sha256:{pkg.sha256}\n")
        _pip(["--no-deps", "--require-hashes", "--dest", tmp, "-r", str(requirements)])
        got = Path(tmp) / pkg.wheel
        if not got.is_file():
            raise FetchError(f"pip did not fetch {pkg.wheel}")
        if sha256_of(got) != pkg.sha256:
            raise FetchError(f"{pkg.wheel}: sha256 is not the lock's")
        os.replace(got, target)
    return target


def compile_in_guest(folder: Path) -> None:
    """Compile every module under ``folder`` to ``__pycache__`` with the guest's CPython (a run of
    the default runtime with ``folder`` as its ``/out``), as unchecked-hash ``.pyc`` files: the
    folder is read-only to runs, so no source is compared or recompiled at import."""
    from ..limits import Limits
    from ..sandbox import Sandbox

    code = ("import compileall, py_compile, sys\n"
            "ok = compileall.compile_dir('/out', quiet=1, workers=1,\n"
            "    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
            "sys.exit(0 if ok else 1)\n")
    files = sum(len(f) for _, _, f in os.walk(folder))
    size_mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / (1 << 20)
    limits = Limits(cpu_seconds=600, wall_seconds=1800, memory_mb=1024, disk_mb=size_mb * 3 + 64,
                    max_files=min(100_000, files * 3 + 256))
    sandbox = Sandbox(prestart=0)
    try:
        result = sandbox.run(code, out_dir=str(folder), limits=limits)
    finally:
        sandbox.close()
    if not result.ok:
        raise FetchError(f"compiling {folder.name} in the guest failed: {result.status.value}: "
                         f"{(result.message or result.stderr)[-500:]}")


def fetch(store: PackageStore, compile_pyc: Compiler = compile_in_guest,
          progress: Callable[[str], None] | None = None) -> list[LockedPackage]:
    """Make every package of the store's lock ready: downloaded and checked (the browser tier
    serves the wheels), and, unless the image has it, unpacked and compiled for the server tier;
    return the ones that were not ready before. Each is built in a temporary folder and renamed
    into place once complete, so a failure leaves nothing half-made."""
    done = []
    modules = image_modules()
    for pkg in store.lock.packages.values():
        if store.is_ready(pkg) or (store.in_image(pkg, modules) and store.wheel_path(pkg).is_file()):
            continue
        if progress:
            progress(f"{pkg.name} {pkg.version}: fetching")
        wheel = _download(store, pkg)
        if store.in_image(pkg, modules):  # the server tier's image has it: the wheel is the browser's
            done.append(pkg)
            continue
        target = store.folder(pkg)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{pkg.folder_name}-", dir=target.parent))
        try:
            unpack_wheel(wheel, stage)
            if progress:
                progress(f"{pkg.name} {pkg.version}: compiling in the guest")
            compile_pyc(stage)
            (stage / COMPLETE).write_text(pkg.sha256 + "\n")
            try:
                os.rename(stage, target)
            except OSError:  # made meanwhile by another fetch: that one is whole (renamed the same way)
                shutil.rmtree(stage, ignore_errors=True)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        done.append(pkg)
    return done
