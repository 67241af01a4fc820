"""One guest run as every face describes it: ``Job`` (what code and inputs, under which limits, for
whom and under which policy), and the callback its output streams to."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ..host_functions import CallRecord, CallTally, HostFunction, HostFunctions, as_host_functions
from ..limits import Limits
from ..network import NetworkRecord, NetworkRule, RunNetwork, describe_off
from .policy import LOCAL_CALLER, LOCAL_POLICY, CallerLike, PolicyLike

__all__ = ["Job", "OutputCallback"]

OutputCallback = Callable[[str, bytes], None]  # (stream, chunk) from the guest's thread


@dataclass
class Job:
    """One guest run as every face describes it: what code and inputs, under which limits, for
    whom and under which policy.

    ``kind`` names the face for metrics and the audit log (``run``, ``stream``, ``ws``,
    ``session``, ``mcp``, ``mcp_session``, ``cli``, ``python``). ``out_dir`` is a host folder
    granted at ``/out`` (the CLI's ``--out``); without it, ``profile.files_out`` grants a fresh
    ``/out`` whose files come back in the result. ``profile.data_dir`` is shown at ``/data``.

    >>> Executor().run_sync(Job("print(6 * 7)")).stdout
    '42\\n'
    """

    code: str | bytes
    limits: Limits = field(default_factory=Limits)
    runtime: str = "default"
    stdin: str | bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    display: bool | str = False  # True, False or "figures"
    tenant: CallerLike = LOCAL_CALLER
    client: str = "local"
    kind: str = "python"
    profile: PolicyLike = LOCAL_POLICY
    session_id: str | None = None
    request_id: str = field(default_factory=lambda: secrets.token_hex(8))
    filename: str | None = None
    out_dir: str | None = None
    # the app's functions the code may call (``from host import name``); their calls are counted
    # in ``host_calls`` (by name and outcome: what the metrics and the audit log record)
    functions: Mapping[str, HostFunction] | HostFunctions | None = None
    host_calls: CallTally = field(default_factory=CallTally)
    # the operator's network rules for this run's key and profile (none: the network is off, and
    # ``network_off`` is the sentence every request gets); each request is kept in ``network_requests``
    network_rules: tuple[NetworkRule, ...] = ()
    network_off: str = field(default_factory=lambda: describe_off(None, None))
    network_requests: list[NetworkRecord] = field(default_factory=list)

    def network(self) -> RunNetwork:
        """The run's network: its rules, each request recorded in ``network_requests``."""
        return RunNetwork(self.network_rules, self.network_off, on_request=self.network_requests.append)
    # packages of the operator's wheelhouse the run asks for by name (``wasm_runner.packages``);
    # ``# requires:`` lines and imports of the wheelhouse's modules ask too
    packages: tuple[str, ...] = ()
    # what the run was given of the wheelhouse (name==version each; set when it starts): the audit log's
    packages_granted: tuple[str, ...] = ()

    def host_functions(self, loop: asyncio.AbstractEventLoop | None) -> HostFunctions | None:
        """The job's functions as a run gets them: coroutines on ``loop`` (the face's; None: a
        background loop) unless the functions name their own, every call counted."""
        if self.functions is None:
            return None
        fns = as_host_functions(self.functions)
        tally, hook = self.host_calls, fns.on_call

        def on_call(record: CallRecord) -> None:
            tally.add(record)
            if hook is not None:
                hook(record)

        return replace(fns, loop=fns.loop or loop, on_call=on_call)
