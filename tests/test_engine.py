"""The private wasmtime bindings engine.py uses, on small real modules: the epoch-deadline
callback (wasmtime's C API through ctypes) and the async stack size that lets max_wasm_stack be
large. A wasmtime upgrade that moves either fails here first."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
import wasmtime as wt

from wasm_runner import engine

SPIN = '(module (func (export "spin") (loop $l (br $l))))'
# recursion with a 4 KiB frame of locals spilled to the native stack
DEEP = """
(module
  (func $down (export "down") (param $n i32) (result i32)
    (local $a v128) (local $b v128) (local $c v128) (local $d v128)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (i32.const 1) (call $down (i32.sub (local.get $n) (i32.const 1))))))))
"""


def _on_big_stack(fn):  # type: ignore[no-untyped-def]
    out: dict[str, object] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    # a guest thread's stack (sandbox.guest.GUEST_STACK); the size applies when the thread starts
    old = threading.stack_size(32 << 20)
    try:
        t = threading.Thread(target=body)
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    return out


@pytest.mark.parametrize("fuel", [True, False])
def test_the_deadline_callback_stops_a_spinning_guest(fuel: bool) -> None:
    eng = engine.get_engine(fuel)
    store = wt.Store(eng)
    if fuel:
        store.set_fuel(10**15)
    calls = []

    def check() -> str | None:  # the guest runs on at each tick until the third says stop
        calls.append(1)
        return "timeout" if len(calls) >= 3 else None

    engine.watch(store, check)
    inst = wt.Instance(store, wt.Module(eng, wt.wat2wasm(SPIN)), [])
    t0 = time.monotonic()
    out = _on_big_stack(lambda: inst.exports(store)["spin"](store))  # type: ignore[operator]
    took = time.monotonic() - t0
    err = out.get("error")
    assert isinstance(err, (wt.Trap, wt.WasmtimeError)) and "wasm-runner stop: timeout" in str(err)
    assert len(calls) == 3 and took < 30.0
    store.close()


def test_a_failing_check_stops_the_guest_as_internal() -> None:
    eng = engine.get_engine(False)
    store = wt.Store(eng)

    def check() -> str | None:
        raise RuntimeError("bug")

    engine.watch(store, check)
    inst = wt.Instance(store, wt.Module(eng, wt.wat2wasm(SPIN)), [])
    out = _on_big_stack(lambda: inst.exports(store)["spin"](store))  # type: ignore[operator]
    assert "wasm-runner stop: internal" in str(out.get("error"))


def test_the_native_wasm_stack_is_the_configured_size() -> None:
    eng = engine.get_engine(False)
    store = wt.Store(eng)
    store.set_epoch_deadline(1 << 40)  # the engine interrupts at epochs; not this test's concern
    down = wt.Instance(store, wt.Module(eng, wt.wat2wasm(DEEP)), []).exports(store)["down"]
    # far deeper than wasmtime's default 512 KiB allows, within MAX_WASM_STACK
    assert _on_big_stack(lambda: down(store, 20_000))["value"] == 20_000  # type: ignore[operator]
    # and past it: a clean stack-overflow trap, the host thread unharmed
    err = _on_big_stack(lambda: down(store, 10_000_000)).get("error")  # type: ignore[operator]
    assert isinstance(err, wt.Trap) and err.trap_code == wt.TrapCode.STACK_OVERFLOW
    assert engine.MAX_WASM_STACK >= 16 << 20


def test_async_stack_size_binding_accepts_a_config() -> None:
    cfg = wt.Config()
    engine.set_async_stack_size(cfg, 32 << 20)
    cfg.max_wasm_stack = 32 << 20
    wt.Engine(cfg)  # wasmtime refuses (panics) when max_wasm_stack exceeds the async stack size


def test_the_pooling_allocator_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = wt.Config()
    assert engine.use_pooling(cfg) is True
    eng = wt.Engine(cfg)
    store = wt.Store(eng)
    store.set_epoch_deadline(1 << 40)
    mod = wt.Module(eng, wt.wat2wasm('(module (memory (export "m") 1) (func (export "f") (i32.store (i32.const 0) (i32.const 7))))'))
    for _ in range(3):  # slots are reused; each instance starts from the module's memory
        inst = wt.Instance(store, mod, [])
        assert inst.exports(store)["m"].read(store, 0, 4) == bytes(4)  # type: ignore[union-attr]
        inst.exports(store)["f"](store)  # type: ignore[operator]
    monkeypatch.setenv("WASM_RUNNER_ALLOCATOR", "ondemand")
    assert engine.use_pooling(wt.Config()) is False


# Eight sessions each holding 40 MB, then closed: the process's RSS before, while open, after.
SESSIONS_RSS = """
import json, time
from wasm_runner import Limits, Sandbox

def rss_mb():
    with open('/proc/self/status') as f:
        return next(int(line.split()[1]) for line in f if line.startswith('VmRSS:')) / 1024

sb = Sandbox('default', prestart=0)
for _ in range(5):
    assert sb.run('print(1)').ok
time.sleep(0.5)
base = rss_mb()
sessions = [sb.session(limits=Limits(memory_mb=104)) for _ in range(8)]
for s in sessions:
    r = s.run('x = bytearray(40 << 20)\\nfor i in range(0, len(x), 4096): x[i] = 1')
    assert r.ok, r.stderr
opened = rss_mb()
for s in sessions:
    s.close()
for _ in range(10):  # fresh runs after: released slots must not bring the pages back
    assert sb.run('print(2)').ok
time.sleep(0.5)
print(json.dumps({'base': base, 'opened': opened, 'closed': rss_mb()}))
"""


def test_closing_sessions_gives_their_memory_back() -> None:
    """Issue 20: with the pooling allocator's 128 MiB kept per released slot, closing sessions
    raised the idle RSS. Now what the allocator keeps is bounded (engine.retained_bytes), so the
    memory of closed sessions comes back."""
    done = subprocess.run([sys.executable, "-c", SESSIONS_RSS], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    held = rss["opened"] - rss["base"]
    assert held >= 8 * 40 * 0.8, rss  # the sessions did hold their memory
    assert rss["closed"] < rss["opened"], rss  # closing them lowered the RSS
    bound = engine.retained_bytes() / 2**20 + 64  # the allocator's bound + noise (threads, heap)
    assert rss["closed"] - rss["base"] <= bound, rss
