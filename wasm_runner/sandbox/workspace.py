"""Run folders: the host folders of one instance (scratch, tmp, an optional /out) and its grants.

Every sandbox has a private base folder (mode 0700) under ``work_root()``; every instance gets a
fresh run folder beneath it, removed when the instance ends. Folders left behind by processes that
were killed are swept when the next sandbox starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..environment import WORKDIR
from ..grants import DiskQuota, Grant
from ..inputs import upload_path
from ..limits import Limits

__all__ = [
    "MAX_FILES_OUT_BYTES",
    "Workspace",
    "extra_grant",
    "make_workspace",
    "place_files",
    "sweep_stale",
    "work_root",
    "write_upload",
]

MAX_FILES_OUT_BYTES = 64 << 20  # what a run's /out may return in Result.files


@dataclass
class Workspace:
    """The host folders of one instance: its run folder (scratch, tmp) and the grants."""

    root: Path
    grants: list[Grant]
    quota: DiskQuota
    out: Grant | None
    scratch: Grant
    data: Grant | None = None
    extra: list[Grant] = field(default_factory=list)

    def close(self) -> None:
        for g in self.extra:
            g.close()
        for g in self.grants:
            g.close()
        shutil.rmtree(self.root, ignore_errors=True)


def work_root() -> str | None:
    """Where run folders go: ``$WASM_RUNNER_WORKDIR``, else /dev/shm (memory: fast to make and
    remove, and bounded by each run's quota), else the system's temporary folder."""
    env = WORKDIR.text()
    if env:
        return env
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return None


def sweep_stale(root: str | None) -> None:
    """Remove run folders left by wasm-runner processes that died without cleaning up (killed)."""
    base = Path(root or tempfile.gettempdir())
    try:
        entries = list(base.glob("wasm-runner-*-*"))
    except OSError:
        return
    for d in entries:
        pid = d.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if d.is_symlink() or os.lstat(d).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)  # its process is gone
        except OSError:
            continue


def write_upload(root: Path, name: str, data: bytes, *, replace: bool) -> str:
    """Write ``data`` to ``root/<upload_path(name)>`` without following links; the relative path."""
    rel = upload_path(name)
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"file {name!r} content must be bytes")
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = os.O_TRUNC if replace else os.O_EXCL
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | mode | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return rel


def place_files(root: Path, files: dict[str, bytes]) -> None:
    """Place the files given to a run in its scratch folder (each name checked first)."""
    for name, data in files.items():
        write_upload(root, name, data, replace=False)


def make_workspace(
    base: Path,
    fixed: list[tuple[str, str]],
    limits: Limits,
    data_dir: str | os.PathLike[str] | None,
    out_dir: str | os.PathLike[str] | None,
    files: dict[str, bytes] | None,
    collect_out: bool,
    placeholders: bool = False,
) -> Workspace:
    """A fresh run folder under ``base``: scratch and tmp (writable), the read-only ``fixed``
    folders (guest path, host path: stdlib, wrapper, packages), ``/data`` and ``/out`` when given. ``placeholders``: a
    warm slot, whose /data and /out exist now and are bound at hand-over."""
    root = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    try:
        (root / "scratch").mkdir(mode=0o700)
        (root / "tmp").mkdir(mode=0o700)
        if placeholders:
            (root / "data").mkdir(mode=0o700)
            data_dir, collect_out = root / "data", True
        if files:
            place_files(root / "scratch", files)
        grants = [Grant(guest_path, host, writable=False) for guest_path, host in fixed]
        scratch = Grant("/scratch", str(root / "scratch"), writable=True)
        grants += [scratch, Grant("/tmp", str(root / "tmp"), writable=True)]
        data: Grant | None = None
        if data_dir is not None:
            if not Path(data_dir).is_dir():
                raise ValueError(f"data_dir {str(data_dir)!r} is not a directory")
            data = Grant("/data", str(data_dir), writable=False)
            grants.append(data)
        out: Grant | None = None
        if out_dir is None and collect_out:
            (root / "out").mkdir(mode=0o700)
            out_dir = root / "out"
        if out_dir is not None:
            if not Path(out_dir).is_dir():
                raise ValueError(f"out_dir {str(out_dir)!r} is not a directory")
            out = Grant("/out", str(out_dir), writable=True)
            grants.append(out)
        quota = DiskQuota(limits.disk_bytes, int(limits.max_files))
        for g in grants:
            g.open()
            if g.writable:
                quota.count_existing(g)
        return Workspace(root, grants, quota, out, scratch, data)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def extra_grant(ws: Workspace, guest_path: str, host: Any, *, writable: bool) -> Grant | None:
    """An opened grant of ``host`` at ``guest_path`` owned by ``ws``, or None without a host folder."""
    if host is None:
        return None
    if not Path(host).is_dir():
        raise ValueError(f"{guest_path.strip('/')}_dir {str(host)!r} is not a directory")
    g = Grant(guest_path, str(host), writable=writable)
    g.open()
    ws.extra.append(g)
    return g
