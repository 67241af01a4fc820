"""A local copy of the official Pyodide release, as the source of compiled packages.

Compiled Pyodide packages (numpy, pandas, …) are on no registry this project can reach, so a
school that runs offline downloads the release once elsewhere (``pyodide-<version>.tar.bz2``)
and imports its packages with ``wasm-runner wheelhouse --from-release PATH [NAME...]``. This
module reads that copy (a folder, or the archive, extracted with ``archives.safe_extract``),
checks that it is the same Pyodide as ``web/package.json`` pins (version, and the ABI in its
lock), picks the packages asked for plus their dependencies from its ``pyodide-lock.json``, and
copies their files after checking each one's sha256 against that lock.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import WasmRunnerError

__all__ = ["Release", "ReleaseError", "canonical_name", "declared_pyodide_version", "find_release_root"]

LOCK = "pyodide-lock.json"


class ReleaseError(WasmRunnerError, ValueError):
    """A release that cannot be imported; ``code`` is stable, the message says what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def canonical_name(name: str) -> str:
    """A package name as Pyodide's lock keys it (PEP 503: lower case, runs of -_. as one -)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_pyodide_version(web: Path) -> str:
    """The Pyodide version ``web/package.json`` pins (its ``dependencies.pyodide``)."""
    package = json.loads((web / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"]["pyodide"]).lstrip("=^~ ")


def find_release_root(folder: Path) -> Path:
    """The folder holding ``pyodide-lock.json``: ``folder`` itself or one level down (the
    release archive unpacks into ``pyodide/``)."""
    if (folder / LOCK).is_file():
        return folder
    found = [child for child in sorted(folder.iterdir()) if (child / LOCK).is_file()] if folder.is_dir() else []
    if len(found) != 1:
        raise ReleaseError("release_not_found", f"{folder} is not a Pyodide release: no {LOCK} in it"
                           + (" (more than one sub-folder has one)" if found else ""))
    return found[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Release:
    """A release folder and its lock (as ``pyodide-lock`` read it)."""

    root: Path
    lock: dict[str, Any]
    version: str

    @classmethod
    def open(cls, root: Path, lock: dict[str, Any], raw_info: dict[str, Any]) -> Release:
        """Wrap a release whose lock was read; its version comes from the lock's ``info.version``
        (older schema) or the release's ``package.json``."""
        version = str(raw_info.get("version") or "")
        if version in ("", "0.0.0") and (root / "package.json").is_file():
            try:
                version = str(json.loads((root / "package.json").read_text(encoding="utf-8")).get("version", ""))
            except (ValueError, OSError):
                version = ""
        return cls(root, lock, version)

    def check_matches(self, expected_version: str, installed_info: dict[str, Any]) -> None:
        """Refuse a release of another Pyodide than the one served (its wheels would not load)."""
        if not self.version:
            raise ReleaseError("release_version_unknown", f"{self.root}: cannot tell which Pyodide version this "
                               f"release is (no info.version in {LOCK}, no package.json); expected {expected_version}")
        if self.version != expected_version:
            raise ReleaseError("release_version_mismatch", f"{self.root} is Pyodide {self.version}, but this server "
                               f"runs Pyodide {expected_version} (web/package.json): download pyodide-"
                               f"{expected_version}.tar.bz2 instead")
        info = self.lock.get("info", {})
        for key in ("abi_version", "platform", "python", "arch"):
            if installed_info.get(key) is not None and info.get(key) != installed_info.get(key):
                raise ReleaseError("release_abi_mismatch", f"{self.root}: {LOCK} says {key} {info.get(key)!r}, "
                                   f"the installed Pyodide {expected_version} has {installed_info.get(key)!r}")

    def select(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The lock entries of ``names`` and everything they depend on (all with no names)."""
        packages: dict[str, dict[str, Any]] = self.lock.get("packages", {})
        wanted = [canonical_name(n) for n in names] or list(packages)
        by_canonical = {canonical_name(key): key for key in packages}
        unknown = [n for n in wanted if n not in by_canonical]
        if unknown:
            raise ReleaseError("release_unknown_package", f"not in this release's {LOCK}: {', '.join(unknown)}")
        chosen: dict[str, dict[str, Any]] = {}
        pending = [by_canonical[n] for n in wanted]
        while pending:
            key = pending.pop()
            if key in chosen:
                continue
            chosen[key] = packages[key]
            for dependency in packages[key].get("depends", []):
                if canonical_name(dependency) not in by_canonical:
                    raise ReleaseError("release_broken_lock", f"{LOCK}: {key} depends on {dependency}, "
                                       "which the lock does not list")
                pending.append(by_canonical[canonical_name(dependency)])
        return chosen

    def copy_checked(self, entries: dict[str, dict[str, Any]], target: Path) -> None:
        """Copy each entry's file into ``target`` after checking its sha256 against the lock.

        A file that is missing, not a plain local name or whose hash differs is refused with a
        ``ReleaseError`` naming it (the caller discards ``target``: no partial wheelhouse).
        """
        for name, entry in sorted(entries.items()):
            file_name = str(entry.get("file_name", ""))
            if not file_name or "://" in file_name or "/" in file_name or "\\" in file_name or file_name.startswith("."):
                raise ReleaseError("release_bad_file_name", f"{LOCK}: {name} names {file_name!r}, not a file in "
                                   "the release folder")
            source = self.root / file_name
            if not source.is_file():
                raise ReleaseError("release_file_missing", f"{name}: {file_name} is listed in {LOCK} but missing "
                                   f"from {self.root}")
            destination = target / file_name
            shutil.copyfile(source, destination)
            actual = _sha256(destination)  # hash the copy: what is served is what was checked
            if actual != entry.get("sha256"):
                raise ReleaseError("release_hash_mismatch", f"{file_name}: sha256 {actual} does not match "
                                   f"{LOCK} ({entry.get('sha256')}); the file is damaged or was changed, "
                                   "refusing the import (download the release again)")
