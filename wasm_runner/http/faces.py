"""What each route module sees of the service: one small Protocol per module (issue 34).

``http.service.Service`` (built by ``wasm_runner.assembly``) satisfies every face; each route
module's ``service_of(request)`` returns the face it declares here, so mypy checks at that one line
that the service still offers what the module uses, and the module's code reaches nothing else:
not the whole ``ServerConfig`` (a face names the one setting or section its routes read), not the
parts another concern owns.

The faces are built from a few capabilities that several routes share:

- ``Authenticates``: ``caller`` (who is this, within their rate?);
- ``Bounded``: ``client_bounds`` (what a client may send: ``[client_bounds]``);
- ``ChoosesPolicy``: ``policy`` (which profile, limits and runtime?);
- ``PreparesJobs``: ``files_in``, ``host_functions``, ``network_for`` (a request made a job);
- ``RunsJobs``: ``run_job`` (admit and run one guest) and ``render`` (its result as JSON);
- ``Streams``: ``RunsJobs`` and the ``sandboxes`` (an SSE stream's start event names the Python);
- ``HoldsSessions``: ``sessions``; ``Audited``: ``audit``; ``SignsResults``: ``results``.

docs/development.md ("Follow one request") lists which face each route module sees.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from starlette.requests import HTTPConnection

from ..admission import Admission
from ..downloads import DownloadStore
from ..execution import Executor, Job, Policy, PolicyLike
from ..exercises.catalog import ExerciseCatalog
from ..exercises.hint_counts import HintCounts
from ..host_functions import HostFunctions
from ..limits import Limits
from ..lti.registration import LtiSettings
from ..lti.tool import LtiTool
from ..network import BrowserRuns, NetworkRule
from ..observability import AuditLog, Metrics
from ..result import Result
from ..sandbox.provider import ServerSandboxes
from ..scaleout.drain import Lifecycle
from ..scaleout.state import SharedState
from ..sessions import SessionStore
from ..settings import ClientBounds, SessionSettings
from ..wasi.guestio import InputSource
from ..webhooks import Webhooks
from .auth import Gatekeeper, Tenant
from .relay import Hop
from .results import ResultSigner
from .schemas import FileIn, LimitsRequest

__all__ = [
    "Authenticates",
    "Bounded",
    "ChoosesPolicy",
    "PreparesJobs",
    "RunsJobs",
    "Streams",
    "HoldsSessions",
    "Audited",
    "SignsResults",
    "RunFace",
    "StreamFace",
    "InteractiveFace",
    "SessionFace",
    "NotebookFace",
    "CheckFace",
    "ExerciseFace",
    "LtiFace",
    "LintFace",
    "FilesFace",
    "NetworkFace",
    "MetaFace",
]


# -- capabilities several routes share --------------------------------------------------------
class Authenticates(Protocol):
    """``Service.caller``: authenticate the request and count it against its rates."""

    async def caller(
        self,
        conn: HTTPConnection,
        *,
        allow_query_key: bool = False,
        key: str | None = None,
        user: str | None = None,
        user_token: str | None = None,
    ) -> Tenant: ...


class Bounded(Protocol):
    """``[client_bounds]``: what a client may send (body sizes, JSON shape, files, hosts)."""

    @property
    def client_bounds(self) -> ClientBounds: ...


class ChoosesPolicy(Protocol):
    """``Service.policy``: the profile, the (tightened) limits and the runtime, or a 4xx."""

    def policy(
        self, tenant: Tenant, profile_name: str | None, asked: LimitsRequest | None, runtime: str | None = None
    ) -> tuple[Policy, Limits, str]: ...


class PreparesJobs(Protocol):
    """What a request adds to its job: its files, its host functions, its network rules."""

    def files_in(self, files: list[FileIn]) -> dict[str, bytes]: ...

    def host_functions(
        self, tenant: Tenant, profile: PolicyLike, names: list[str] | None, request_id: str
    ) -> HostFunctions | None: ...

    def network_for(self, job: Job) -> None: ...


class RunsJobs(Protocol):
    """``run_job`` (admit and run one guest through the executor) and ``render`` (the result)."""

    async def run_job(
        self,
        job: Job,
        *,
        on_output: Callable[[str, bytes], None] | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
    ) -> Result: ...

    def render(self, result: Result, files_as: str = "base64", lang: str | None = None) -> dict[str, Any]: ...


class Streams(RunsJobs, Protocol):
    """``routes/stream.py``'s ``RunEventStream`` (also a session cell's stream): runs and renders,
    and the runtimes' sandboxes name the Python version of the start event."""

    @property
    def sandboxes(self) -> ServerSandboxes: ...


class HoldsSessions(Protocol):
    """``sessions``: the executor's session store (HTTP and MCP sessions alike)."""

    @property
    def sessions(self) -> SessionStore: ...


class Audited(Protocol):
    """``audit``: the audit log a route writes its events to."""

    @property
    def audit(self) -> AuditLog: ...


class SignsResults(Protocol):
    """``results``: what signs check results (and serves the JWKS)."""

    @property
    def results(self) -> ResultSigner: ...


# -- one face per route module ----------------------------------------------------------------
class RunFace(Authenticates, Bounded, ChoosesPolicy, PreparesJobs, RunsJobs, Protocol):
    """``routes/run.py``: ``POST /api/run``."""


class StreamFace(RunFace, Streams, Protocol):
    """``routes/stream.py``: ``POST /api/run/stream``."""


class InteractiveFace(StreamFace, Protocol):
    """``routes/interactive.py``: ``/api/run/ws``; the browser origins it accepts, and whether the
    handshake carries a key (before the first message is read)."""

    @property
    def cors_origins(self) -> tuple[str, ...]: ...

    @property
    def gatekeeper(self) -> Gatekeeper: ...


class SessionFace(Authenticates, Bounded, ChoosesPolicy, PreparesJobs, Streams, HoldsSessions, Audited, Protocol):
    """``routes/sessions.py``: ``/api/sessions...``: the session store, ``[sessions]``, the hop to
    the replica holding a session, snapshot sealing, the audit log and the refusal counter."""

    @property
    def session_settings(self) -> SessionSettings: ...

    @property
    def hop(self) -> Hop: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def snapshot_secret(self) -> bytes: ...

    def snapshot_binding(self, tenant: Tenant) -> tuple[str, str]: ...

    def tighten(self, base: Limits, asked: LimitsRequest | None) -> Limits: ...


class NotebookFace(Authenticates, Bounded, ChoosesPolicy, HoldsSessions, Protocol):
    """``routes/notebooks.py``: ``POST /api/notebooks/run`` runs the cells in a session."""


class CheckFace(ChoosesPolicy, Protocol):
    """``routes/exercises.py``'s ``run_checks`` (also the LTI routes'): the exercises and the
    executor that runs a check's calls."""

    @property
    def exercises(self) -> ExerciseCatalog: ...

    @property
    def executor(self) -> Executor: ...


class ExerciseFace(CheckFace, Authenticates, Bounded, SignsResults, Audited, Protocol):
    """``routes/exercises.py``: ``/api/exercises...``: hints counted, results signed, webhooks."""

    @property
    def hints(self) -> HintCounts: ...

    @property
    def webhooks(self) -> Webhooks | None: ...


class LtiFace(CheckFace, Bounded, RunsJobs, SignsResults, Audited, Protocol):
    """``routes/lti.py``: ``/lti/...``: the LTI tool and ``[lti]``, whether keys are required
    (``auth``), this replica's advertised URL, the gatekeeper that vouches for a launched student."""

    @property
    def lti(self) -> LtiTool | None: ...

    @property
    def lti_settings(self) -> LtiSettings: ...

    @property
    def auth_required(self) -> bool: ...

    @property
    def advertise_url(self) -> str | None: ...

    @property
    def gatekeeper(self) -> Gatekeeper: ...


class LintFace(Authenticates, Bounded, Protocol):
    """``routes/lint.py``: ``POST /api/lint``."""


class FilesFace(Protocol):
    """``routes/files.py``: ``GET /api/files/{token}``: this replica's downloads, else the hop."""

    @property
    def downloads(self) -> DownloadStore: ...

    @property
    def hop(self) -> Hop: ...


class NetworkFace(Authenticates, Bounded, ChoosesPolicy, Protocol):
    """``routes/network.py``: ``/api/network/...``: the ``[network.*]`` rules and the browser
    runs' grants."""

    @property
    def network_rules(self) -> Mapping[str, NetworkRule]: ...

    @property
    def browser_networks(self) -> BrowserRuns: ...

    @property
    def gatekeeper(self) -> Gatekeeper: ...

    @property
    def metrics(self) -> Metrics: ...


class MetaFace(Authenticates, HoldsSessions, SignsResults, Protocol):
    """``routes/meta.py``: health, readiness, metrics, profiles, JWKS."""

    @property
    def profiles(self) -> Mapping[str, Policy]: ...

    @property
    def default_profile(self) -> str: ...

    @property
    def admission(self) -> Admission: ...

    @property
    def lifecycle(self) -> Lifecycle: ...

    @property
    def shared(self) -> SharedState | None: ...

    @property
    def metrics(self) -> Metrics: ...
