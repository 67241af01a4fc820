"""The state replicas share, in Redis: one client per replica, every call bounded in time.

With ``[server] redis_url`` set, ``Service.shared`` is a ``SharedState`` (``from_settings``); without
it, ``None`` and everything stays in this process's memory. The client is created in the app's lifespan
(``start``) and closed at shutdown (``close``); the parts that share state go through it:

- rate limits (``auth.Gatekeeper``: the ``limits`` library's Redis storage on this client's pool);
- leases (``leases``: per-key runs in flight and open sessions, refreshed by their owner);
- the session directory and download tokens (``directory``), for the internal hop
  (``forwarding``).

Every call goes through ``call``, which bounds it by ``redis_timeout_seconds`` and turns any
failure (refused connection, timeout, Redis error) into ``SharedStateUnavailable``: a refusal
(``execution.Refused``) the faces answer as ``503 shared_state_unavailable`` with ``Retry-After``, never a hang, never a traceback.
``up`` remembers the last outcome (``/readyz`` answers 503 while it is false); the next call tries
again, so a replica recovers by itself when Redis returns.

Keys are namespaced under ``key_prefix`` (``wasm-runner:`` by default), e.g.
``wasm-runner:lease:run:<tenant>``. The cluster secret is held here for the internal hop
(``secret_matches``); it never appears in ``repr`` or logs.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..execution import Refused
from ..settings import ScaleOutSettings

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["SharedState", "SharedStateUnavailable", "KEY_PREFIX", "RETRY_AFTER_SECONDS"]

log = logging.getLogger("wasm_runner.scaleout")

KEY_PREFIX = "wasm-runner:"
RETRY_AFTER_SECONDS = 2  # what a 503 shared_state_unavailable tells the client to wait
T = TypeVar("T")


class SharedStateUnavailable(Refused):
    """Redis did not answer (down, unreachable, too slow): ``503 shared_state_unavailable``."""

    def __init__(self, what: str = "the shared state") -> None:
        super().__init__(
            503,
            "shared_state_unavailable",
            f"{what} (Redis) is not reachable from this replica; retry in "
            f"{RETRY_AFTER_SECONDS} s",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )


class SharedState:
    """One replica's handle on the shared state: its Redis client, its identity, its secret."""

    def __init__(
        self,
        url: str,
        *,
        secret: str,
        advertise_url: str | None = None,
        timeout: float = 1.0,
        lease_ttl: float = 10.0,
        key_prefix: str = KEY_PREFIX,
        replica_id: str | None = None,
    ) -> None:
        self.url = url
        self._secret = secret
        self.advertise_url = advertise_url
        self.timeout = timeout
        self.lease_ttl = lease_ttl
        self.key_prefix = key_prefix
        self.replica_id = replica_id or uuid.uuid4().hex[:16]  # unique per process start
        self.up = False  # the last call's outcome; /readyz fails while False
        self.down_since: float | None = None  # time.monotonic() of the first failure in a row
        self.on_back: list[Callable[[], None]] = []  # called when Redis answers again after failing
        self._client: Redis | None = None

    @classmethod
    def from_settings(cls, settings: ScaleOutSettings) -> SharedState | None:
        """The shared state ``settings`` ask for, or None without ``redis_url`` (one host)."""
        if not settings.redis_url:
            return None
        assert settings.cluster_secret  # ScaleOutSettings.check refuses redis_url without one
        return cls(
            settings.redis_url,
            secret=settings.cluster_secret,
            advertise_url=settings.advertise_url,
            timeout=settings.redis_timeout_seconds,
            lease_ttl=settings.lease_ttl_seconds,
        )

    def __repr__(self) -> str:  # no URL password, no secret
        return f"SharedState(replica={self.replica_id}, advertise={self.advertise_url}, up={self.up})"

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the client (lazy: no connection yet) and try one ping; a Redis that is down
        at start is not fatal: ``up`` stays False (``/readyz`` says so) until it answers."""
        if self._client is None:
            from redis.asyncio import Redis

            self._client = Redis.from_url(self.url, **self.client_options(), decode_responses=False)
        await self.ping()

    def client_options(self, asynchronous: bool = True) -> dict[str, Any]:
        """Options of every Redis client of this replica (async here, sync in ``directory``):
        bounded connects and reads, and ONE immediate retry on a fresh connection after a
        connection error, so a Redis that restarted costs no request a 503 for each stale
        pooled connection (a Redis that is really down still fails at once)."""
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError
        if asynchronous:
            from redis.asyncio.retry import Retry
        else:
            from redis.retry import Retry  # type: ignore[assignment]

        return {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "retry_on_timeout": False,
            "retry": Retry(NoBackoff(), 1),
            "retry_on_error": [RedisConnectionError],
            "health_check_interval": 0,
        }

    async def close(self) -> None:
        """Close the client and its connections (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.aclose(), self.timeout)
            except Exception:  # closing a connection to a dead Redis must not stop shutdown
                log.debug("closing the Redis client failed", exc_info=True)

    @property
    def redis(self) -> Redis:
        """The replica's Redis client (``start`` must have run: the app's lifespan does)."""
        if self._client is None:
            raise RuntimeError("SharedState.start() has not run (the app's lifespan starts it)")
        return self._client

    # -- calls -----------------------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """A namespaced Redis key, e.g. ``key("lease", "run", tenant)``."""
        return self.key_prefix + ":".join(parts)

    async def call(self, awaitable: Awaitable[T], what: str = "the shared state") -> T:
        """Await one Redis operation within ``timeout`` seconds; ``SharedStateUnavailable`` when
        Redis fails or is too slow (``up`` then turns False until a call succeeds)."""
        from redis.exceptions import RedisError

        try:
            result = await asyncio.wait_for(awaitable, self.timeout)
        except (RedisError, OSError, TimeoutError) as exc:
            self._mark_down(exc)
            raise SharedStateUnavailable(what) from None
        self._mark_up()
        return result

    async def ping(self) -> bool:
        """Whether Redis answers now (updates ``up``); never raises."""
        try:
            await self.call(cast("Awaitable[bool]", self.redis.ping()))  # redis-py: Awaitable | bool
        except SharedStateUnavailable:
            return False
        return True

    def _mark_down(self, exc: BaseException) -> None:
        if self.up or self.down_since is None:
            log.warning("Redis at the shared state is unavailable: %s", type(exc).__name__)
            self.down_since = time.monotonic()
        self.up = False

    def _mark_up(self) -> None:
        back = not self.up and self.down_since is not None
        if back:
            log.warning("Redis at the shared state answers again")
        self.up = True
        self.down_since = None
        if back:
            for call in self.on_back:
                call()

    # -- the internal hop ------------------------------------------------------------------
    def secret_matches(self, presented: str | None) -> bool:
        """Whether ``presented`` is the cluster secret (constant time)."""
        if not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self._secret.encode("utf-8"))

    @property
    def secret(self) -> str:
        """The cluster secret, for the internal hop's own requests (never log it)."""
        return self._secret
