"""Images the container and microVM tiers boot, built from Debian packages and cached.

- rootfs: ``debootstrap --variant=minbase --include=python3,busybox-static bookworm`` (needs root
  and the Debian mirror), under ``~/.cache/wasm-runner/compare/rootfs-bookworm``.
- initramfs for the microVM: python3, the shared libraries it and its extension modules need, the
  standard library (without tests), busybox, and the guest supervisor, as an uncompressed cpio.
  Each run appends a tiny cpio with the program; the kernel unpacks both.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from ..environment import DEBIAN_MIRROR, VM_KERNEL
from ..errors import WasmRunnerError

__all__ = [
    "ImageError", "CpioWriter", "build_initramfs", "build_rootfs", "cache_dir", "find_kernel",
    "initramfs_path", "program_cpio", "rootfs_dir", "rootfs_ready",
]

SUITE = "bookworm"
ROOTFS_PACKAGES = "python3,busybox-static"
READY = ".wasm-runner-ready"
GUEST_SUPERVISOR = Path(__file__).with_name("guest_supervisor.py")
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
                "unittest", "distutils", "venv", "config-3.11-x86_64-linux-gnu"}


class ImageError(WasmRunnerError, RuntimeError):
    """An image cannot be built or found here."""


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "wasm-runner" / "compare"


def rootfs_dir() -> Path:
    return cache_dir() / f"rootfs-{SUITE}"


def rootfs_ready() -> bool:
    return (rootfs_dir() / READY).is_file()


def build_rootfs(progress: Callable[[str], None] = lambda _m: None) -> Path:
    """Build the Debian rootfs once (about a minute); later calls return the cached one."""
    target = rootfs_dir()
    if rootfs_ready():
        return target
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None)
    if not debootstrap:
        raise ImageError("debootstrap not installed (Debian package debootstrap)")
    if os.geteuid() != 0:
        raise ImageError("building the rootfs with debootstrap needs root")
    mirror = DEBIAN_MIRROR.text() or "http://deb.debian.org/debian"
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    progress(f"debootstrap {SUITE} into {tmp} (about a minute)")
    proc = subprocess.run(
        [debootstrap, "--variant=minbase", f"--include={ROOTFS_PACKAGES}", SUITE, str(tmp), mirror],
        capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ImageError(f"debootstrap failed: {(proc.stdout + proc.stderr).strip()[-600:]}")
    (tmp / "scratch").mkdir(exist_ok=True)
    (tmp / READY).write_text(f"{SUITE} {ROOTFS_PACKAGES}\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    return target


def find_kernel() -> Path | None:
    """The newest Debian kernel image under /boot (package linux-image-amd64)."""
    env = VM_KERNEL.text()
    if env:
        return Path(env) if Path(env).is_file() else None
    kernels = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: p.stat().st_mtime)
    readable = [k for k in kernels if os.access(k, os.R_OK)]
    return readable[-1] if readable else None


# ---- cpio (newc) ------------------------------------------------------------------------------

def _cpio_header(name: bytes, mode: int, size: int, ino: int, nlink: int = 1) -> bytes:
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields) + name + b"\0"
    return head + b"\0" * ((4 - len(head) % 4) % 4)


def _pad(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


class CpioWriter:
    """A minimal newc cpio writer: directories, regular files, symlinks."""

    def __init__(self, out) -> None:
        self.out = out
        self.ino = 1
        self.seen: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes) -> None:
        name = name.lstrip("/")
        if not name or name in self.seen:
            return
        self.seen.add(name)
        self.ino += 1
        self.out.write(_cpio_header(name.encode(), mode, len(data), self.ino))
        self.out.write(data + _pad(len(data)))

    def directory(self, name: str, mode: int = 0o755) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self._entry("/".join(parts[:i]), stat.S_IFDIR | mode, b"")

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        parent = os.path.dirname(name.strip("/"))
        if parent:
            self.directory(parent)
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        parent = os.path.dirname(name.strip("/"))
        if parent:
            self.directory(parent)
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def add_tree_path(self, root: Path, rel: str) -> None:
        """Add ``root/rel`` (file, symlink, or directory recursively) at ``/rel``."""
        src = root / rel.lstrip("/")
        if src.is_symlink():
            self.symlink(rel, os.readlink(src))
            target = os.readlink(src)
            if target.startswith("/"):
                resolved = _merged_usr(target).lstrip("/")
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            if (root / resolved).exists() or (root / resolved).is_symlink():
                self.add_tree_path(root, resolved)
        elif src.is_dir():
            self.directory(rel, stat.S_IMODE(src.stat().st_mode))
            for child in sorted(os.listdir(src)):
                if child in _STDLIB_SKIP:
                    continue
                self.add_tree_path(root, f"{rel.rstrip('/')}/{child}")
        elif src.is_file():
            self.file(rel, src.read_bytes(), stat.S_IMODE(src.stat().st_mode))

    def trailer(self) -> None:
        self.out.write(_cpio_header(b"TRAILER!!!", 0, 0, 0))


def initramfs_path() -> Path:
    return cache_dir() / f"initramfs-{SUITE}.cpio"


def _merged_usr(path: str) -> str:
    """``/lib/x.so`` -> ``/usr/lib/x.so`` (Debian's merged /usr: those top dirs are symlinks)."""
    for top in ("/lib/", "/lib64/", "/bin/", "/sbin/"):
        if path.startswith(top):
            return "/usr" + path
    return path


def _needed_libs(root: Path, binaries: Iterable[Path]) -> set[str]:
    """Shared libraries (paths inside the rootfs) that ``binaries`` need, via ldd."""
    libs: set[str] = set()
    for b in binaries:
        proc = subprocess.run(["ldd", str(b)], capture_output=True, text=True, check=False)
        for m in re.finditer(r"(/\S+\.so[\.\d]*)", proc.stdout):
            libs.add(m.group(1))
    libs = {_merged_usr(lib) for lib in libs}
    return {lib for lib in libs if (root / lib.lstrip("/")).exists()}


def build_initramfs(progress: Callable[[str], None] = lambda _m: None) -> Path:
    """Build (or reuse) the microVM's base initramfs from the rootfs."""
    out = initramfs_path()
    stamp = out.with_suffix(".stamp")
    recipe = GUEST_SUPERVISOR.read_bytes() + _INIT.encode() + Path(__file__).read_bytes()
    want = f"{SUITE} {hashlib.sha256(recipe).hexdigest()}"
    if out.is_file() and stamp.is_file() and stamp.read_text() == want:
        return out
    root = build_rootfs(progress)
    progress(f"building initramfs {out}")
    py = root / "usr/bin/python3.11"
    dynload = root / "usr/lib/python3.11/lib-dynload"
    libs = _needed_libs(root, [py, *dynload.glob("*.so"), root / "bin/busybox"])
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        w = CpioWriter(f)
        for d in ("proc", "sys", "dev", "scratch", "tmp", "etc"):
            w.directory(d)
        for link in ("bin", "lib", "lib64", "sbin"):
            if (root / link).is_symlink():
                w.symlink(link, os.readlink(root / link))
        w.add_tree_path(root, "usr/bin/busybox")
        w.add_tree_path(root, "usr/bin/python3.11")
        w.add_tree_path(root, "usr/lib/python3.11")
        for lib in sorted(libs):
            w.add_tree_path(root, lib)
        w.add_tree_path(root, "usr/lib64/ld-linux-x86-64.so.2")
        w.file("etc/passwd", b"root:x:0:0::/:/bin/sh\nnobody:x:65534:65534::/scratch:/bin/sh\n")
        w.file("supervisor.py", GUEST_SUPERVISOR.read_bytes(), 0o755)
        w.file("init", _INIT.encode(), 0o755)
        w.trailer()
    tmp.rename(out)
    stamp.write_text(want)
    return out


def program_cpio(source: str, limits_json: str, tmpfs_opts: str) -> bytes:
    """The per-run archive appended to the base initramfs: the program, its limits, its scratch size."""
    import io

    buf = io.BytesIO()
    w = CpioWriter(buf)
    w.file("job/main.py", source.encode("utf-8", "surrogateescape"))
    w.file("job/limits.json", limits_json.encode())
    w.file("job/tmpfs_opts", tmpfs_opts.encode())
    w.trailer()
    return buf.getvalue()


_INIT = """#!/usr/bin/busybox sh
/usr/bin/busybox mount -t proc proc /proc
/usr/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
/usr/bin/busybox mount -t tmpfs -o "$(/usr/bin/busybox cat /job/tmpfs_opts 2>/dev/null || echo size=16m,nr_inodes=64)" scratch /scratch
/usr/bin/python3.11 -I -S /supervisor.py /job/main.py /job/limits.json
/usr/bin/busybox sync
/usr/bin/busybox poweroff -f
"""
