"""Extracting a downloaded archive (the Pyodide release, a source distribution) safely.

Only regular files and folders are written, each strictly inside the target folder: a member
with an absolute name, a ``..`` step, a drive letter, a symlink or hard link, a device or a FIFO
refuses the whole archive (``ArchiveError``) before anything is written, so a crafted archive
can neither write outside the target nor plant a link that a later step would follow. An archive
that would unpack to more than ``MAX_TOTAL_BYTES`` or ``MAX_MEMBERS`` (a decompression bomb, or
not a Pyodide release: the full release unpacks to well under 2 GiB) is refused the same way.
"""

from __future__ import annotations

import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from ..errors import WasmRunnerError

__all__ = ["ARCHIVE_SUFFIXES", "MAX_MEMBERS", "MAX_TOTAL_BYTES", "ArchiveError", "is_archive", "safe_extract"]

ARCHIVE_SUFFIXES = (".tar.bz2", ".tar.gz", ".tgz", ".tar.xz", ".tar", ".zip")
MAX_TOTAL_BYTES = 8 << 30  # what the members may add up to, unpacked
MAX_MEMBERS = 100_000


class ArchiveError(WasmRunnerError, ValueError):
    """An archive that cannot be extracted safely; ``code`` is stable, the message names the member."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def is_archive(path: Path) -> bool:
    """Whether ``path`` names an archive kind ``safe_extract`` reads."""
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _checked_name(archive: Path, name: str) -> PurePosixPath:
    normalized = name.replace("\\", "/")
    pure = PurePosixPath(normalized)
    if (
        not normalized
        or normalized.startswith("/")
        or ":" in pure.parts[0]
        or any(part == ".." for part in pure.parts)
    ):
        raise ArchiveError("unsafe_archive", f"{archive.name}: refused, member {name!r} would land outside the folder")
    return PurePosixPath(*[part for part in pure.parts if part not in ("", ".")])


def _inside(target: Path, relative: PurePosixPath) -> Path:
    path = (target / relative).resolve()
    if path != target and target not in path.parents:
        raise ArchiveError("unsafe_archive", f"refused, member {str(relative)!r} would land outside the folder")
    return path


def _check_size(archive: Path, sizes: list[int]) -> None:
    if len(sizes) > MAX_MEMBERS or sum(sizes) > MAX_TOTAL_BYTES:
        raise ArchiveError(
            "archive_too_large",
            f"{archive.name}: refused, {len(sizes)} members unpacking to {sum(sizes) >> 20} MiB "
            f"(at most {MAX_MEMBERS} members and {MAX_TOTAL_BYTES >> 30} GiB)",
        )


def safe_extract(archive: Path, target: Path) -> None:
    """Extract ``archive`` (``ARCHIVE_SUFFIXES``) into ``target`` (made if missing).

    Every member is checked first; any unsafe member refuses the archive with nothing written.
    """
    if not is_archive(archive):
        raise ArchiveError("unknown_archive", f"{archive.name}: not an archive kind this reads ({', '.join(ARCHIVE_SUFFIXES)})")
    target.mkdir(parents=True, exist_ok=True)
    target = target.resolve()
    try:
        if archive.name.lower().endswith(".zip"):
            _extract_zip(archive, target)
        else:
            _extract_tar(archive, target)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ArchiveError("bad_archive", f"{archive.name}: cannot be read ({exc})") from exc


def _extract_tar(archive: Path, target: Path) -> None:
    with tarfile.open(archive, "r:*") as tar:
        members = tar.getmembers()
        plan = []
        for member in members:
            relative = _checked_name(archive, member.name)
            if not (member.isfile() or member.isdir()):
                kind = "a link" if member.issym() or member.islnk() else "not a regular file"
                raise ArchiveError("unsafe_archive", f"{archive.name}: refused, member {member.name!r} is {kind}")
            plan.append((member, _inside(target, relative)))
        _check_size(archive, [member.size for member, _ in plan])
        for member, path in plan:
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:  # pragma: no cover - isfile() members always have data
                continue
            with source, path.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)


def _extract_zip(archive: Path, target: Path) -> None:
    with zipfile.ZipFile(archive) as zipped:
        plan = []
        for info in zipped.infolist():
            relative = _checked_name(archive, info.filename)
            mode = info.external_attr >> 16
            if mode and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ArchiveError("unsafe_archive", f"{archive.name}: refused, member {info.filename!r} is a link "
                                   "or not a regular file")
            plan.append((info, _inside(target, relative)))
        _check_size(archive, [info.file_size for info, _ in plan])  # zipfile reads no more than these
        for info, path in plan:
            if info.is_dir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as source, path.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
