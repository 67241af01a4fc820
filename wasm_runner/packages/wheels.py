"""Reading a wheel: is it pure Python, what it is, what it imports as, what it requires; and
unpacking it safely (no absolute path, no ``..``, no link) into a folder."""

from __future__ import annotations

import hashlib
import re
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path, PurePosixPath

from ..errors import WasmRunnerError
from .lock import normalize

__all__ = ["WheelError", "WheelInfo", "read_wheel", "sha256_of", "unpack_wheel"]

# name-version(-build)?-python-abi-platform.whl
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


class WheelError(WasmRunnerError, ValueError):
    """A wheel that is refused: not a wheel, not pure Python, or unsafe to unpack."""


@dataclass(frozen=True)
class WheelInfo:
    name: str  # canonical
    version: str
    imports: tuple[str, ...]
    requires: tuple[str, ...]  # canonical names, unconditional dependencies only


def sha256_of(path: Path) -> str:
    """The sha256 of the file ``path`` (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _tags(filename: str) -> re.Match[str]:
    match = _WHEEL_NAME.match(filename)
    if match is None:
        raise WheelError(f"{filename} is not a wheel file name")
    return match


def _requires(metadata: str) -> tuple[str, ...]:
    """The distributions ``Requires-Dist`` names without an ``extra`` marker (what always installs)."""
    message = Parser().parsestr(metadata)
    names = []
    for line in message.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        if "extra" in marker:
            continue
        match = _REQUIREMENT_NAME.match(requirement)
        if match:
            names.append(normalize(match.group(1)))
    return tuple(dict.fromkeys(names))


def read_wheel(path: Path) -> WheelInfo:
    """What ``path`` is; ``WheelError`` unless it is a pure-Python wheel (``py3-none-any``)."""
    tags = _tags(path.name)
    if tags["abi"] != "none" or tags["plat"] != "any" or not any(p.startswith("py3") for p in tags["py"].split(".")):
        raise WheelError(f"{path.name} is not a pure-Python wheel (py3-none-any): the server tier runs "
                         "pure Python only")
    try:
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            dist_info = {PurePosixPath(n).parts[0] for n in names if PurePosixPath(n).parts[0].endswith(".dist-info")}
            if len(dist_info) != 1:
                raise WheelError(f"{path.name} has no single .dist-info folder")
            metadata = wheel.read(f"{dist_info.pop()}/METADATA").decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise WheelError(f"{path.name} is not a readable wheel: {exc}") from None
    message = Parser().parsestr(metadata)
    imports = set()
    for name in names:
        parts = PurePosixPath(name).parts
        if not parts or parts[0].endswith((".dist-info", ".data")):
            continue
        if len(parts) > 1 and parts[0].isidentifier():
            imports.add(parts[0])
        elif len(parts) == 1 and name.endswith(".py") and parts[0][:-3].isidentifier():
            imports.add(parts[0][:-3])
    return WheelInfo(normalize(message["Name"] or tags["name"]), message["Version"] or tags["version"],
                     tuple(sorted(imports)), _requires(metadata))


def unpack_wheel(path: Path, dest: Path) -> None:
    """Unpack the wheel ``path`` into the empty folder ``dest``; its ``.data`` folder (scripts,
    headers) is left out. ``WheelError`` for an entry that would leave ``dest`` or is a link."""
    with zipfile.ZipFile(path) as wheel:
        for info in wheel.infolist():
            parts = PurePosixPath(info.filename).parts
            if not parts or info.filename.startswith("/") or ".." in parts or "\\" in info.filename:
                raise WheelError(f"{path.name}: unsafe entry {info.filename!r}")
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise WheelError(f"{path.name}: {info.filename!r} is a symbolic link")
            if parts[0].endswith(".data"):
                continue
            target = dest.joinpath(*parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with wheel.open(info) as src, open(target, "xb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
