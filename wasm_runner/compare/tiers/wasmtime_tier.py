"""Tier 4: this project's server tier, CPython on WASI in a fresh wasmtime instance per run."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ...limits import Limits
from ..outcome import Outcome
from .base import Tier

__all__ = ["WasmtimeTier"]

if TYPE_CHECKING:
    from ...sandbox import Sandbox


class WasmtimeTier(Tier):
    family = "wasm"

    def __init__(self, runtime: str = "default") -> None:
        self.runtime = runtime
        self.name = "wasmtime" if runtime == "default" else f"wasmtime-{runtime}"
        self.description = (f"wasm-runner Sandbox (runtime {runtime!r}): fresh wasmtime instance, fuel, "
                            "epoch deadline, memory cap, output cap, disk quota, WASI grants only")
        self._sandbox: Sandbox | None = None
        self._inflight: set[threading.Event] = set()
        self._lock = threading.Lock()

    def available(self) -> tuple[bool, str]:
        try:
            from ...runtimes import RuntimeUnavailable, get_runtime
        except ImportError as exc:
            return False, f"wasm_runner runtimes cannot be imported: {exc}"
        try:
            rt = get_runtime(self.runtime)
        except (RuntimeUnavailable, ValueError, KeyError) as exc:
            return False, str(exc)
        from importlib.metadata import PackageNotFoundError, version

        try:
            wt_version = version("wasmtime")
        except PackageNotFoundError:
            wt_version = "?"
        return True, f"runtime {rt.name}, wasmtime-py {wt_version}"

    def prepare(self) -> None:
        from ...sandbox import Sandbox

        self._sandbox = Sandbox(self.runtime)

    def run(self, source: str, limits: Limits) -> Outcome:
        assert self._sandbox is not None, "prepare() first"
        cancel = threading.Event()
        with self._lock:
            self._inflight.add(cancel)
        try:
            return Outcome.from_result(self._sandbox.run(source, limits=limits, cancel=cancel))
        finally:
            with self._lock:
                self._inflight.discard(cancel)

    def abort(self) -> None:
        with self._lock:
            for event in self._inflight:
                event.set()

    def cleanup(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
