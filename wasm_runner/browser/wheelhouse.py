"""The browser tier's local wheelhouse and its rewritten ``pyodide-lock.json``.

Pyodide installs packages listed in its lock file. The stock lock names files relative to the
official package index and pins their hashes, so a local wheel cannot simply be dropped in. This
module builds ``web/wheelhouse/``: wheels plus ``wheelhouse.json``, a lock (same schema, written
by ``pyodide-lock``) holding only the local entries. The server merges those entries into the
stock lock at start-up (``rewrite_lock``): local files get relative names (served next to
Pyodide), every other package an absolute URL on the configured package index (default: the
official index for the exact Pyodide version).

What goes in (``wasm-runner wheelhouse``, see docs/cli.md):

- the operator's package lock (``--from-lock``, ``wasm_runner.packages``): the same pinned wheels
  the server tier mounts, taken from the cache ``wasm-runner packages fetch`` filled, each file's
  sha256 checked against the lock first, so both tiers offer the same names at the same versions;

- pure-Python wheels (``py3-none-any``) fetched with pip, or built from a pure-Python source
  distribution with ``pypa build``; their lock entries come from ``pyodide-lock``
  (``add_wheels_to_spec``), which also checks their dependencies;
- compiled packages from a local copy of the official Pyodide release (``--from-release``, a
  folder or the release archive): the packages named plus their dependencies, every file's
  sha256 checked against the release's lock (``release``);
- optionally ``pyodide py-compile`` (``--py-compile``) so the new wheels carry ``.pyc`` files.

Each run builds the new wheelhouse in a staging folder beside the target and swaps it in only
when everything succeeded, so a refused import leaves the old wheelhouse as it was.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import WasmRunnerError
from ..packages.lock import LockError
from ..packages.store import PackageStore
from ..packages.wheels import sha256_of
from .archives import ArchiveError, is_archive, safe_extract
from .locations import OFFICIAL_INDEX_TEMPLATE, package_index_url, pyodide_version, web_dir, wheelhouse_dir
from .pyodide_tools import ToolError, build_sdist, lock_tool, py_compile
from .release import Release, ReleaseError, declared_pyodide_version, find_release_root

__all__ = [
    "MANIFEST",
    "OFFICIAL_INDEX_TEMPLATE",
    "WheelhouseError",
    "build_wheelhouse",
    "import_release",
    "main",
    "read_manifest",
    "rewrite_lock",
]

MANIFEST = "wheelhouse.json"


class WheelhouseError(WasmRunnerError, ValueError):
    """A refused wheelhouse job; ``code`` is stable, the message says what went wrong."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _is_absolute(url: str) -> bool:
    return "://" in url


def rewrite_lock(
    stock: dict[str, Any], index_url: str, local: dict[str, Any]
) -> dict[str, Any]:
    """The lock Pyodide should use: stock packages from ``index_url``, ``local`` ones beside it.

    With an empty ``index_url`` (offline) the stock packages are left out, so the lock names
    only local files and an import of anything else fails with a plain ``ModuleNotFoundError``
    instead of a network error.
    """
    lock = copy.deepcopy(stock)
    packages: dict[str, Any] = {}
    if index_url:
        for name, entry in lock.get("packages", {}).items():
            if not _is_absolute(entry["file_name"]):
                entry["file_name"] = index_url + entry["file_name"]
            packages[name] = entry
    for name, entry in local.items():
        packages[name] = dict(entry)
    lock["packages"] = packages
    return lock


def read_manifest(folder: Path) -> dict[str, Any]:
    """The local entries of the wheelhouse in ``folder`` (empty when there is none)."""
    path = folder / MANIFEST
    if not path.is_file():
        return {}
    packages: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")).get("packages", {})
    return packages


def _stock_lock_path(web: Path) -> Path:
    return web / "node_modules" / "pyodide" / "pyodide-lock.json"


@contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A copy of ``out`` (hard links) to change; swapped in for ``out`` only if the block succeeds."""
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and not out.is_dir():
        raise WheelhouseError("out_not_folder", f"{out} is not a folder")
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        if out.is_dir():
            shutil.copytree(out, stage, copy_function=os.link, dirs_exist_ok=True)
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    stage.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def _write_manifest(stage: Path, web: Path, added: dict[str, Any]) -> dict[str, Any]:
    """Merge ``added`` into the staged manifest (written by pyodide-lock); drop superseded files."""
    previous = read_manifest(stage)
    packages = {**previous, **added}
    kept = {entry["file_name"] for entry in packages.values()}
    for entry in previous.values():
        if entry["file_name"] not in kept:
            (stage / entry["file_name"]).unlink(missing_ok=True)
    (stage / MANIFEST).unlink(missing_ok=True)  # a hard link to the live manifest: never write through
    lock_tool({"op": "write", "lock": str(_stock_lock_path(web)), "packages": packages, "out": str(stage / MANIFEST)})
    return packages


def _compile(folder: Path, web: Path, entries: dict[str, Any]) -> dict[str, Any]:
    """``pyodide py-compile`` the files of ``entries`` in ``folder``; the entries with new names/hashes."""
    lock_path = folder / "pyodide-lock.json"
    lock_tool({"op": "write", "lock": str(_stock_lock_path(web)), "packages": entries, "out": str(lock_path)})
    py_compile(folder, web / "node_modules" / "pyodide")
    compiled: dict[str, Any] = json.loads(lock_path.read_text(encoding="utf-8"))["packages"]
    lock_path.unlink()
    return compiled


def _move_in(source: Path, stage: Path, entries: dict[str, Any]) -> None:
    for entry in entries.values():
        target = stage / entry["file_name"]
        target.unlink(missing_ok=True)  # a hard link to the old wheelhouse's file: replace, never write through
        shutil.move(str(source / entry["file_name"]), target)


def _pip_download(requirements: list[str], dest: Path, python_version: str, find_links: Path | None) -> None:
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest),
        "--only-binary", ":all:", "--platform", "any", "--python-version", python_version,
        "--implementation", "py", "--abi", "none", *requirements,
    ]
    if find_links is not None:  # offline: wheels from a local folder only
        command += ["--no-index", "--find-links", str(find_links)]
    completed = subprocess.run(command, check=False, capture_output=True, text=True)
    if completed.returncode != 0:
        raise WheelhouseError("pip_failed", f"pip could not fetch pure-Python wheels: {completed.stderr.strip()[-800:]}")


def build_wheelhouse(
    requirements: list[str],
    out: Path,
    python_version: str = "3.14",
    find_links: Path | None = None,
    sdists: list[Path] | None = None,
    compile_pyc: bool = False,
    web: Path | None = None,
) -> dict[str, Any]:
    """Add pure-Python wheels for ``requirements`` (with dependencies, via pip) and for ``sdists``
    (built with pypa build) to the wheelhouse in ``out``; return the entries added.

    Lock entries come from ``pyodide-lock``, checked against the stock lock plus the wheelhouse
    (a dependency found in neither is refused). A requirement with no pure wheel is refused.
    """
    web = web or web_dir()
    with tempfile.TemporaryDirectory() as tmp, _staging(out) as stage:
        new = Path(tmp) / "new"
        new.mkdir()
        if requirements:
            _pip_download(requirements, new, python_version, find_links)
        for sdist in sdists or []:
            build_sdist(sdist, new)
        wheels = sorted(new.glob("*.whl"))
        if not wheels:
            raise WheelhouseError("nothing_to_add", "no wheels to add")
        base_lock = json.loads(_stock_lock_path(web).read_text(encoding="utf-8"))
        base_lock["packages"].update(read_manifest(stage))
        base_path = Path(tmp) / "base-lock.json"
        base_path.write_text(json.dumps(base_lock), encoding="utf-8")
        added: dict[str, Any] = lock_tool({"op": "add_wheels", "lock": str(base_path), "wheels": [str(w) for w in wheels],
                           "base": str(new)})["packages"]
        if compile_pyc:
            added = _compile(new, web, added)
        _move_in(new, stage, added)
        _write_manifest(stage, web, added)
    return added


def import_release(
    release_path: Path,
    names: list[str],
    out: Path,
    compile_pyc: bool = False,
    web: Path | None = None,
) -> dict[str, Any]:
    """Add packages of a local Pyodide release (folder or archive) to the wheelhouse in ``out``.

    ``names`` and their dependencies (all packages when empty) are taken from the release's
    ``pyodide-lock.json``, each file checked against its sha256 there. The release must be the
    Pyodide version ``web/package.json`` pins. Returns the entries added.
    """
    web = web or web_dir()
    expected = declared_pyodide_version(web)
    installed_info = json.loads(_stock_lock_path(web).read_text(encoding="utf-8")).get("info", {})
    with tempfile.TemporaryDirectory() as tmp:
        if release_path.is_file():
            safe_extract(release_path, Path(tmp) / "release")
            root = find_release_root(Path(tmp) / "release")
        elif release_path.is_dir():
            root = find_release_root(release_path)
        else:
            raise ReleaseError("release_not_found", f"{release_path} does not exist")
        answer = lock_tool({"op": "read", "lock": str(root / "pyodide-lock.json")})
        release = Release.open(root, answer["lock"], answer["raw_info"])
        release.check_matches(expected, installed_info)
        entries = release.select(names)
        with _staging(out) as stage:
            new = Path(tmp) / "new"
            new.mkdir()
            release.copy_checked(entries, new)
            if compile_pyc:
                entries = _compile(new, web, entries)
            _move_in(new, stage, entries)
            _write_manifest(stage, web, entries)
    return entries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="*", help="requirements, e.g. 'rich==13.9.4', or pure-Python source "
                        "distributions (FILE.tar.gz / .zip); with --from-release: package names of the release")
    parser.add_argument("-r", "--requirements", type=Path, help="a requirements file")
    parser.add_argument("--from-lock", type=Path, metavar="LOCK", help="every package of the operator's package "
                        "lock (wasm-runner packages), from the wheels `wasm-runner packages fetch` checked")
    parser.add_argument("--from-release", type=Path, metavar="PATH", help="a local copy of the official Pyodide "
                        "release: its folder or pyodide-VERSION.tar.bz2 (.tar.gz, .zip)")
    parser.add_argument("--all", action="store_true", help="with --from-release: every package of the release")
    parser.add_argument("--py-compile", action="store_true", help="compile the new wheels to .pyc with "
                        "`pyodide py-compile` (run by Pyodide's own Python in Node)")
    parser.add_argument("--out", type=Path, default=None, help="wheelhouse folder (default: web/wheelhouse)")
    parser.add_argument("--find-links", type=Path, default=None, help="take wheels from this folder only (offline)")
    parser.add_argument("--index-url", default=None,
                        help="package index for the other compiled packages (written into the preview lock)")


def _requirements(args: argparse.Namespace) -> list[str]:
    requirements = list(args.packages)
    if args.requirements:
        try:
            lines = args.requirements.read_text().splitlines()
        except OSError as exc:
            raise WheelhouseError("usage", f"cannot read {args.requirements}: {exc.strerror}") from exc
        requirements += [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]
    return requirements


def _locked_wheels(lock_path: Path) -> tuple[list[str], Path]:
    """The lock's pinned requirements and the folder of their fetched wheels (each one's sha256 checked)."""
    try:
        store = PackageStore.open(lock_path)
    except LockError as exc:
        raise WheelhouseError("lock", str(exc)) from None
    for pkg in store.lock.packages.values():
        wheel = store.wheel_path(pkg)
        if not wheel.is_file() or sha256_of(wheel) != pkg.sha256:
            raise WheelhouseError("lock", f"{pkg.wheel} is not fetched or does not match the lock's sha256: "
                                  "run `wasm-runner packages fetch` first")
    names = [f"{pkg.name}=={pkg.version}" for pkg in store.lock.packages.values()]
    return names, store.root / "wheels"


def run_command(args: argparse.Namespace) -> int:
    root = web_dir()
    out = args.out or wheelhouse_dir(root)
    try:
        requirements = _requirements(args)
        if args.from_lock is not None:
            if requirements or args.from_release is not None:
                raise WheelhouseError("usage", "--from-lock takes every package of the lock: name no other")
            locked, wheels = _locked_wheels(args.from_lock)
            added = build_wheelhouse(locked, out, find_links=wheels, compile_pyc=args.py_compile)
        elif args.from_release is not None:
            if args.requirements or (args.all and requirements) or not (args.all or requirements):
                raise WheelhouseError("usage", "with --from-release, name the release's packages (e.g. numpy "
                                      "pandas) or give --all")
            added = import_release(args.from_release, requirements, out, compile_pyc=args.py_compile)
        else:
            if not requirements:
                raise WheelhouseError("usage", "name at least one package or --requirements FILE")
            sdists = [Path(r) for r in requirements if is_archive(Path(r)) and Path(r).is_file()]
            pip_requirements = [r for r in requirements if Path(r) not in sdists]
            added = build_wheelhouse(pip_requirements, out, find_links=args.find_links, sdists=sdists,
                                     compile_pyc=args.py_compile)
    except WheelhouseError as exc:
        print(f"wasm-runner wheelhouse: {exc}", file=sys.stderr)
        return 2 if exc.code == "usage" else 1
    except (ReleaseError, ArchiveError, ToolError) as exc:
        print(f"wasm-runner wheelhouse: {exc} [{exc.code}]", file=sys.stderr)
        return 1
    version = pyodide_version(root)
    index_url = args.index_url if args.index_url is not None else package_index_url(version)
    stock = json.loads(_stock_lock_path(root).read_text())
    lock = rewrite_lock(stock, index_url, read_manifest(out))
    (out / "pyodide-lock.json").write_text(json.dumps(lock, indent=1) + "\n")
    names = ", ".join(f"{e['name']} {e['version']}" for e in sorted(added.values(), key=lambda e: e["name"]))
    print(f"wheelhouse {out}: added {names}")
    print(f"lock: {out / 'pyodide-lock.json'} (other compiled packages from {index_url or 'nowhere: offline'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="wasm-runner wheelhouse", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
