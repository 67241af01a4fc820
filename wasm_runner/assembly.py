"""The composition root: the running service built from its settings, in one place.

``assemble(config)`` builds every part from its own settings section and hands each the typed
collaborators it needs (a part never receives the whole service, and none calls back into it):

- shared state (``scaleout.state``, ``config.scale_out``): Redis, or None on one host; the
  gatekeeper (``http.auth``: keys, rate limits, users) over it;
- admission (``wasm_runner.admission``, ``config.admission``): this replica's ``Admission``, the
  leases across replicas (``scaleout.leases``) and the lifecycle (``scaleout.drain``: warming,
  ready, draining) behind the executor's ``AdmissionGate``;
- the sandboxes (``sandbox.provider.ServerSandboxes``: sandboxes, warm pools, warm-up, memory a
  run holds) and the record (``observability.RunRecord``: metrics and audit): the executor's one
  ``SandboxProvider`` and one ``Recorder``;
- sessions (``wasm_runner.sessions``, ``config.sessions``): the executor's session store, the
  paused-session store and its ``Pausing``, recovery of a lost replica's sessions;
- downloads (``wasm_runner.downloads``, ``config.downloads``), the directory, forwarding, the hop and the
  drain (``scaleout``, ``config.scale_out``); the host-function catalog (``config.functions``) and
  the exercises (``config.exercises_dir``).

The result is the ``http.service.Service`` the routes and the MCP tools receive: typed fields,
plus the request helpers a face needs. ``running(service)`` is its lifetime (the sweep of expired
sessions, the directory's republishing, the warm-up, the heartbeat, the shutdown); ``build_app``
mounts it all as the Starlette app (``http.mount``), ``create_app`` with the playground pages
(what ``server.py`` and ``wasm-runner serve`` serve).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from .admission import Admission, AdmissionGate, server_memory_mb
from .cache import cache_dir
from .execution import Executor
from .host_functions.declared import Catalog
from .http.auth import Gatekeeper
from .downloads import DownloadStore
from .exercises.catalog import ExerciseCatalog
from .exercises.hint_counts import HintCounts
from .http.mount import mount
from .observability import AuditLog, Metrics, RunRecord
from .http.relay import Hop
from .http.results import DEFAULT_ISSUER, ResultSigner
from .http.service import Service
from .native_heap import TRIM_SECONDS, trim
from .lti.onetime import MemoryStore, OneTimeStore, RedisStore
from .lti.registration import Platform
from .lti.tool import SENT_KEEP_SECONDS, LtiTool
from .network import BrowserGrant, BrowserRuns, NetworkRecord, NetworkRule
from .sandbox.default import sandbox_key
from .sandbox.provider import ServerSandboxes
from .scaleout.directory import Directory, directory_for
from .scaleout.drain import Drain, Lifecycle
from .scaleout.forwarding import Forwarding
from .scaleout.leases import RedisLeases
from .scaleout.signing import Signer
from .packages import LockError, PackageStore
from .packages.tiers import BrowserModules
from .scaleout.state import SharedState
from .sessions import PausedStore, Pausing, SessionRecovery, paused_store
from .settings import AdmissionSettings, ConfigError, ServerConfig, SessionSettings, load_config
from .warmup import RETRY_SECONDS
from .outbox import FileStore, RedisStore as RedisOutboxStore, Store
from .webhooks import CLAIM_SECONDS as WEBHOOK_CLAIM_SECONDS, Webhooks

__all__ = ["assemble", "browser_networks", "build_app", "create_app", "running", "snapshot_secret"]

SWEEP_SECONDS = 1.0
log = logging.getLogger("wasm_runner.http")


def _package_store(lock: Path | str | None) -> PackageStore | None:
    """The operator's wheelhouse of ``packages_lock`` (a lock that cannot be read: ``ConfigError``)."""
    if not lock:
        return None
    try:
        return PackageStore.open(Path(lock))
    except LockError as exc:
        raise ConfigError(f"packages_lock: {exc}") from None


def snapshot_secret(config: ServerConfig) -> bytes:
    """The secret session snapshots are sealed under (``sandbox.sealing``):
    ``$WASM_RUNNER_SNAPSHOT_SECRET``, else one derived from the replicas' cluster secret (every
    replica opens every replica's snapshots), else this machine's own (the cache folder)."""
    from .sandbox.sealing import default_secret

    shared = None
    if config.scale_out.cluster_secret:
        shared = hmac.new(config.scale_out.cluster_secret.encode(), b"wasm-runner session snapshots",
                          hashlib.sha256).digest()  # fmt: skip
    return default_secret(shared)


def result_signer(config: ServerConfig) -> ResultSigner:
    """What signs check results (``http.results``): ``result_key_file``'s keys, else this
    machine's own (the cache folder); ``iss`` is ``result_issuer``, else (one host) ``advertise_url``,
    else "wasm-runner". A cluster (``redis_url``) without ``result_issuer`` signs with "wasm-runner"
    on every replica: ``advertise_url`` is each replica's own address, and a platform checking
    ``iss`` must see one issuer whichever replica ran the check (docs/lms.md, "Signed results").
    Replicas on several hosts must share ``result_key_file`` (nothing is derived from the cluster
    secret for an asymmetric key): a cluster without one is warned about."""
    if config.scale_out.shared and config.result_key_file is None:
        log.warning("redis_url is set but result_key_file is not: each host signs check results with its "
                    "own key; set [server] result_key_file, the same file on every replica (docs/lms.md)")
    if config.result_issuer:
        return ResultSigner(config.result_key_file, config.result_issuer)
    if config.scale_out.shared:
        log.warning("redis_url is set but result_issuer is not: every replica signs check results with iss "
                    "%r; set [server] result_issuer to the URL the platform knows (docs/lms.md)", DEFAULT_ISSUER)
        return ResultSigner(config.result_key_file, DEFAULT_ISSUER)
    return ResultSigner(config.result_key_file, config.scale_out.advertise_url)


def lti_tool(config: ServerConfig, shared: SharedState | None, signer: ResultSigner, audit: AuditLog) -> LtiTool | None:
    """The LTI 1.3 tool (``wasm_runner.lti``) when ``[[lti.platforms]]`` registers any: state and
    nonce in Redis with ``redis_url`` (every replica takes them once), else in memory; scores
    through the outbox folder (``[lti] outbox_dir``, else the private cache folder); signed with
    the tool's keys (the signed results' keys, one JWKS); each platform call audit-logged. Scores
    wait in Redis with ``redis_url`` (one queue for every replica), else in the outbox folder."""
    settings = config.lti
    if not settings.platforms:
        return None
    store: OneTimeStore
    outbox: Store
    kept = {"claim_seconds": settings.claim_seconds, "sent_keep_seconds": SENT_KEEP_SECONDS}  # the page's "sent"
    if shared is not None:
        store = RedisStore(shared, shared.key("lti", ""))
        outbox = RedisOutboxStore(shared, "lti", **kept)
    else:
        folder = settings.outbox_dir or cache_dir() / "lti-outbox"
        store = MemoryStore(best_folder=folder / "best")
        outbox = FileStore(folder, **kept)

    def on_call(platform: Platform, method: str, path: str, status: int | str) -> None:
        audit.event("lti_call", platform=platform.name, method=method, path=path, status=str(status))

    # the launch session's iss: the same on every replica (advertise_url is each replica's own)
    return LtiTool(settings, keys=signer.keys, store=store, outbox=outbox, on_call=on_call,
                   session_issuer=config.result_issuer or "wasm-runner")  # fmt: skip


def webhooks_for(config: ServerConfig, shared: SharedState | None, audit: AuditLog) -> Webhooks | None:
    """The keys' webhooks (``wasm_runner.webhooks``), or None when no key names a webhook_url: the
    outbox in Redis with ``redis_url`` (every replica delivers), else in ``webhook_outbox_dir``
    (default: ``webhooks`` in the cache folder); every step in the audit log."""
    rules = {key.name: key for key in config.api_keys if key.webhook_url}
    if not rules:
        return None
    outbox: Store
    if shared is not None:
        outbox = RedisOutboxStore(shared, "webhook", claim_seconds=WEBHOOK_CLAIM_SECONDS)
    else:
        outbox = FileStore(config.webhook_outbox_dir or cache_dir() / "webhooks", claim_seconds=WEBHOOK_CLAIM_SECONDS)
    return Webhooks(outbox, rules, audit.event, retry_seconds=config.webhook_retry_seconds,
                    max_attempts=config.webhook_max_attempts)


def admission_for(settings: AdmissionSettings, sessions: SessionSettings, server_mb: int) -> Admission:
    """This replica's admission (``config.admission``); a session holds its slot while idle."""
    admission = Admission(
        settings.max_running,
        settings.max_queue,
        settings.memory_budget_mb,
        settings.queue_timeout_seconds,
        tenant_memory_mb=settings.tenant_memory_mb,
        tenant_queue=settings.tenant_queue_places,
        hold_seconds=sessions.session_idle_seconds,
        max_waiting=settings.max_waiting_runs,
        tenant_waiting=settings.max_waiting_runs_per_key,
    )
    # instances started ahead of time and the allocator's resident pages count first
    admission.hold_for_server(server_mb)
    return admission


def pausing_for(settings: SessionSettings, replica: str | None, directory: Directory,
                secret: Callable[[], bytes]) -> tuple[PausedStore | None, Pausing | None]:
    """Idle sessions paused to disk (``config.sessions``; None: never), in the folder replicas share."""
    if not settings.session_pause_seconds:
        return None, None
    store = paused_store(settings.snapshot_dir, replica, settings.snapshot_key_bytes)
    return store, Pausing(
        store, after_seconds=settings.session_pause_seconds,
        lifetime_seconds=settings.session_paused_lifetime_seconds,
        per_key=settings.session_paused_per_key,
        secret=secret(),
        keep=directory.snapshots_kept if directory.shared else None,
    )  # fmt: skip


def assemble(config: ServerConfig, browser_modules: BrowserModules | None = None) -> Service:
    """Every part of the running service, built from ``config``: the ``Service`` the faces receive.
    ``browser_modules``: the browser tier's modules (given where its pages are mounted; refusals
    of the server tier name the browser tier when it has a package)."""
    sessions = config.sessions
    secret = functools.cache(functools.partial(snapshot_secret, config))
    shared = SharedState.from_settings(config.scale_out)  # None: everything local (one host)
    gatekeeper = Gatekeeper.from_config(config, shared)
    admission = admission_for(config.admission, sessions, server_memory_mb(config))
    metrics = Metrics()
    audit = AuditLog(config.audit_log, keep_code=config.audit_code == "full")
    lifecycle = Lifecycle(shared)  # warming / ready / draining (/readyz, SIGTERM)
    # per-key runs in flight and open sessions counted across replicas, or None (local)
    leases = RedisLeases(shared) if shared is not None else None
    try:  # the host functions the config declares, ready to call (entry points imported)
        catalog = Catalog(config.functions)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    # where sessions and download links live, for every replica (scaleout.directory)
    directory = directory_for(shared, config.scale_out.advertise_url)
    downloads = DownloadStore(
        config.downloads.download_ttl_seconds, config.downloads.download_store_bytes,
        config.downloads.download_tenant_bytes, directory=directory,
    )  # fmt: skip
    sandboxes = ServerSandboxes(quick_tier=config.quick_tier, wait_seconds=config.admission.queue_timeout_seconds)
    record = RunRecord(metrics, audit)  # every run's and session event's record, refusals counted
    snapshots, pausing = pausing_for(sessions, shared.replica_id if shared else None, directory, secret)
    executor = Executor(
        sandboxes,
        packages=_package_store(config.packages_lock),
        browser_modules=browser_modules,
        gate=AdmissionGate(admission, record.refused, leases, lifecycle),
        recorder=record,
        # a parked run (waiting for input) keeps its worker thread
        workers=config.admission.max_running + config.admission.max_waiting_runs + 4,
        max_sessions=sessions.max_sessions,
        max_fork_copies=sessions.max_fork_copies,
        session_idle_seconds=sessions.session_idle_seconds,
        session_max_lifetime_seconds=sessions.session_max_lifetime_seconds,
        # the directory learns of every session; the leases count them per key across replicas
        session_listener=directory if directory.shared else None,
        session_claims=leases,
        session_pausing=pausing,
    )
    store = executor.sessions  # HTTP and MCP sessions alike
    # the internal hop: who holds a session or link, and the call relayed to it
    signer = Signer(config.scale_out.cluster_secret) if config.scale_out.cluster_secret else None
    forwarding = Forwarding(directory, store.holds, signer)
    longest = max((p.limits.wall_seconds for p in config.profiles.values()), default=60.0)
    recover = None if snapshots is None else SessionRecovery(
        snapshots, directory, store, gatekeeper.vouched, profiles=config.profiles, runtimes=config.runtimes,
        paused_lifetime_seconds=sessions.session_paused_lifetime_seconds)  # fmt: skip
    hop = Hop(forwarding, read_timeout=longest + config.admission.queue_timeout_seconds + 30.0, recover=recover)
    result_keys = result_signer(config)
    metrics.watch(
        queue_depth=lambda: admission.waiting,
        running=lambda: admission.running,
        waiting=lambda: admission.parked,
        memory_mb=lambda: admission.memory_mb,
        sessions=lambda: len(store),
        paused_sessions=lambda: store.paused_count,
    )
    return Service(
        config=config, shared=shared, gatekeeper=gatekeeper, admission=admission, metrics=metrics,
        audit=audit, lifecycle=lifecycle, leases=leases, catalog=catalog,
        exercises=ExerciseCatalog(config.exercises_dir), directory=directory, downloads=downloads,
        sandboxes=sandboxes, snapshots=snapshots, executor=executor, forwarding=forwarding, hop=hop,
        # the drain on SIGTERM (http.serving.DrainingServer)
        drain=Drain(lifecycle, admission, executor, store, leases),
        secret=secret,
        results=result_keys,
        lti=lti_tool(config, shared, result_keys, audit),
        hints=HintCounts(shared),
        webhooks=webhooks_for(config, shared, audit),
        browser_networks=browser_networks(audit, config.network, shared),
    )  # fmt: skip


def browser_networks(audit: AuditLog, rules: Mapping[str, NetworkRule], shared: SharedState | None) -> BrowserRuns:
    """The browser tier's network grants (in Redis with shared state), each request of theirs a
    line of the audit log."""

    def heard(grant: BrowserGrant, record: NetworkRecord) -> None:
        audit.network_request(tenant=grant.tenant, user=grant.user, client=grant.client, run=grant.run,
                              request=record.to_dict())

    return BrowserRuns(on_request=heard, shared=shared, rules=rules)


def _profile_runtimes(config: ServerConfig) -> list[tuple[str, str | None]]:
    """The (runtime, image) the profiles of ``config`` use, each once (what start-up prepares)."""
    keys = [sandbox_key(p.runtime, p.image) for p in config.profiles.values()]
    return list(dict.fromkeys(keys))


@contextlib.asynccontextmanager
async def running(service: Service) -> AsyncIterator[None]:
    """The service's lifetime: the shared state started, the sweep of expired sessions, the
    directory's entries republished after a Redis restart, the profiles' runtimes prepared in
    the background then their warm pools (``/readyz`` says warming meanwhile), the C heap's free
    pages handed back while no run is in flight (``native_heap.trim``), this replica's
    heartbeat; on exit all of it stopped and the service shut down."""

    async def sweep_forever() -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await service.sessions.sweep()
            except Exception:  # the next sweep tries again: housekeeping never stops
                log.exception("sweeping the sessions failed")

    async def trim_when_idle() -> None:
        # glibc keeps what threads freed in its arenas; handed back between runs (native_heap.py)
        while True:
            await asyncio.sleep(TRIM_SECONDS)
            if service.admission.running == 0:
                await asyncio.to_thread(trim)

    async def warm() -> None:
        # the profiles' runtimes are prepared in the background (compiled the first time on a
        # machine): the app answers at once, runs wait for their runtime, /readyz says warming
        while True:
            preps = [service.sandboxes.warmup.start(rt, image) for rt, image in _profile_runtimes(service.config)]
            service.lifecycle.preparing = preps
            while not all(p.done.is_set() for p in preps):
                await asyncio.sleep(0.2)
            if not any(p.state == "failed" for p in preps):
                break
            # logged by the warm-up; /readyz says runtime_failed; tried again after a while
            await asyncio.sleep(RETRY_SECONDS)
        try:
            await service.executor.call(functools.partial(service.sandboxes.pools.start, service.config.profiles))
        except Exception:
            log.exception("starting the warm pools failed; runs start fresh instances")
        service.lifecycle.warm = True  # /readyz: ready (unless draining or Redis is down)

    if service.shared is not None:
        await service.shared.start()
    tasks = [
        asyncio.ensure_future(sweep_forever()),
        asyncio.ensure_future(  # directory entries back after a Redis restart
            service.directory.keep_published(service.sessions.open_sessions, service.downloads.links)),
        asyncio.ensure_future(warm()),
        asyncio.ensure_future(trim_when_idle()),
    ]
    if service.lti is not None:  # the LTI outbox's worker: scores to the platforms, retried
        tasks.append(asyncio.ensure_future(service.lti.outbox.run_forever()))
    if service.leases is not None:  # this replica's heartbeat; when it lapses, others drop its leases
        tasks.append(asyncio.ensure_future(service.leases.beat_forever()))
    if service.webhooks is not None:  # check results to the keys' webhooks, from the outbox
        tasks.append(asyncio.ensure_future(service.webhooks.outbox.run_forever()))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        # the outboxes' workers hand back what they had claimed: let them (a moment at most)
        await asyncio.wait(tasks, timeout=5)
        try:
            if service.lti is not None:
                await service.lti.close()
            await service.shutdown()
        finally:
            if service.shared is not None:
                await service.shared.close()


def build_app(config: ServerConfig, extra_routes: Sequence[BaseRoute] = (),
              browser_modules: BrowserModules | None = None) -> Starlette:
    """The wasm-runner app for ``config``: the assembled service mounted (``http.mount``), its
    lifetime the app's; ``extra_routes`` are mounted after the API's (``browser_modules``: the
    browser tier's modules when they include its pages)."""
    service = assemble(config, browser_modules)
    return mount(service, lifespan=functools.partial(running, service), extra_routes=extra_routes)


def create_app(config: ServerConfig | None = None) -> Starlette:
    """The wasm-runner web app: API routes, ``/mcp`` and the playground pages. Without a config,
    settings come from ``$WASM_RUNNER_CONFIG`` and ``WASM_RUNNER_*`` variables."""
    from .browser.pages import browser_modules_source, page_routes

    return build_app(config or load_config(), extra_routes=page_routes(), browser_modules=browser_modules_source())
