"""One way into the sandbox for every face: ``Executor`` runs ``Job``s and keeps a session store.

Every face describes a guest run as a ``Job`` (who asks, under which policy, what code and input)
and hands it to an ``Executor``:

- the HTTP service (run, stream, WebSocket, sessions) and the MCP tools mounted at ``/mcp`` share
  the server's executor, whose ``Gate`` is the server's admission (``wasm_runner.admission``:
  ``max_running``, queue, memory budget, per-key concurrency), whose ``SandboxProvider`` is the
  server's (``sandbox.provider.ServerSandboxes``: sandboxes, warm pools, warm-up, memory held)
  and whose ``Recorder`` writes the metrics and the audit log (``observability.RunRecord``);
- the MCP tools over stdio, the CLI and Python callers use an executor without a gate (no server:
  nothing to share; ``LocalSandboxes`` or ``OneSandbox``), which still runs every guest the same way and keeps sessions under caps.

``Executor.run`` admits a job, runs the blocking sandbox call on a worker thread (cancelled when
the awaiting task is), and reports how it ended; ``Executor.run_sync`` is the same call on the
caller's thread for code without an event loop (the CLI). ``Executor.sessions`` is its one
session manager (``wasm_runner.sessions.SessionStore``: the session package, which uses this one's
runner, jobs, policies and refusal, and admission's gate, through their modules).

This is a core package: it imports no web or MCP framework. A refusal is a ``Refused`` (status,
stable code, one plain sentence) that the HTTP face answers as JSON and the MCP face as a tool
error.

Reading order: ``refusal`` (``Refused``), ``policy`` (``Caller``, ``Policy``: who asks, under which
policy), ``job`` (``Job``), ``running`` (``Runner``: a job admitted through its gate, run on a worker
thread, recorded; what the session store uses of its executor), ``executor`` (``Executor``, a
``Runner`` with its ``SessionStore``). Admission as the executor sees it (``Gate``, ``Ticket``,
``Claims``) is ``wasm_runner.admission``, which uses this package's policies and refusal. The
names below are re-exported here: ``from wasm_runner.execution import X`` is the way to use them.
"""

from .executor import Executor, LocalSandboxes, OneSandbox, Recorder, SandboxProvider
from .job import Job
from .policy import Caller, CallerLike, Policy, PolicyLike
from .refusal import Refused

__all__ = ["Caller", "CallerLike", "Executor", "Job", "LocalSandboxes", "OneSandbox", "Policy", "PolicyLike",
           "Recorder", "Refused", "SandboxProvider"]
