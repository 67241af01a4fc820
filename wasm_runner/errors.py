"""The root of every exception wasm-runner defines: ``except WasmRunnerError`` catches any of them.

    >>> from wasm_runner import Limits, WasmRunnerError
    >>> try:
    ...     Limits(cpu_seconds=-1).validate()
    ... except WasmRunnerError as exc:
    ...     type(exc).__name__
    'InvalidLimits'

Each error keeps the standard base that says what kind of failure it is (``ValueError`` for a bad
value, ``RuntimeError`` for something missing, ``OSError`` for a path), as its second base, so
``except ValueError`` and the like go on catching what they caught. Imports nothing: every module
of the package, core or face, may use it.
"""

from __future__ import annotations

__all__ = ["WasmRunnerError"]


class WasmRunnerError(Exception):
    """Base class of every exception wasm-runner raises on the host (``tests/test_errors.py``
    checks that each one in the package derives from it)."""
