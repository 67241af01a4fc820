"""Drive the WASI host calls directly, without a wasmtime instance: a ``GuestIO`` over real host
folders (grants under a temporary folder), a ``BytesMem`` as the guest's memory, and every call
made through ``linker.guarded`` exactly as the linker wires it, so a test sees the errno the guest
would see (and an exception escaping a host call would fail the test)."""

from __future__ import annotations

import struct
from pathlib import Path

from wasm_runner.grants import DiskQuota, Grant
from wasm_runner.wasi import GuestIO, current
from wasm_runner.wasi.abi import BytesMem, RIGHT_FD_READ, RIGHT_FD_WRITE
from wasm_runner.wasi.linker import HOST_CALLS, guarded

SCRATCH_FD, DATA_FD = 3, 4
MEM_SIZE = 1 << 16


class Host:
    """One guest's host side: ``/scratch`` (writable) and ``/data`` (read-only) grants."""

    def __init__(self, root: Path, *, max_bytes: int = 1 << 20, max_files: int = 100,
                 mem_size: int = MEM_SIZE) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.scratch = root / "scratch"
        self.data = root / "data"
        self.scratch.mkdir()
        self.data.mkdir()
        self.grants = [Grant("/scratch", str(self.scratch), writable=True),
                       Grant("/data", str(self.data), writable=False)]
        for g in self.grants:
            g.open()
        self.quota = DiskQuota(max_bytes, max_files)
        self.io = GuestIO(self.grants, self.quota, ["python", "-c", "pass"])
        self.io.control = False  # the program runs: fd 0 is its stdin
        self.mem = BytesMem(mem_size)
        self._next = 4096  # a bump allocator in guest memory for arguments
        current.io = self.io

    def close(self) -> None:
        current.io = None
        self.io.close()
        for g in self.grants:
            g.close()

    # ---- guest memory ------------------------------------------------------------------------
    def alloc(self, n: int) -> int:
        ptr = self._next
        self._next += (n + 7) & ~7
        assert self._next < self.mem.size, "harness memory exhausted"
        return ptr

    def put(self, data: bytes) -> tuple[int, int]:
        ptr = self.alloc(max(len(data), 1))
        self.mem.write(ptr, data)
        return ptr, len(data)

    def u32(self, ptr: int) -> int:
        return int(struct.unpack("<I", self.mem.read(ptr, 4))[0])

    def u64(self, ptr: int) -> int:
        return int(struct.unpack("<Q", self.mem.read(ptr, 8))[0])

    def iovecs(self, bufs: list[tuple[int, int]]) -> int:
        ptr = self.alloc(8 * len(bufs))
        for i, (p, n) in enumerate(bufs):
            self.mem.write(ptr + 8 * i, struct.pack("<II", p, n))
        return ptr

    # ---- calls -------------------------------------------------------------------------------
    def call(self, name: str, *args: int) -> int | None:
        fn, _params, results = HOST_CALLS[name]
        return guarded(name, fn, bool(results))(self.mem, *args)  # type: ignore[no-any-return]

    def open(self, path: str | bytes, *, dirfd: int = SCRATCH_FD, oflags: int = 0,
             write: bool = False, fdflags: int = 0) -> tuple[int, int]:
        """(errno, new fd) of ``path_open``."""
        raw = path.encode() if isinstance(path, str) else path
        p, n = self.put(raw)
        out = self.alloc(4)
        rights = RIGHT_FD_READ | (RIGHT_FD_WRITE if write else 0)
        err = self.call("path_open", dirfd, 0, p, n, oflags, rights, 0, fdflags, out)
        assert err is not None
        return err, (self.u32(out) if err == 0 else -1)

    def write(self, fd: int, data: bytes) -> tuple[int, int]:
        """(errno, bytes written) of ``fd_write``."""
        p, n = self.put(data)
        iov = self.iovecs([(p, n)])
        out = self.alloc(4)
        err = self.call("fd_write", fd, iov, 1, out)
        assert err is not None
        return err, (self.u32(out) if err == 0 else -1)

    def read(self, fd: int, n: int) -> tuple[int, bytes]:
        """(errno, bytes read) of ``fd_read``."""
        buf = self.alloc(n)
        iov = self.iovecs([(buf, n)])
        out = self.alloc(4)
        err = self.call("fd_read", fd, iov, 1, out)
        assert err is not None
        return err, (self.mem.read(buf, self.u32(out)) if err == 0 else b"")

    def path(self, name: str, path: str, *args: int, dirfd: int = SCRATCH_FD) -> int | None:
        """A ``path_*`` call taking (dirfd, ptr, len, ...)."""
        p, n = self.put(path.encode())
        return self.call(name, dirfd, p, n, *args)
