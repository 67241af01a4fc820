"""Admission: whether a run or a session may start now, and what it holds while it lives.

Every guest the server runs is admitted first: it takes a place (a run slot, or a session's memory
reservation) within this replica's bounds and, with several replicas, a lease of its key's (and its
user's) counts shared by all of them. What does not fit now waits in a bounded queue or is refused
with a ``Refused`` (429 with an honest ``Retry-After``; ``503 draining`` while the replica drains),
which every face answers in its own way (the HTTP face as JSON, ``http.errors``; MCP as a tool
error). An executor without a gate (the CLI, MCP over stdio, Python callers) admits every run.

What lives where, in reading order:

- ``gate``: admission as the executor sees it: the ``Gate`` Protocol (acquire, reserve, park,
  resume), the ``Ticket`` it hands out, the ``Claims`` of counts shared with other processes.
- ``replica``: this replica's admission, ``Admission``: the running cap, the bounded FIFO queue,
  the memory budget, per-key and per-user places, fair shares, parked runs (waiting for input) and
  resumed ones ahead of the queue; ``Busy``, its refusal (``Busy.refusal()``: a ``Refused`` 429).
- ``leases``: the cross-replica counts as a Protocol, ``Leases``; admission depends only on it.
  Its Redis implementation needs scale-out's shared state, so it stays there
  (``wasm_runner.scaleout.leases.RedisLeases``).
- ``parking``: ``Parking``, the input source of an admitted run that gives its slot back while the
  guest waits for input and takes one again (ahead of the queue) when input arrives.
- ``server_gate``: the server's ``Gate``, ``AdmissionGate``: the leases first, then this replica's
  place; refusals as ``Refused`` and counted (``on_refused``); ``Opening``, whether the replica
  still takes new work.
- ``memory``: memory accounting: what a run or session holds of the budget (``resident_mb``, the
  executor's ``memory_for``) and what the server holds of it for itself (``server_memory_mb``,
  from the ``ServerShape`` of its settings).

The drain and the replica's lifecycle (warming / ready / draining) are not admission's and stay in
``wasm_runner.scaleout.drain``: the drain is a replica's shutdown among replicas, which stops
admission but also cancels the executor's runs, hands sessions over to other replicas and answers
the balancer's readiness probe (with Redis's health). Admission sees only whether the replica still
takes work (``Opening``, which ``scaleout.drain.Lifecycle`` implements), and the drain sees only
admission's load (``scaleout.drain.Load``, which ``Admission`` implements).

This is a core package: it imports no face and no part of ``wasm_runner.scaleout`` (an
import-linter contract says so). It sits below the executor's runner and the session store and
above jobs, policies and the refusal (``execution.running`` and ``sessions`` import it through its
modules). The names below are re-exported here: ``from wasm_runner.admission import X`` is the
way to use them.
"""

from .gate import Claims, Gate, Ticket
from .leases import Leases
from .memory import ServerShape, resident_mb, server_memory_mb
from .parking import Parking
from .replica import Admission, Busy, ReplicaTicket
from .server_gate import AdmissionGate, Opening

__all__ = ["Admission", "AdmissionGate", "Busy", "Claims", "Gate", "Leases", "Opening", "Parking", "ReplicaTicket",
           "ServerShape", "Ticket", "resident_mb", "server_memory_mb"]
