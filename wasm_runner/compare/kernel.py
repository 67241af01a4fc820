"""The kernel the microVM tier boots: Debian's own, unpacked once from its compressed ``vmlinuz``
into the ``vmlinux`` inside it and cached beside the initramfs (``boot_kernel``).

QEMU starts that ELF at its PVH entry point, so no boot runs the kernel's decompressor: under TCG
(no usable KVM) emulating it took 10-12 s of every boot (about half of one), on KVM a fraction of a
second. The kernel code that runs is the same either way. Anything else (another compression, no
PVH entry) boots the ``vmlinuz`` as before.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import struct
import zlib
from pathlib import Path

from .images import cache_dir

__all__ = ["boot_kernel"]

_MAX_VMLINUX = 512 << 20  # an unpacked kernel larger than this is not one we boot
_PT_NOTE = 4
_PVH_ENTRY_NOTE = 18  # XEN_ELFNOTE_PHYS32_ENTRY: where a PVH loader (QEMU's -kernel) starts an ELF


def boot_kernel(kernel: Path) -> Path:
    """The file QEMU should load for ``kernel``: its ``vmlinux`` (unpacked once, cached beside the
    initramfs) when the bzImage holds an xz or gzip payload that unpacks to an ELF with a PVH entry
    point, else ``kernel`` itself. Same kernel code either way; the ELF skips the decompressor,
    which under TCG is emulated instruction by instruction on every boot."""
    try:
        data = kernel.read_bytes()
    except OSError:
        return kernel
    out = cache_dir() / f"vmlinux-{kernel.name}-{hashlib.sha256(data).hexdigest()[:16]}"
    if out.is_file():
        return out
    vmlinux = _unpack_bzimage(data)
    if vmlinux is None or not _has_pvh_entry(vmlinux):
        return kernel
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_bytes(vmlinux)
    tmp.rename(out)
    return out


def _unpack_bzimage(data: bytes) -> bytes | None:
    """The payload of a bzImage (boot protocol 2.08+: ``payload_offset``/``payload_length``),
    decompressed; None for another format or compression."""
    if len(data) < 0x250 or data[0x202:0x206] != b"HdrS" or struct.unpack_from("<H", data, 0x206)[0] < 0x208:
        return None
    setup_sectors = data[0x1F1] or 4
    offset, length = struct.unpack_from("<II", data, 0x248)
    start = (setup_sectors + 1) * 512 + offset
    payload = data[start:start + length]
    try:
        if payload.startswith(b"\xfd7zXZ\x00"):
            xz = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
            out = xz.decompress(payload, max_length=_MAX_VMLINUX)
            return out if xz.eof else None
        if payload.startswith(b"\x1f\x8b"):
            gz = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = gz.decompress(payload, _MAX_VMLINUX)
            return out if gz.eof else None
    except (lzma.LZMAError, zlib.error):
        return None
    return None


def _has_pvh_entry(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF carries the PVH entry-point note."""
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        base = phoff + i * phentsize
        if base + 56 > len(elf):
            return False
        p_type, = struct.unpack_from("<I", elf, base)
        if p_type != _PT_NOTE:
            continue
        p_offset, = struct.unpack_from("<Q", elf, base + 8)
        p_filesz, = struct.unpack_from("<Q", elf, base + 32)
        pos, end = p_offset, min(p_offset + p_filesz, len(elf))
        while pos + 12 <= end:
            namesz, descsz, n_type = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and n_type == _PVH_ENTRY_NOTE:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False
