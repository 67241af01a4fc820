"""A resting session's state as bytes, and back: linear memory, the fd table, the scratch files.

A session's instance rests between cells (its last ``turn`` returned, see ``guest.Guest``), so
its whole state is its linear memory (the only mutable global, the stack pointer, is back at its
initial value once an export returned; tables are never written by the runtime), plus what the
host holds for it: the fd table (files the program keeps open across cells, with their offsets),
the files in ``/scratch`` and ``/tmp``, its limits, and where the wrapper keeps its pending output
and pace flag.

Memory is stored as the 4 KiB blocks that differ from a fresh instance of the same module
(``Reference``): a fresh instance maps the module's memory copy-on-write, so a resumed one only
writes the blocks the session changed. The 64 KiB wasm pages are compared first, then the 4 KiB
blocks of those that differ: a Python session changes a few blocks of many pages (a plain one:
1.6 MiB in 68 pages, against 4.3 MiB when whole pages were kept; with pandas imported 3.4 MiB
against 19 MiB), so the body is smaller before it is compressed and a resume writes less.

Layout of the (authenticated, see ``sealing``) body::

    b"WRST" | u32 header length | header (JSON) | changed blocks | file contents

(``changed``: runs ``[first block, count]`` in ascending order; ``memory_pages``: the memory's
size in 64 KiB pages.)

``restore_*`` check everything against the sandbox that resumes (page counts, fd numbers, file
names, sizes) even though the body was authenticated: a bug or a key leak must not become a
host write outside the run folder.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wasmtime as wt

from ..errors import WasmRunnerError
from ..grants import DiskQuota, open_dir
from ..wasi import GuestIO
from ..wasi.fdtable import MAX_FDS, Fd
from .sealing import SnapshotRefused

__all__ = ["BLOCK", "PAGE", "Reference", "SnapshotFailed", "State", "body_bound", "capture", "note_of", "packages_of", "parse", "restore_files",
           "restore_io", "restore_memory"]

PAGE = 65536
BLOCK = 4096  # the unit a snapshot keeps of memory: the host's page
_PER_PAGE = PAGE // BLOCK
_MAGIC = b"WRST"
_SAVED_ROOTS = ("/scratch", "/tmp")  # the run folder's own writable folders
MAX_HEADER_BYTES = 16 << 20

_libc = ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
_memcmp.restype = ctypes.c_int


class SnapshotFailed(WasmRunnerError, RuntimeError):
    """The session cannot be saved now (it ended, did not come to rest, or holds something a
    snapshot cannot carry: a link, an fd outside its own folders, a command runtime)."""


class Reference:
    """A fresh, never-run instance of a sandbox's module: the memory every session started
    from, read to find the pages a session changed. Its pages are the module's, mapped
    copy-on-write and only read: they cost page tables, not memory."""

    def __init__(self, engine: wt.Engine, pre: wt.InstancePre):
        self.store = wt.Store(engine)
        inst = pre.instantiate(self.store)
        mem = inst.exports(self.store)["memory"]
        assert isinstance(mem, wt.Memory)
        self.memory = mem
        self.size = mem.data_len(self.store)
        self.base = ctypes.addressof(mem.data_ptr(self.store).contents)


def _address(data: bytes) -> int:
    addr = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    assert addr is not None
    return addr


@dataclass
class State:
    """A parsed body: its header and where its memory blocks and files lie in it."""

    header: dict[str, Any]
    body: bytes
    blocks_at: int
    files_at: int


def capture(ref: Reference, store: wt.Store, io: GuestIO, limits: dict[str, Any],
            extra: dict[str, Any]) -> bytes:
    """The body of a snapshot of a resting guest (its memory ``io.memory``)."""
    mem = io.memory
    if mem is None:
        raise SnapshotFailed("the session has no memory")
    size = mem.data_len(store)
    base = ctypes.addressof(mem.data_ptr(store).contents)
    changed: list[int] = []  # block numbers
    zero = bytes(PAGE)
    zaddr = _address(zero)
    for k in range(size // PAGE):
        off = k * PAGE
        other = ref.base + off if off < ref.size else zaddr
        if _memcmp(base + off, other, PAGE):
            for b in range(_PER_PAGE):
                if _memcmp(base + off + b * BLOCK, other + b * BLOCK, BLOCK):
                    changed.append(k * _PER_PAGE + b)
    runs = _runs(changed)
    blocks = bytearray(len(changed) * BLOCK)
    dst = (ctypes.c_char * len(blocks)).from_buffer(blocks)
    at = ctypes.addressof(dst)
    for first, count in runs:  # runs of consecutive blocks in one copy
        ctypes.memmove(at, base + first * BLOCK, count * BLOCK)
        at += count * BLOCK
    del dst
    files, contents = _capture_files(io)
    header = {
        "memory_pages": size // PAGE,
        "changed": runs,
        "layout": [[fd, f.preopen] for fd, f in sorted(io.fds.items()) if f.preopen is not None],
        "fds": _capture_fds(io),
        "next_fd": io.next_fd,
        "files": files,
        "limits": limits,
        "outbuf": io.outbuf,
        "tick": io.tick_addr,
        **extra,
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([_MAGIC, struct.pack("<I", len(head)), head, blocks, *contents])


def _runs(blocks: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for k in blocks:
        if out and out[-1][0] + out[-1][1] == k:
            out[-1][1] += 1
        else:
            out.append([k, 1])
    return out


def _grant_roots(io: GuestIO) -> dict[str, Fd]:
    return {f.preopen: f for f in io.fds.values() if f.preopen is not None}


def _capture_fds(io: GuestIO) -> list[dict[str, Any]]:
    out = []
    for fd, f in sorted(io.fds.items()):
        if f.preopen is not None or f.kind == "stdio":
            continue
        if f.kind not in ("file", "dir") or f.grant is None:
            raise SnapshotFailed(f"fd {fd} ({f.kind}) cannot be saved")
        if f.grant.guest_path not in _SAVED_ROOTS and f.grant.writable:
            raise SnapshotFailed(f"fd {fd} is open in {f.grant.guest_path}, whose files are not saved")
        rec: dict[str, Any] = {"fd": fd, "kind": f.kind, "root": f.grant.guest_path, "parts": list(f.parts),
                               "append": f.append, "writable": f.writable}
        if f.kind == "file":
            rec["access"] = fcntl.fcntl(f.host_fd, fcntl.F_GETFL) & os.O_ACCMODE
            rec["pos"] = os.lseek(f.host_fd, 0, os.SEEK_CUR)
        out.append(rec)
    return out


def _capture_files(io: GuestIO) -> tuple[list[list[Any]], list[bytes]]:
    files: list[list[Any]] = []
    contents: list[bytes] = []
    for root, f in sorted(_grant_roots(io).items()):
        if root not in _SAVED_ROOTS or f.grant is None:
            continue
        top = Path(f.grant.host_path)
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            rel_dir = Path(dirpath).relative_to(top)
            for name in sorted(dirnames):
                p = Path(dirpath) / name
                if p.is_symlink():
                    raise SnapshotFailed(f"{root}/{rel_dir / name} is a link; links are not saved")
                files.append([root, str(rel_dir / name), "d", 0])
            for name in sorted(filenames):
                p = Path(dirpath) / name
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode):
                    raise SnapshotFailed(f"{root}/{rel_dir / name} is not a regular file")
                data = p.read_bytes()
                files.append([root, str(rel_dir / name), "f", len(data)])
                contents.append(data)
    return files, contents


# ---- resume ------------------------------------------------------------------------------------
def body_bound(memory: int, files: int) -> int:
    """The most a body may hold for a session of ``memory`` bytes of linear memory (its cap) and
    ``files`` bytes of files (its disk quota): its header, every block of that memory, the files."""
    return 8 + MAX_HEADER_BYTES + memory + files


def _bad(msg: str) -> SnapshotRefused:
    return SnapshotRefused("state", f"the snapshot's content does not fit: {msg}")


def parse(body: bytes, max_pages: int) -> State:
    """The header of a body, checked for shape and bounds (``max_pages``: the memory the
    resuming sandbox allows)."""
    if len(body) < 8 or body[:4] != _MAGIC:
        raise _bad("no state header")
    (n,) = struct.unpack_from("<I", body, 4)
    if n > MAX_HEADER_BYTES or 8 + n > len(body):
        raise _bad("header length")
    try:
        header = json.loads(body[8:8 + n])
    except ValueError:
        raise _bad("header is not JSON") from None
    if not isinstance(header, dict):
        raise _bad("header")
    pages = header.get("memory_pages")
    if not isinstance(pages, int) or not 0 < pages <= max_pages:
        raise _bad(f"memory of {pages} pages (this sandbox allows {max_pages})")
    runs = header.get("changed")
    last = -1
    count = 0
    if not isinstance(runs, list):
        raise _bad("block list")
    for r in runs:
        if (not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) for x in r)
                or r[0] <= last or r[1] < 1 or r[0] + r[1] > pages * _PER_PAGE):
            raise _bad("block list")
        last = r[0] + r[1] - 1
        count += r[1]
    files = header.get("files")
    if not isinstance(files, list):
        raise _bad("file list")
    total = 0
    for e in files:
        if (not isinstance(e, list) or len(e) != 4 or e[0] not in _SAVED_ROOTS or not isinstance(e[1], str)
                or e[2] not in ("d", "f") or not isinstance(e[3], int) or e[3] < 0):
            raise _bad("file entry")
        _rel_parts(e[1])
        total += e[3]
    blocks_at = 8 + n
    files_at = blocks_at + count * BLOCK
    if files_at + total != len(body):
        raise _bad("length of memory blocks and files")
    return State(header, body, blocks_at, files_at)


def note_of(state: State) -> dict[str, int]:
    """The note its maker put in the snapshot (``Session.snapshot(note=...)``: a server records
    the calls it holds), checked: at most 8 names, each with a whole number."""
    note = state.header.get("note", {})
    if (not isinstance(note, dict) or len(note) > 8
            or not all(isinstance(k, str) and type(v) is int for k, v in note.items())):
        raise _bad("note")
    return dict(note)


def packages_of(state: State) -> list[str]:
    """The packages beyond the image its session had (``name==version``), checked for shape."""
    names = state.header.get("packages", [])
    if (not isinstance(names, list) or len(names) > 256
            or not all(isinstance(n, str) and 0 < len(n) <= 200 for n in names)):
        raise _bad("package list")
    return list(names)


def _rel_parts(rel: str) -> tuple[str, ...]:
    parts = tuple(rel.split("/"))
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise _bad(f"file name {rel!r}")
    return parts


def restore_memory(state: State, store: wt.Store, mem: wt.Memory) -> None:
    """Make a fresh instance's memory the snapshot's (on the guest's thread, before it runs)."""
    pages = state.header["memory_pages"]
    have = mem.data_len(store) // PAGE
    if pages < have:
        raise _bad("memory smaller than the module's")
    if pages > have:
        mem.grow(store, pages - have)
    base = ctypes.addressof(mem.data_ptr(store).contents)
    src = _address(state.body) + state.blocks_at
    for k, n in state.header["changed"]:
        ctypes.memmove(base + k * BLOCK, src, n * BLOCK)
        src += n * BLOCK


def restore_files(state: State, roots: dict[str, Path], quota: DiskQuota) -> None:
    """Write the snapshot's files into a fresh run folder (``roots``: guest path -> host
    folder), within ``quota``."""
    at = state.files_at
    entries = state.header["files"]
    total = sum(e[3] for e in entries)
    if total > quota.max_bytes or len(entries) > quota.max_files:
        raise SnapshotRefused("state", f"the snapshot's files ({len(entries)}, {total} bytes) exceed "
                                       "the session's disk quota")
    for root, rel, kind, size in entries:
        top = roots.get(root)
        if top is None:
            raise _bad(f"no folder {root}")
        parts = _rel_parts(rel)
        fd = open_dir_path(top, parts[:-1])
        try:
            if kind == "d":
                os.mkdir(parts[-1], 0o700, dir_fd=fd)
            else:
                out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
                with os.fdopen(out, "wb") as f:
                    f.write(memoryview(state.body)[at:at + size])
                at += size
        except OSError as e:
            raise _bad(f"{root}/{rel}: {e.strerror}") from None
        finally:
            os.close(fd)
    quota.used_bytes += total
    quota.used_files += len(entries)


def open_dir_path(top: Path, parts: tuple[str, ...]) -> int:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for comp in parts:
            nxt = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError:
        os.close(fd)
        raise _bad("a folder of an open file is missing") from None
    return fd


def restore_io(state: State, io: GuestIO) -> None:
    """The fd table and the wrapper's addresses, as they were (the preopens must be the same)."""
    h = state.header
    layout = [[fd, f.preopen] for fd, f in sorted(io.fds.items()) if f.preopen is not None]
    if h.get("layout") != layout:
        raise SnapshotRefused("state", "the snapshot's session had other folders (data_dir or out_dir "
                                       "given, or not): resume it with the same ones")
    roots = _grant_roots(io)
    records = h.get("fds")
    if not isinstance(records, list) or len(records) + len(io.fds) > MAX_FDS:
        raise _bad("fd list")
    first = len(io.fds)
    for r in records:
        if not isinstance(r, dict):
            raise _bad("fd entry")
        fd, kind, root = r.get("fd"), r.get("kind"), r.get("root")
        if not isinstance(fd, int) or not first <= fd < MAX_FDS or fd in io.fds or kind not in ("file", "dir"):
            raise _bad("fd entry")
        pre = roots.get(root) if isinstance(root, str) else None
        if pre is None or pre.grant is None:
            raise _bad(f"fd {fd} in an unknown folder")
        parts_list = r.get("parts")
        if not isinstance(parts_list, list) or not all(isinstance(p, str) for p in parts_list):
            raise _bad("fd path")
        parts = _rel_parts("/".join(parts_list)) if parts_list else ()
        grant = pre.grant
        writable = bool(r.get("writable"))
        if writable and not grant.writable:
            raise _bad(f"fd {fd} writes a read-only folder")
        try:
            if kind == "dir":
                hfd = open_dir(grant, parts)
            else:
                if not parts:
                    raise _bad("a file fd without a name")
                access = r.get("access")
                if access not in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR) or (access != os.O_RDONLY and not grant.writable):
                    raise _bad("fd access")
                pfd = open_dir(grant, parts[:-1])
                try:
                    hfd = os.open(parts[-1], access | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
                finally:
                    os.close(pfd)
                pos = r.get("pos")
                if isinstance(pos, int) and pos >= 0:
                    os.lseek(hfd, pos, os.SEEK_SET)
        except OSError as e:
            raise _bad(f"fd {fd}: {e.strerror}") from None
        io.fds[fd] = Fd(kind, hfd, grant, parts, bool(r.get("append")), writable)
    nxt = h.get("next_fd")
    if not isinstance(nxt, int) or not len(io.fds) <= nxt <= MAX_FDS or any(fd >= nxt for fd in io.fds):
        raise _bad("next fd")
    io.next_fd = nxt
    for key in ("outbuf", "tick"):
        v = h.get(key)
        if v is not None and not (isinstance(v, int) and 0 <= v < 1 << 32):
            raise _bad(key)
    io.outbuf = h.get("outbuf")
    io.tick_addr = h.get("tick")
    io.tick_host = None  # recomputed from the new memory at the first write
