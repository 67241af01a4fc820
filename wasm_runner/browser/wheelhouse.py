"""The browser tier's local wheelhouse and its rewritten ``pyodide-lock.json``.

Pyodide installs packages listed in its lock file. The stock lock names files relative to the
official package index and pins their hashes, so a local wheel cannot simply be dropped in. This
module builds ``web/wheelhouse/``: pure-Python wheels (``py3-none-any``) fetched with pip, plus
``wheelhouse.json`` holding lock entries for them (name, version, sha256, imports, depends). The
server merges those entries into the stock lock at start-up (``rewrite_lock``): local wheels get
relative file names (served next to Pyodide), every other package an absolute URL on the
configured package index (default: the official index for the exact Pyodide version).

Command: ``wasm-runner wheelhouse PACKAGE... [--requirements FILE] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from .locations import OFFICIAL_INDEX_TEMPLATE, package_index_url, pyodide_version, web_dir, wheelhouse_dir

__all__ = [
    "OFFICIAL_INDEX_TEMPLATE",
    "build_wheelhouse",
    "lock_entry",
    "main",
    "rewrite_lock",
]

_PURE_WHEEL = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-none-any\.whl$"
)


def _is_absolute(url: str) -> bool:
    return "://" in url


def rewrite_lock(
    stock: dict[str, Any], index_url: str, local: dict[str, Any]
) -> dict[str, Any]:
    """The lock Pyodide should use: stock packages from ``index_url``, ``local`` ones beside it.

    With an empty ``index_url`` (offline) the stock packages are left out, so an import of one
    fails with a plain ``ModuleNotFoundError`` instead of a network error.
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


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_entry(wheel: Path) -> dict[str, Any]:
    """A lock entry for one pure-Python wheel: hash, version, top-level imports, dependencies."""
    match = _PURE_WHEEL.match(wheel.name)
    if not match:
        raise ValueError(f"{wheel.name} is not a pure-Python wheel (*-none-any.whl)")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(metadata_name).decode("utf-8", "replace")
        top_level_name = next(
            (n for n in names if n.endswith(".dist-info/top_level.txt")), None
        )
        if top_level_name:
            imports = [
                line.strip()
                for line in archive.read(top_level_name).decode().splitlines()
                if line.strip()
            ]
        else:
            imports = sorted(
                {
                    n.split("/")[0].removesuffix(".py")
                    for n in names
                    if not n.split("/")[0].endswith((".dist-info", ".data"))
                }
            )
    name = next(
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Name:")
    )
    version = next(
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Version:")
    )
    depends = []
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            requirement = line.split(":", 1)[1].strip()
            depends.append(
                _canonical(re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0])
            )
    return {
        "name": _canonical(name),
        "version": version,
        "file_name": wheel.name,
        "install_dir": "site",
        "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "package_type": "package",
        "imports": [i for i in imports if i.isidentifier()],
        "depends": depends,
        "unvendored_tests": False,
    }


def build_wheelhouse(
    requirements: list[str],
    out: Path,
    python_version: str = "3.14",
    find_links: Path | None = None,
) -> dict[str, Any]:
    """Fetch pure-Python wheels for ``requirements`` (with dependencies) into ``out``.

    Writes ``out/wheelhouse.json`` and returns its content. A requirement that has no pure
    wheel is refused with ``ValueError`` naming it.
    """
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--dest",
            tmp,
            "--only-binary",
            ":all:",
            "--platform",
            "any",
            "--python-version",
            python_version,
            "--implementation",
            "py",
            "--abi",
            "none",
            *requirements,
        ]
        if find_links is not None:  # offline: wheels from a local folder only
            command += ["--no-index", "--find-links", str(find_links)]
        completed = subprocess.run(command, check=False, capture_output=True, text=True)
        if completed.returncode != 0:
            raise ValueError(
                f"pip could not fetch pure-Python wheels: {completed.stderr.strip()[-800:]}"
            )
        entries: dict[str, Any] = {}
        for wheel in sorted(Path(tmp).glob("*.whl")):
            entry = lock_entry(wheel)
            (out / wheel.name).write_bytes(wheel.read_bytes())
            entries[entry["name"]] = entry
    # dependencies not in the wheelhouse are left to the stock lock (e.g. numpy)
    manifest = {"packages": entries}
    (out / "wheelhouse.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    )
    return manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("packages", nargs="*", help="requirements, e.g. 'rich==13.9.4'")
    parser.add_argument("-r", "--requirements", type=Path, help="a requirements file")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="wheelhouse folder (default: web/wheelhouse)",
    )
    parser.add_argument(
        "--find-links",
        type=Path,
        default=None,
        help="take wheels from this folder only (offline)",
    )
    parser.add_argument(
        "--index-url",
        default=None,
        help="package index for compiled packages (written into the preview lock)",
    )


def run_command(args: argparse.Namespace) -> int:
    requirements = list(args.packages)
    if args.requirements:
        try:
            lines = args.requirements.read_text().splitlines()
        except OSError as exc:
            print(
                f"wasm-runner wheelhouse: cannot read {args.requirements}: {exc.strerror}",
                file=sys.stderr,
            )
            return 2
        requirements += [
            line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()
        ]
    if not requirements:
        print(
            "wasm-runner wheelhouse: name at least one package or --requirements FILE",
            file=sys.stderr,
        )
        return 2
    root = web_dir()
    out = args.out or wheelhouse_dir(root)
    try:
        manifest = build_wheelhouse(requirements, out, find_links=args.find_links)
    except ValueError as exc:
        print(f"wasm-runner wheelhouse: {exc}", file=sys.stderr)
        return 1
    version = pyodide_version(root)
    index_url = (
        args.index_url if args.index_url is not None else package_index_url(version)
    )
    stock = json.loads(
        (root / "node_modules" / "pyodide" / "pyodide-lock.json").read_text()
    )
    lock = rewrite_lock(stock, index_url, manifest["packages"])
    (out / "pyodide-lock.json").write_text(json.dumps(lock, indent=1) + "\n")
    names = ", ".join(
        f"{e['name']} {e['version']}" for e in manifest["packages"].values()
    )
    print(f"wheelhouse {out}: {names}")
    print(
        f"lock: {out / 'pyodide-lock.json'} (compiled packages from {index_url or 'nowhere: offline'})"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="wasm-runner wheelhouse", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
