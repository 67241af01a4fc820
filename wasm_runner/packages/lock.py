"""The operator's package lock: the pinned, pure-Python wheels runs may ask for, with their sha256.

The lock is a JSON file the operator commits (``wasm-runner packages lock``, docs/configuration.md);
the wheels themselves are fetched at install time (``wasm-runner packages fetch``) and never
committed. Each entry names one distribution: its version, its wheel's file name and sha256, the
top-level modules it provides (what ``import`` names) and the distributions it needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import WasmRunnerError

__all__ = ["FORMAT", "LockError", "LockedPackage", "PackageLock", "normalize"]

FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_WHEEL = re.compile(r"^[A-Za-z0-9_.+!-]+\.whl$")


class LockError(WasmRunnerError, ValueError):
    """A lock file that cannot be read or used; the message names the file and what is wrong."""


def normalize(name: str) -> str:
    """A distribution's canonical name (PEP 503): ``Foo_Bar`` and ``foo-bar`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution: ``name`` (canonical), ``version``, its wheel (``wheel``, ``sha256``),
    the top-level modules it provides (``imports``) and the distributions it requires."""

    name: str
    version: str
    wheel: str
    sha256: str
    imports: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()

    @property
    def folder_name(self) -> str:
        """Its unpacked folder's name in the cache (the wheel's hash in it: a new wheel, a new folder)."""
        return f"{self.name}-{self.version}-{self.sha256[:16]}"


@dataclass(frozen=True)
class PackageLock:
    """The distributions runs may ask for (canonical name -> ``LockedPackage``)."""

    packages: Mapping[str, LockedPackage]

    @classmethod
    def read(cls, path: Path) -> PackageLock:
        """The lock in ``path``; ``LockError`` for a missing, unreadable or inconsistent file."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise LockError(f"cannot read the package lock {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise LockError(f"the package lock {path} is not JSON: {exc}") from None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise LockError(f"the package lock {path} is not valid: {exc}") from None

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PackageLock:
        if data.get("format") != FORMAT:
            raise ValueError(f"format must be {FORMAT}")
        raw = data["packages"]
        if not isinstance(raw, dict):
            raise TypeError("packages must be an object")
        packages: dict[str, LockedPackage] = {}
        for key, entry in raw.items():
            pkg = LockedPackage(name=normalize(key), version=str(entry["version"]), wheel=str(entry["wheel"]),
                                sha256=str(entry["sha256"]), imports=tuple(entry.get("imports", ())),
                                requires=tuple(normalize(r) for r in entry.get("requires", ())))
            if not _NAME.match(key) or not _WHEEL.match(pkg.wheel) or "/" in pkg.wheel:
                raise ValueError(f"{key!r}: bad name or wheel file name")
            if not _SHA256.match(pkg.sha256):
                raise ValueError(f"{key!r}: sha256 must be 64 hex digits")
            if not all(m.isidentifier() for m in pkg.imports):
                raise ValueError(f"{key!r}: imports must be module names")
            packages[pkg.name] = pkg
        lock = cls(packages)
        for pkg in packages.values():
            missing = [r for r in pkg.requires if r not in packages]
            if missing:
                raise ValueError(f"{pkg.name} requires {', '.join(missing)}, which the lock does not pin")
        return lock

    def to_dict(self) -> dict[str, object]:
        entries = {}
        for name in sorted(self.packages):
            entry = asdict(self.packages[name])
            del entry["name"]
            entry["imports"], entry["requires"] = list(entry["imports"]), list(entry["requires"])
            entries[name] = entry
        return {"format": FORMAT, "packages": entries}

    def write(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)

    def module_owner(self) -> dict[str, str]:
        """Top-level module name -> the distribution that provides it."""
        return {module: pkg.name for pkg in self.packages.values() for module in pkg.imports}

    def closure(self, names: Iterable[str]) -> list[LockedPackage]:
        """``names`` (canonical, all in the lock) and everything they require, sorted by name."""
        seen: dict[str, LockedPackage] = {}
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen[name] = self.packages[name]
            todo.extend(seen[name].requires)
        return [seen[n] for n in sorted(seen)]
