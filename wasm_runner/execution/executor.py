"""``Executor``: the one way every face reaches guests. It admits a ``Job`` (its ``Gate``), runs the
blocking sandbox call on a worker thread (cancelled when the awaiting task is) in the sandbox its
``SandboxProvider`` gives, records how it ended (its ``Recorder``) and keeps the one ``sessions.SessionStore``. Admission, the worker threads and the record
of each run are its ``running.Runner``'s, which the session store uses too.

``run_sync`` is the same call on the caller's thread for code without an event loop (the CLI).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ..admission.gate import Claims
from ..host_functions import InvalidFunctions
from ..packages import PackageRefused, PackageStore, default_store
from ..packages.store import granted_packages, runtime_image
from ..packages.tiers import BrowserModules
from ..result import Result
from ..sessions import Pausing, SessionListener, SessionStore
from .job import Job, OutputCallback
if TYPE_CHECKING:
    from ..sandbox.core import Sandbox
    from ..wasi.guestio import InputSource
from .running import LocalSandboxes, OneSandbox, Recorder, Runner, RunnerOptions, SandboxProvider

__all__ = ["Executor", "LocalSandboxes", "OneSandbox", "Recorder", "SandboxProvider"]


class Executor(Runner):
    """Runs jobs and keeps sessions for one server (or one local face).

    ``sandboxes`` (one ``SandboxProvider``: the sandboxes, warm pools, the memory a run holds,
    readiness), ``gate``, ``recorder`` (one ``Recorder``: every run's and session event's record)
    and ``workers`` are its ``Runner``'s (``running.py``). ``sessions`` is its one ``SessionStore``
    (``max_sessions``, ``session_*``: its caps and expiry; ``session_listener`` is told of every
    session, ``session_claims`` counts them across processes, ``session_pausing`` pauses idle ones
    to disk; ``max_fork_copies``: the most copies one fork makes). ``packages``: the operator's
    wheelhouse (default ``packages.default_store()``: ``$WASM_RUNNER_PACKAGES_LOCK``, else none).
    ``browser_modules``: what gives the browser tier's modules, for refusals that name the tier
    that has a package (the server's playground pages give it; None: the browser tier has none).
    """

    def __init__(
        self,
        sandboxes: SandboxProvider | None = None,
        *,
        max_sessions: int = 16,
        max_fork_copies: int = 8,
        session_idle_seconds: float = 900.0,
        session_max_lifetime_seconds: float = 3600.0,
        session_listener: SessionListener | None = None,
        session_claims: Claims | None = None,
        session_pausing: Pausing | None = None,
        packages: PackageStore | None = None,
        browser_modules: BrowserModules | None = None,
        **runner: Unpack[RunnerOptions],
    ) -> None:
        super().__init__(sandboxes, **runner)
        self.packages = packages if packages is not None else default_store()
        self.browser_modules = browser_modules
        self.sessions = SessionStore(
            self,
            max_sessions=max_sessions,
            idle_seconds=session_idle_seconds,
            max_lifetime_seconds=session_max_lifetime_seconds,
            listener=session_listener,
            claims=session_claims,
            pausing=session_pausing,
        )
        self.sessions.max_fork_copies = max_fork_copies
        self.sessions.packages = self.packages
        self.sessions.browser_modules = browser_modules
        if self.recorder is not None:  # forks, snapshots, resumes: the audit log
            self.sessions.on_event = self.recorder.session_event

    def package_folders(self, job: Job) -> list[Path]:
        """The wheelhouse's folders ``job`` gets, recorded in ``job.packages_granted``
        (``PackageRefused``: the sentence its user sees)."""
        granted = granted_packages(self.packages, job.runtime, job.code, job.packages, self.browser_modules)
        if not granted or self.packages is None:
            return []
        job.packages_granted = tuple(f"{p.name}=={p.version}" for p in granted)
        return self.packages.mounted(runtime_image(job.runtime))

    # -- the one place a fresh-instance run reaches the sandbox ------------------------------
    def _sandbox_call(
        self,
        job: Job,
        cancel: threading.Event,
        on_output: OutputCallback | None,
        input_source: InputSource | None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Result:
        sandbox = self.sandboxes.sandbox_for(job.runtime, job.profile.image)
        data_dir = job.profile.data_dir
        try:
            functions = job.host_functions(loop)
        except InvalidFunctions as exc:
            return Result.invalid(f"Invalid functions: {exc}.", job.runtime)
        try:
            packages = self.package_folders(job)
        except PackageRefused as exc:
            return Result.invalid(str(exc), job.runtime)
        return sandbox.run(
            job.code,
            stdin=job.stdin,
            limits=job.limits,
            data_dir=str(data_dir) if data_dir else None,
            out_dir=job.out_dir,
            files=job.files or None,
            collect_out=job.profile.files_out,
            filename=job.filename,
            display=job.display,
            on_output=on_output,
            input_source=input_source,
            cancel=cancel,
            pool=self.sandboxes.pool_for(sandbox, job.profile),
            functions=functions,
            network=job.network(),
            packages=packages,
        )

    async def run(
        self,
        job: Job,
        *,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
    ) -> Result:
        """Admit ``job`` and run it in a fresh instance. Raises ``Refused`` when there is no room;
        calls ``on_admitted`` once it has a slot. Cancelling the awaiting task cancels the guest."""
        await self.ready(job.runtime, job.profile.image)
        loop = asyncio.get_running_loop()  # where the job's coroutine functions run
        return await self.admit_and_run(
            job,
            lambda c, source: self._sandbox_call(job, c, on_output, source, loop),
            memory_mb=self.sandboxes.memory_for(job.profile, job.runtime, job.limits),
            cancel=cancel,
            on_admitted=on_admitted,
            input_source=input_source,
        )

    async def run_with(
        self,
        job: Job,
        call: Callable[[Sandbox, str | None, threading.Event], Result],
        *,
        cancel: threading.Event | None = None,
    ) -> Result:
        """Admit ``job`` and run ``call(sandbox, pool, cancel)`` in place of its one run: work of
        more than one instance (an exercise's test check: the student's and the test's) that is
        still one job for admission, caps, metrics and the audit log."""
        def sandbox_call(c: threading.Event, _source: InputSource | None) -> Result:
            sandbox = self.sandboxes.sandbox_for(job.runtime, job.profile.image)
            return call(sandbox, self.sandboxes.pool_for(sandbox, job.profile), c)

        await self.ready(job.runtime, job.profile.image)
        return await self.admit_and_run(job, sandbox_call,
                                        memory_mb=self.sandboxes.memory_for(job.profile, job.runtime, job.limits),
                                        cancel=cancel)

    def run_sync(
        self,
        job: Job,
        *,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
    ) -> Result:
        """``run`` on the calling thread, for code without an event loop (the CLI, scripts).

        Only for an executor without a gate: a server's admission queue lives on its event loop.
        """
        if self.gate is not None:
            raise RuntimeError("this executor admits runs on its event loop: use `await run(job)`")
        cancel = cancel or threading.Event()
        result = self._guarded(lambda: self._sandbox_call(job, cancel, on_output, input_source))
        self._record(job, result, 0.0)
        return result
