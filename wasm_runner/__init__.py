"""wasm-runner: run untrusted Python safely, in CPython on WASI under wasmtime.

    >>> from wasm_runner import run
    >>> run("print('hi')").stdout
    'hi\\n'

The public API is this module's ``__all__``; every other module is internal.
"""

from .errors import WasmRunnerError
from .execution import Caller, Executor, Job, Policy, Refused
from .host_functions import HostFunctions
from .limits import InvalidLimits, Limits
from .result import RESULT_JSON_SCHEMA, FileOut, Output, Result, Status
from .runtimes import RuntimeUnavailable, runtime_names
from .sandbox import Sandbox, Session, SessionEnded, SnapshotFailed, SnapshotRefused, run
from .wasi import InputSource

__version__ = "0.1.0"

__all__ = [
    "Caller",
    "Executor",
    "FileOut",
    "HostFunctions",
    "InputSource",
    "InvalidLimits",
    "Job",
    "Limits",
    "Output",
    "Policy",
    "RESULT_JSON_SCHEMA",
    "Refused",
    "Result",
    "RuntimeUnavailable",
    "Sandbox",
    "Session",
    "SessionEnded",
    "SnapshotFailed",
    "SnapshotRefused",
    "Status",
    "WasmRunnerError",
    "run",
    "runtime_names",
]
