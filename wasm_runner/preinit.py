# EDITING THIS FILE REBUILDS THE SERVER'S IMAGES: its bytes are in every image's cache key (docs/development.md).
"""Pre-initialized wasm modules written from a live instance, the way Wizer does it.

``write_image`` takes the original module's bytes and the state of an instance that ran to a
quiescent point (an export returned): its linear memory and the values of its mutable globals.
It writes a new module whose data segments are that memory (only the non-zero ranges, so the
image stays compact) and whose mutable globals start at the captured values; every other
section is copied as it is. A new instance of the result starts where the old one stopped.

What this needs from the module, checked here (``ImageError`` otherwise):

- one linear memory, defined (not imported), 32-bit;
- no ``datacount`` section, so no code can refer to a segment (``memory.init``, ``data.drop``)
  and the data section may be replaced; passive segments only when empty;
- no ``start`` section (a start function would run again in every new instance);
- mutable globals with constant initial values (``i32``/``i64``/``f32``/``f64``).

State outside linear memory is not captured: tables (the snapshotting code must not grow or
write them), host-side state (open files, the WASI fd numbering; the host must hand a restored
instance the same preopens at the same fd numbers) and the engine's own state.

Helpers find and rewrite CPython's C-stack bounds in a memory image (``c_stack_fields`` /
``set_c_stack_window``): the interpreter computes them once, from the stack pointer where it
started, and a pre-initialized module carries the answer in its memory.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import WasmRunnerError

__all__ = [
    "C_STACK_MARGIN",
    "DataSegment",
    "Global",
    "ImageError",
    "MemoryLimits",
    "PAGE",
    "SEC_CODE",
    "SEC_CUSTOM",
    "SEC_DATA",
    "SEC_DATACOUNT",
    "SEC_ELEM",
    "SEC_EXPORT",
    "SEC_FUNC",
    "SEC_GLOBAL",
    "SEC_IMPORT",
    "SEC_MEMORY",
    "SEC_START",
    "SEC_TABLE",
    "SEC_TYPE",
    "Section",
    "WASM_MAGIC",
    "c_stack_fields",
    "check_snapshottable",
    "data_segments",
    "enc_sleb",
    "enc_uleb",
    "exports_of",
    "globals_of",
    "imported_globals",
    "memory_of",
    "nonzero_ranges",
    "sections",
    "set_c_stack_window",
    "sleb",
    "uleb",
    "write_image",
]

WASM_MAGIC = b"\x00asm\x01\x00\x00\x00"
PAGE = 65536

SEC_CUSTOM, SEC_TYPE, SEC_IMPORT, SEC_FUNC, SEC_TABLE, SEC_MEMORY = 0, 1, 2, 3, 4, 5
SEC_GLOBAL, SEC_EXPORT, SEC_START, SEC_ELEM, SEC_CODE, SEC_DATA, SEC_DATACOUNT = 6, 7, 8, 9, 10, 11, 12

_I32, _I64, _F32, _F64 = 0x7F, 0x7E, 0x7D, 0x7C
_CONST_OP = {_I32: 0x41, _I64: 0x42, _F32: 0x43, _F64: 0x44}
_END = 0x0B


class ImageError(WasmRunnerError, ValueError):
    """The module cannot be pre-initialized this way (the reason says why)."""


# ---- LEB128 ----------------------------------------------------------------------------------
def _leb(b: bytes, i: int, signed: bool) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(b):
            raise ImageError("truncated LEB128")
        x = b[i]
        i += 1
        result |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            if signed and x & 0x40:
                result -= 1 << shift
            return result, i


def uleb(b: bytes, i: int) -> tuple[int, int]:
    """An unsigned LEB128 number at ``b[i:]``: (value, index after it)."""
    return _leb(b, i, signed=False)


def sleb(b: bytes, i: int) -> tuple[int, int]:
    """A signed LEB128 number at ``b[i:]``: (value, index after it)."""
    return _leb(b, i, signed=True)


def enc_uleb(v: int) -> bytes:
    if v < 0:
        raise ValueError("negative")
    out = bytearray()
    while True:
        x = v & 0x7F
        v >>= 7
        if v:
            out.append(x | 0x80)
        else:
            out.append(x)
            return bytes(out)


def enc_sleb(v: int) -> bytes:
    out = bytearray()
    while True:
        x = v & 0x7F
        v >>= 7
        if (v == 0 and not x & 0x40) or (v == -1 and x & 0x40):
            out.append(x)
            return bytes(out)
        out.append(x | 0x80)


# ---- sections --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Section:
    id: int
    start: int  # of the payload, in the module's bytes
    end: int


def sections(module: bytes) -> list[Section]:
    if module[:8] != WASM_MAGIC:
        raise ImageError("not a core wasm module (version 1)")
    out = []
    i = 8
    while i < len(module):
        sid = module[i]
        size, j = uleb(module, i + 1)
        if j + size > len(module):
            raise ImageError(f"section {sid} runs past the end of the module")
        out.append(Section(sid, j, j + size))
        i = j + size
    return out


def _section(module: bytes, secs: list[Section], sid: int) -> bytes | None:
    for s in secs:
        if s.id == sid:
            return module[s.start:s.end]
    return None


@dataclass(frozen=True)
class Global:
    valtype: int
    mutable: bool
    init: bytes  # the constant expression, without its end byte

    def const_value(self) -> int | None:
        if len(self.init) < 2 or self.init[0] != _CONST_OP.get(self.valtype):
            return None
        if self.valtype in (_I32, _I64):
            v, k = sleb(self.init, 1)
            return v if k == len(self.init) else None
        return None


def globals_of(module: bytes, secs: list[Section] | None = None) -> list[Global]:
    """The module's own globals (imported globals are not in this list)."""
    secs = secs or sections(module)
    body = _section(module, secs, SEC_GLOBAL)
    if body is None:
        return []
    n, i = uleb(body, 0)
    out = []
    for _ in range(n):
        vt, mut = body[i], body[i + 1]
        i += 2
        start = i
        # constant expressions here are a single const/global.get/ref op then end
        op = body[i]
        i += 1
        if op in (0x41, 0x42):
            _, i = sleb(body, i)
        elif op == 0x43:
            i += 4
        elif op == 0x44:
            i += 8
        elif op in (0x23, 0xD2):  # global.get / ref.func
            _, i = uleb(body, i)
        elif op == 0xD0:  # ref.null t
            i += 1
        else:
            raise ImageError(f"unsupported constant expression opcode {op:#x} in a global")
        if body[i] != _END:
            raise ImageError("unsupported (extended) constant expression in a global")
        out.append(Global(vt, bool(mut), body[start:i]))
        i += 1
    return out


def imported_globals(module: bytes, secs: list[Section] | None = None) -> int:
    secs = secs or sections(module)
    body = _section(module, secs, SEC_IMPORT)
    if body is None:
        return 0
    n, i = uleb(body, 0)
    count = 0
    for _ in range(n):
        ln, i = uleb(body, i)
        i += ln
        ln, i = uleb(body, i)
        i += ln
        kind = body[i]
        i += 1
        if kind == 0:  # func
            _, i = uleb(body, i)
        elif kind == 1:  # table: reftype + limits
            i += 1
            flags = body[i]
            i += 1
            _, i = uleb(body, i)
            if flags & 1:
                _, i = uleb(body, i)
        elif kind == 2:
            raise ImageError("the module imports its memory")
        elif kind == 3:
            count += 1
            i += 2
        elif kind == 4:  # tag
            i += 1
            _, i = uleb(body, i)
        else:
            raise ImageError(f"unknown import kind {kind}")
    return count


@dataclass(frozen=True)
class MemoryLimits:
    min_pages: int
    max_pages: int | None


def memory_of(module: bytes, secs: list[Section] | None = None) -> MemoryLimits:
    secs = secs or sections(module)
    body = _section(module, secs, SEC_MEMORY)
    if body is None:
        raise ImageError("the module defines no memory")
    n, i = uleb(body, 0)
    if n != 1:
        raise ImageError(f"the module defines {n} memories; one is supported")
    flags = body[i]
    i += 1
    if flags & ~1:
        raise ImageError(f"unsupported memory flags {flags:#x} (shared or 64-bit)")
    mn, i = uleb(body, i)
    mx = None
    if flags & 1:
        mx, i = uleb(body, i)
    return MemoryLimits(mn, mx)


@dataclass(frozen=True)
class DataSegment:
    offset: int
    data: bytes


def data_segments(module: bytes, secs: list[Section] | None = None) -> list[DataSegment]:
    secs = secs or sections(module)
    body = _section(module, secs, SEC_DATA)
    if body is None:
        return []
    n, i = uleb(body, 0)
    out = []
    for _ in range(n):
        flag, i = uleb(body, i)
        if flag == 1:  # passive: allowed when empty (Wizer leaves such placeholders)
            ln, i = uleb(body, i)
            if ln:
                raise ImageError("a passive data segment with contents")
            continue
        if flag == 2:
            mem, i = uleb(body, i)
            if mem != 0:
                raise ImageError("a data segment for another memory")
        elif flag != 0:
            raise ImageError(f"unknown data segment kind {flag}")
        if body[i] != 0x41:
            raise ImageError("a data segment whose offset is not an i32 constant")
        off, i = sleb(body, i + 1)
        if body[i] != _END:
            raise ImageError("a data segment with an extended offset expression")
        i += 1
        ln, i = uleb(body, i)
        out.append(DataSegment(off & 0xFFFFFFFF, body[i:i + ln]))
        i += ln
    return out


def check_snapshottable(module: bytes) -> None:
    secs = sections(module)
    ids = {s.id for s in secs}
    if SEC_START in ids:
        raise ImageError("the module has a start function")
    if SEC_DATACOUNT in ids:
        raise ImageError("the module has a datacount section (segments may be used by memory.init)")
    imported_globals(module, secs)  # refuses an imported memory
    memory_of(module, secs)
    data_segments(module, secs)
    for g in globals_of(module, secs):
        if g.mutable and g.const_value() is None:
            raise ImageError("a mutable global whose initial value is not an integer constant")


# ---- the memory image --------------------------------------------------------------------------
def nonzero_ranges(memory: bytes | bytearray | memoryview, granule: int = 4096, max_gap: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of the memory's non-zero parts: whole zero ``granule``-sized blocks are
    skipped, each run of non-zero blocks is trimmed of its leading and trailing zero bytes.
    Runs separated by fewer than ``max_gap`` zero blocks are merged."""
    mv = memoryview(memory)
    n = len(mv)
    zero = bytes(granule)
    i = 0
    run_start = -1
    gap = 0
    while i < n:
        block = mv[i:i + granule]
        is_zero = block == zero[:len(block)]
        if not is_zero:
            if run_start < 0:
                run_start = i
            gap = 0
        elif run_start >= 0:
            gap += 1
            if gap > max_gap:
                yield _trim(mv, run_start, i - (gap - 1) * granule)
                run_start = -1
                gap = 0
        i += granule
    if run_start >= 0:
        yield _trim(mv, run_start, n - gap * granule if gap else n)


def _trim(mv: memoryview, start: int, end: int) -> tuple[int, int]:
    b = bytes(mv[start:end])
    s = len(b) - len(b.lstrip(b"\x00"))
    e = len(b.rstrip(b"\x00"))
    return start + s, start + e


def _vec(items: list[bytes]) -> bytes:
    return enc_uleb(len(items)) + b"".join(items)


def _section_bytes(sid: int, payload: bytes) -> bytes:
    return bytes([sid]) + enc_uleb(len(payload)) + payload


def write_image(
    module: bytes,
    memory: bytes | bytearray | memoryview,
    global_values: dict[int, int] | None = None,
    *,
    drop_exports: tuple[str, ...] = (),
) -> bytes:
    """The pre-initialized module: ``module`` with ``memory`` as its data and the mutable
    globals (by index in the module's own global section) set to ``global_values``."""
    check_snapshottable(module)
    secs = sections(module)
    if len(memory) % PAGE:
        raise ImageError("the memory image is not a whole number of pages")
    pages = len(memory) // PAGE
    lim = memory_of(module, secs)
    if lim.max_pages is not None and pages > lim.max_pages:
        raise ImageError("the memory image is larger than the module's maximum")
    gl = globals_of(module, secs)
    values = dict(global_values or {})
    for idx in values:
        if idx >= len(gl) or not gl[idx].mutable:
            raise ImageError(f"global {idx} is not a mutable global of the module")
    out = bytearray(WASM_MAGIC)
    for s in secs:
        payload = module[s.start:s.end]
        if s.id == SEC_MEMORY:
            flags = 1 if lim.max_pages is not None else 0
            body = bytes([flags]) + enc_uleb(pages) + (enc_uleb(lim.max_pages) if lim.max_pages is not None else b"")
            out += _section_bytes(SEC_MEMORY, _vec([body]))
        elif s.id == SEC_GLOBAL:
            items = []
            for idx, g in enumerate(gl):
                init = g.init
                if idx in values:
                    v = values[idx]
                    if g.valtype == _I32:
                        v = v - (1 << 32) if v & 0x80000000 else v
                    elif g.valtype == _I64:
                        v = v - (1 << 64) if v & (1 << 63) else v
                    else:
                        raise ImageError(f"global {idx} is not an integer")
                    init = bytes([_CONST_OP[g.valtype]]) + enc_sleb(v)
                items.append(bytes([g.valtype, int(g.mutable)]) + init + bytes([_END]))
            out += _section_bytes(SEC_GLOBAL, _vec(items))
        elif s.id == SEC_EXPORT and drop_exports:
            out += _section_bytes(SEC_EXPORT, _filter_exports(payload, drop_exports))
        elif s.id == SEC_DATA:
            segs = []
            for a, b in nonzero_ranges(memory):
                if a == b:
                    continue
                off = a - (1 << 32) if a & 0x80000000 else a
                segs.append(b"\x00\x41" + enc_sleb(off) + bytes([_END]) + enc_uleb(b - a) + bytes(memory[a:b]))
            out += _section_bytes(SEC_DATA, _vec(segs))
        else:
            out += _section_bytes(s.id, payload)
    return bytes(out)


def _filter_exports(payload: bytes, drop: tuple[str, ...]) -> bytes:
    n, i = uleb(payload, 0)
    keep = []
    for _ in range(n):
        start = i
        ln, i = uleb(payload, i)
        name = payload[i:i + ln].decode()
        i += ln
        i += 1  # kind
        _, i = uleb(payload, i)
        if name not in drop:
            keep.append(payload[start:i])
    return _vec(keep)


def exports_of(module: bytes) -> dict[str, tuple[int, int]]:
    secs = sections(module)
    body = _section(module, secs, SEC_EXPORT)
    out: dict[str, tuple[int, int]] = {}
    if body is None:
        return out
    n, i = uleb(body, 0)
    for _ in range(n):
        ln, i = uleb(body, i)
        name = body[i:i + ln].decode()
        i += ln
        kind = body[i]
        i += 1
        idx, i = uleb(body, i)
        out[name] = (kind, idx)
    return out


# ---- CPython's C-stack bounds ------------------------------------------------------------------
# 3.14+ keeps, in each thread state, the top of the C stack and two limits below it:
# ``c_stack_top, c_stack_soft_limit, c_stack_hard_limit`` (three consecutive pointers; the hard
# limit is one margin below the soft one). On WASI the bounds are a guess made when the thread
# state was first attached: a fixed-size window below the stack pointer of that moment.
C_STACK_MARGIN = 8192  # _PyOS_STACK_MARGIN_BYTES on wasm32 (2048 pointers)


def c_stack_fields(memory: bytes | bytearray | memoryview, stack_top: int) -> list[int]:
    """Addresses of every ``c_stack_top`` whose next words look like CPython's soft and hard
    limits for a stack that starts at ``stack_top``."""
    mv = bytes(memory)
    needle = struct.pack("<I", stack_top)
    out = []
    i = mv.find(needle)
    while i >= 0:
        if i % 4 == 0 and i + 12 <= len(mv):
            top, soft, hard = struct.unpack_from("<3I", mv, i)
            if top == stack_top and hard < soft < top and soft - hard == C_STACK_MARGIN and top - soft < (64 << 20):
                out.append(i)
        i = mv.find(needle, i + 1)
    return out


def set_c_stack_window(memory: bytearray, address: int, stack_top: int, window: int) -> None:
    """Make the thread state at ``address`` allow ``window`` bytes of C stack below ``stack_top``."""
    if window > stack_top:
        raise ImageError("the C-stack window is larger than the stack")
    base = stack_top - window
    struct.pack_into("<3I", memory, address, stack_top, base + 2 * C_STACK_MARGIN, base + C_STACK_MARGIN)
