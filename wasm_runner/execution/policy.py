"""Who asks, and under which policy: the caller and policy records every face hands the executor.

``Policy`` is the one policy record: the HTTP server's profiles (``settings``, TOML
``[profiles.NAME]``) are ``Policy`` values, and so are the policies of faces without profiles
(the CLI, MCP, Python callers). ``CallerLike`` and ``PolicyLike`` are what the executor reads of
them, so a face may pass its own records (the HTTP server's ``Tenant``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..limits import Limits

__all__ = ["Caller", "CallerLike", "LOCAL_CALLER", "LOCAL_POLICY", "Policy", "PolicyLike"]


class CallerLike(Protocol):
    """Who asks: a name (never a key) and how many runs / sessions it may hold at once."""

    @property
    def name(self) -> str: ...

    @property
    def max_concurrent(self) -> int: ...


class PolicyLike(Protocol):
    """A named policy (the HTTP server's profiles are these): limits, folders, runtime, pool."""

    @property
    def name(self) -> str: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def data_dir(self) -> Path | None: ...

    @property
    def files_out(self) -> bool: ...

    @property
    def display(self) -> bool: ...

    @property
    def runtime(self) -> str: ...

    @property
    def pool_size(self) -> int: ...

    @property
    def preload(self) -> tuple[str, ...]: ...

    @property
    def image(self) -> str | None: ...


@dataclass(frozen=True)
class Caller:
    """A caller for faces without API keys (the CLI, MCP over stdio, Python code)."""

    name: str = "local"
    max_concurrent: int = 4


@dataclass(frozen=True)
class Policy:
    """A named policy: the limits a run gets, the folder shown at ``/data``, whether files written
    to ``/out`` come back, its runtime and image, whether it captures figures, and its warm pool.

    A server's profiles are ``Policy`` values too (``settings`` reads ``[profiles.NAME]`` with the
    server's defaults: files come back, the ``datascience`` image)."""

    name: str = "local"
    limits: Limits = field(default_factory=Limits)
    data_dir: Path | None = None
    files_out: bool = False
    runtime: str = "default"
    display: bool = False  # capture plots and the last expression's value
    pool_size: int = 0  # warm instances kept for this policy (0: every run starts fresh)
    preload: tuple[str, ...] = ()  # modules a warm instance has imported before its hand-over
    # the default runtime's pre-initialized image (plain | datascience; None: its default image);
    # memory_mb counts what a run adds beyond it (docs/configuration.md)
    image: str | None = None


LOCAL_CALLER = Caller()
LOCAL_POLICY = Policy()
