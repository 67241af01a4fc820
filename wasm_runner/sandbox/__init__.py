"""The sandbox: one fresh wasmtime instance per run (``Sandbox.run``), long-lived sessions
(``Sandbox.session``), warm pools, and the process-wide default sandboxes (``run``).

Modules, in reading order: ``core`` (Sandbox), ``workspace`` (run folders and grants), ``wrapper``
(the guest-side wrapper and its jobs), ``guest`` (guest threads, budgets at hand-over),
``classify`` (how a run ended -> ``Result``), ``session`` (with ``session_state`` and ``sealing``:
saved sessions), ``pool``, ``default``, and ``provider`` (the server's sandbox provider on top of
``default``: a refusal when a runtime is not installed, the profiles' warm pools; imported from its
module, ``wasm_runner.sandbox.provider``, as it uses ``execution.Refused``). Input rules
live in ``wasm_runner.inputs``; the WASI host in ``wasm_runner.wasi``. Only ``core`` and
``default`` know ``Sandbox``; the modules below it are handed only what they use, never the
sandbox: a guest its ``guest.GuestModule`` (a frozen record of the loaded module), a warm pool
two callables (start a slot; the sandbox's runs in flight), a session its ``session.SessionHost``
(a frozen record: start a guest, fuel, memory cap, what snapshots are made against), the
wrapper's compilation a run (``wrapper.RunCode``). No import leads back to ``core``.
"""

from .core import OutputCallback, Sandbox
from .default import default_sandbox, default_sandboxes, run
from .pool import default_prestart
from .sealing import SnapshotRefused
from .session import Session, SessionEnded
from .session_state import SnapshotFailed

__all__ = [
    "OutputCallback",
    "Sandbox",
    "Session",
    "SessionEnded",
    "SnapshotFailed",
    "SnapshotRefused",
    "default_prestart",
    "default_sandbox",
    "default_sandboxes",
    "run",
]
