"""The WASI preview1 ABI: errno values, file types, rights and flags, and bounds-checked access to
the guest's linear memory.

Every host call reads and writes guest memory only through a ``Mem``: an address or length outside
the memory raises ``Fault``, which the linker turns into ``EFAULT`` (never an exception into wasm).
``CallerMem`` is the memory of a running instance; ``BytesMem`` is a plain buffer with the same
checks, for driving host calls directly (the unit tests of the security boundary use it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct

import wasmtime as wt

from ..errors import WasmRunnerError
from ..grants import GuestPathError

__all__ = [
    "ALL_RIGHTS", "BytesMem", "CALL_MAGIC", "CONTROL_MAGIC", "CallerMem", "E2BIG", "EACCES", "EAGAIN", "EBADF",
    "EEXIST", "EFAULT", "EINVAL", "EIO", "EISDIR", "ELOOP", "EMFILE", "ENAMETOOLONG", "ENOENT",
    "ENOSPC", "ENOSYS", "ENOTCAPABLE", "ENOTDIR", "ENOTEMPTY", "ENOTSUP", "EPERM", "EROFS",
    "ESPIPE", "EXDEV", "FDFLAG_APPEND", "FT_CHAR", "FT_DIR", "FT_REG", "FT_SYMLINK", "FT_UNKNOWN",
    "Fault", "MAX_IOVECS", "MAX_PATH_BYTES", "Mem", "O_CREAT", "O_DIRECTORY", "O_EXCL", "O_TRUNC",
    "RIGHT_FD_READ", "RIGHT_FD_SEEK", "RIGHT_FD_TELL", "RIGHT_FD_WRITE", "STDIO_RIGHTS", "SUCCESS",
    "WRITE_RIGHTS", "filestat", "wasi_errno",
]

# errno values of WASI preview1
SUCCESS, E2BIG, EACCES, EAGAIN, EBADF = 0, 1, 2, 6, 8
EEXIST, EFAULT, EINVAL, EIO, EISDIR, ELOOP = 20, 21, 28, 29, 31, 32
ENOENT, ENOSPC, ENOSYS, ENOTDIR, ENOTEMPTY, ENOTSUP, EPERM = 44, 51, 52, 54, 55, 58, 63
EROFS, ESPIPE, EXDEV, ENOTCAPABLE, EMFILE = 69, 70, 75, 76, 33
ENAMETOOLONG, EILSEQ = 37, 25

_HOST_TO_WASI = {
    errno.EPERM: 63, errno.ENOENT: 44, errno.EEXIST: 20, errno.EISDIR: 31, errno.ENOTDIR: 54,
    errno.ENOTEMPTY: 55, errno.ELOOP: 32, errno.ENAMETOOLONG: 37, errno.ENOSPC: 51,
    errno.EXDEV: 75, errno.EROFS: 69, errno.EBADF: 8, errno.EINVAL: 28, errno.EFBIG: 22,
    errno.ESPIPE: 70, errno.EACCES: 2, errno.ETXTBSY: 74, errno.EDQUOT: 19, errno.EMFILE: 33,
    errno.ENOMEM: 48, errno.EIO: 29, errno.EOPNOTSUPP: 58, errno.EBUSY: 10,
}


def wasi_errno(e: OSError) -> int:
    """The WASI errno for a host ``OSError`` (a ``GuestPathError`` carries its own)."""
    if isinstance(e, GuestPathError):
        return e.wasi_errno
    return _HOST_TO_WASI.get(e.errno or 0, EIO)


# filetypes
FT_UNKNOWN, FT_CHAR, FT_DIR, FT_REG, FT_SYMLINK = 0, 2, 3, 4, 7
# rights: everything, so wasi-libc never masks an operation; the grant decides.
ALL_RIGHTS = (1 << 30) - 1
RIGHT_FD_READ, RIGHT_FD_SEEK, RIGHT_FD_TELL, RIGHT_FD_WRITE = 1 << 1, 1 << 2, 1 << 5, 1 << 6
STDIO_RIGHTS = ALL_RIGHTS  # seek/tell rights: isatty() is False, as for a pipe
# oflags / fdflags / lookup flags
O_CREAT, O_DIRECTORY, O_EXCL, O_TRUNC = 1, 2, 4, 8
FDFLAG_APPEND = 1
WRITE_RIGHTS = RIGHT_FD_WRITE | (1 << 8) | (1 << 22)  # fd_write, fd_allocate, fd_filestat_set_size

CONTROL_MAGIC = b"WRJB"  # host -> guest job frames on fd 0 during the control phase
CALL_MAGIC = b"WRHC"  # guest -> host: a host call (control.HostCall), written on fd 0
MAX_IOVECS = 1024
MAX_PATH_BYTES = 4096


class Fault(WasmRunnerError):
    """A guest pointer or length outside its memory; answered with ``EFAULT``."""


class Mem:
    """Bounds-checked access to a guest's linear memory of ``size`` bytes."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def read(self, addr: int, n: int) -> bytes:
        raise NotImplementedError

    def write(self, addr: int, data: bytes) -> None:
        raise NotImplementedError

    def u32(self, addr: int, value: int) -> None:
        self.write(addr, struct.pack("<I", value & 0xFFFFFFFF))

    def u64(self, addr: int, value: int) -> None:
        self.write(addr, struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF))

    def iovecs(self, iovs: int, n: int) -> list[tuple[int, int]]:
        if n < 0 or n > MAX_IOVECS:
            raise Fault()
        raw = self.read(iovs, 8 * n)
        return [struct.unpack_from("<II", raw, 8 * i) for i in range(n)]

    def string(self, ptr: int, n: int) -> str:
        if n > MAX_PATH_BYTES:
            raise GuestPathError(ENAMETOOLONG, "name too long")
        try:
            return self.read(ptr, n).decode("utf-8")
        except UnicodeDecodeError:
            raise GuestPathError(EILSEQ, "path is not UTF-8") from None


class CallerMem(Mem):
    """The linear memory of a running instance, as seen from inside one host call."""

    __slots__ = ("base",)

    def __init__(self, caller: wt.Caller, mem: wt.Memory):
        super().__init__(mem.data_len(caller))
        self.base = ctypes.addressof(mem.data_ptr(caller).contents)

    def read(self, addr: int, n: int) -> bytes:
        if addr < 0 or n < 0 or addr + n > self.size:
            raise Fault()
        return ctypes.string_at(self.base + addr, n)

    def write(self, addr: int, data: bytes) -> None:
        if addr < 0 or addr + len(data) > self.size:
            raise Fault()
        ctypes.memmove(self.base + addr, data, len(data))


class BytesMem(Mem):
    """A memory backed by a ``bytearray``, with the same bounds checks as ``CallerMem``."""

    __slots__ = ("buf",)

    def __init__(self, size: int = 1 << 16) -> None:
        super().__init__(size)
        self.buf = bytearray(size)

    def read(self, addr: int, n: int) -> bytes:
        if addr < 0 or n < 0 or addr + n > self.size:
            raise Fault()
        return bytes(self.buf[addr : addr + n])

    def write(self, addr: int, data: bytes) -> None:
        if addr < 0 or addr + len(data) > self.size:
            raise Fault()
        self.buf[addr : addr + len(data)] = data


def filestat(st: os.stat_result) -> bytes:
    """A WASI ``filestat`` record of a host stat result."""
    if stat.S_ISDIR(st.st_mode):
        ft = FT_DIR
    elif stat.S_ISREG(st.st_mode):
        ft = FT_REG
    elif stat.S_ISLNK(st.st_mode):
        ft = FT_SYMLINK
    else:
        ft = FT_UNKNOWN
    return struct.pack(
        "<QQBxxxxxxxQQQQQ", 0, st.st_ino, ft, st.st_nlink, st.st_size,
        st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns,
    )
