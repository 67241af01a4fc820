"""The microVM's kernel: the vmlinux inside a bzImage is unpacked once and booted at its PVH entry;
anything that is not that boots as given. Built here as files of the real formats (boot protocol
header, xz and gzip payloads, ELF notes); the real kernel boots in test_tiers' qemu-microvm runs."""

from __future__ import annotations

import gzip
import lzma
import struct
from pathlib import Path

import pytest

from wasm_runner.compare.images import find_kernel
from wasm_runner.compare.kernel import boot_kernel
from wasm_runner.compare.tiers.microvm_tier import QemuMicrovmTier


def elf_with_notes(*notes: tuple[bytes, int]) -> bytes:
    """A 64-bit little-endian ELF whose one program header is a PT_NOTE holding ``notes``."""
    body = b""
    for name, n_type in notes:
        name0 = name + b"\0"
        desc = struct.pack("<Q", 0x1000000)
        body += struct.pack("<III", len(name0), len(desc), n_type)
        body += name0 + b"\0" * (-len(name0) % 4) + desc
    phoff, note_at = 64, 64 + 56
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header += struct.pack("<HHIQQQIHHHHHH", 2, 0x3E, 1, 0, phoff, 0, 0, 64, 56, 1, 0, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", 4, 4, note_at, 0, 0, len(body), len(body), 4)
    return header + phdr + body + b"kernel code" * 100


def bzimage(payload: bytes, setup_sectors: int = 3) -> bytes:
    """A bzImage: the setup sectors with the boot protocol header (2.15), then the payload."""
    setup = bytearray((setup_sectors + 1) * 512)
    setup[0x1F1] = setup_sectors
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, 0x20F)
    decompressor = b"\x90" * 300
    struct.pack_into("<II", setup, 0x248, len(decompressor), len(payload))
    return bytes(setup) + decompressor + payload + b"\0" * 64


PVH = (b"Xen", 18)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "wasm-runner" / "compare"


@pytest.mark.parametrize("compress", [lzma.compress, gzip.compress], ids=["xz", "gzip"])
def test_the_vmlinux_inside_a_bzimage_is_unpacked_once_and_cached(tmp_path: Path, cache: Path, compress) -> None:
    vmlinux = elf_with_notes((b"Linux", 6), PVH)
    kernel = tmp_path / "vmlinuz-test"
    kernel.write_bytes(bzimage(compress(vmlinux)))
    booted = boot_kernel(kernel)
    assert booted.parent == cache and booted.read_bytes() == vmlinux
    assert boot_kernel(kernel) == booted  # the second call finds it
    kernel.write_bytes(bzimage(compress(vmlinux + b"patched")))  # a new kernel gets its own file
    assert boot_kernel(kernel) != booted and boot_kernel(kernel).read_bytes() == vmlinux + b"patched"


@pytest.mark.parametrize(
    "content",
    [
        bzimage(lzma.compress(elf_with_notes((b"Linux", 6)))),  # no PVH entry: QEMU could not start it
        bzimage(lzma.compress(elf_with_notes((b"Xen", 5)))),  # a Xen note, but not the entry
        bzimage(b"\x28\xb5\x2f\xfd" + b"zstd payload"),  # a compression the standard library lacks
        bzimage(lzma.compress(elf_with_notes(PVH))[:-40]),  # cut short
        b"not a kernel at all" * 100,
    ],
    ids=["no-pvh-note", "other-xen-note", "zstd", "truncated", "not-a-bzimage"],
)
def test_anything_else_boots_as_given(tmp_path: Path, cache: Path, content: bytes) -> None:
    kernel = tmp_path / "vmlinuz-test"
    kernel.write_bytes(content)
    assert boot_kernel(kernel) == kernel
    assert not cache.exists() or not any(cache.iterdir())


def test_this_machines_kernel_unpacks_to_a_pvh_elf(cache: Path) -> None:
    """The kernel setup.sh installs (Debian's linux-image-amd64: xz, with PVH) takes the fast path;
    without one, the microVM tier says it has none."""
    kernel = find_kernel()
    if kernel is None:
        ok, why = QemuMicrovmTier().available()
        assert not ok and "kernel" in why
        return
    booted = boot_kernel(kernel)
    assert booted != kernel and booted.read_bytes()[:4] == b"\x7fELF"
