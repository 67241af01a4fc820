"""The Wizer-like snapshot writer on small real modules (wasmtime runs both the original and the
image; nothing is mocked)."""

from __future__ import annotations

import struct

import pytest
import wasmtime as wt

from wasm_runner import preinit as snap

WAT = """
(module
  (memory (export "memory") 2)
  (global $sp (export "sp") (mut i32) (i32.const 65536))
  (global $n (export "n") (mut i64) (i64.const -5))
  (global $k i32 (i32.const 3))
  (func (export "init")
    (global.set $sp (i32.const 4096))
    (global.set $n (i64.const 123456789012))
    (i32.store (i32.const 100000) (i32.const 0x01020304))
    (i32.store (i32.const 70000) (i32.const 0)))
  (func (export "get") (result i32) (i32.load (i32.const 100000)))
  (data (i32.const 8) "hello")
  (data (i32.const 70000) "gone"))
"""


def _instance(binary: bytes) -> tuple[wt.Store, dict[str, object]]:
    engine = wt.Engine()
    store = wt.Store(engine)
    inst = wt.Instance(store, wt.Module(engine, binary), [])
    return store, {e: inst.exports(store)[e] for e in ("memory", "sp", "n", "init", "get")}


def test_an_image_starts_where_the_instance_stopped() -> None:
    original = wt.wat2wasm(WAT)
    store, ex = _instance(original)
    ex["init"](store)  # type: ignore[operator]
    mem = ex["memory"]
    memory = mem.read(store, 0, mem.data_len(store))  # type: ignore[attr-defined]
    values = {0: ex["sp"].value(store), 1: ex["n"].value(store)}  # type: ignore[attr-defined]
    image = snap.write_image(original, memory, values)

    store2, ex2 = _instance(image)
    assert ex2["get"](store2) == 0x01020304  # type: ignore[operator]
    m2 = ex2["memory"]
    assert m2.read(store2, 8, 13) == b"hello"  # type: ignore[attr-defined]
    assert m2.read(store2, 70000, 70004) == bytes(4)  # overwritten by init: zero in the image
    assert ex2["sp"].value(store2) == 4096  # type: ignore[attr-defined]
    assert ex2["n"].value(store2) == 123456789012  # type: ignore[attr-defined]
    # compact: only the non-zero ranges are data
    segs = snap.data_segments(image)
    assert sum(len(s.data) for s in segs) < 64
    assert snap.memory_of(image).min_pages == 2


def test_grown_memory_becomes_the_image_minimum() -> None:
    original = wt.wat2wasm(WAT)
    memory = bytearray(3 * snap.PAGE)
    memory[3 * snap.PAGE - 1] = 9
    image = snap.write_image(original, memory)
    store, ex = _instance(image)
    mem = ex["memory"]
    assert mem.data_len(store) == 3 * snap.PAGE  # type: ignore[attr-defined]
    assert mem.read(store, 3 * snap.PAGE - 1, 3 * snap.PAGE) == b"\x09"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("wat", "needle"),
    [
        ('(module (memory 1) (func $f) (start $f))', "start function"),
        ('(module (memory 1) (data "x"))', "passive data segment with contents"),
        ('(module (import "a" "m" (memory 1)))', "imports its memory"),
        ('(module (memory 1) (memory 1))', "memories"),
    ],
)
def test_modules_that_cannot_be_imaged_are_refused_clearly(wat: str, needle: str) -> None:
    binary = wt.wat2wasm(wat)
    with pytest.raises(snap.ImageError, match=needle):
        snap.write_image(binary, bytes(snap.PAGE))


def test_bad_images_are_refused() -> None:
    original = wt.wat2wasm(WAT)
    with pytest.raises(snap.ImageError, match="whole number of pages"):
        snap.write_image(original, bytes(100))
    with pytest.raises(snap.ImageError, match="not a mutable global"):
        snap.write_image(original, bytes(2 * snap.PAGE), {2: 1})
    with pytest.raises(snap.ImageError, match="not a core wasm module"):
        snap.write_image(b"\x00asm\x0d\x00\x01\x00", bytes(snap.PAGE))


def test_leb128_round_trips() -> None:
    for v in (0, 1, 63, 64, 127, 128, 2**31 - 1, 2**32 - 1, 2**40):
        assert snap.uleb(snap.enc_uleb(v), 0) == (v, len(snap.enc_uleb(v)))
    for v in (0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**40, -(2**40)):
        assert snap.sleb(snap.enc_sleb(v), 0) == (v, len(snap.enc_sleb(v)))


def test_c_stack_bounds_are_found_and_widened() -> None:
    top = 1 << 24
    memory = bytearray(2 * snap.PAGE)
    # a thread state's three words: top, soft limit (top - 112 KiB), hard limit (8 KiB lower)
    struct.pack_into("<3I", memory, 4096, top, top - (112 << 10), top - (120 << 10))
    struct.pack_into("<3I", memory, 8192, top, 5, 7)  # not a thread state: ignored
    assert snap.c_stack_fields(memory, top) == [4096]
    snap.set_c_stack_window(memory, 4096, top, 2 << 20)
    t, soft, hard = struct.unpack_from("<3I", memory, 4096)
    assert (t, top - soft, top - hard) == (top, (2 << 20) - 16384, (2 << 20) - 8192)
