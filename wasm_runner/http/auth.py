"""Who is calling, and may they call now: API keys and per-key rate limits.

A key arrives as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Browsers cannot set
headers on WebSockets: there the key may come as the subprotocol
``wasm-runner.key.<base64url(key)>`` (offered next to ``wasm-runner``, which the server selects),
in the ``api_key`` query parameter (redacted from the access log), or in the first message
(``api_key``; that message is then capped at ``ws_first_message_bytes``). Keys are compared by
their sha256 digest in constant time. With auth off (local use only) every caller is the tenant
``anonymous:<client address>``. Rate limits use the ``limits`` library (moving window): in memory
on one host; with ``redis_url`` set, its Redis storage on the replica's one client
(``scaleout.state.SharedState``), so every replica counts against the same windows. When Redis does not
answer, the check fails closed: ``503 shared_state_unavailable`` with ``Retry-After``
(docs/security.md, "Several replicas").

Failed attempts (a missing or wrong key) are counted per client address (IPv6: per /64): past
``failed_auth_rate`` the address gets ``429`` with ``Retry-After`` and its keys are not even
checked, so nobody can guess keys or flood the server with refusals. The tenant of the request
being handled is kept in ``current_tenant`` (a context variable) for the layers below the route
(body slots, download quotas).
"""

from __future__ import annotations

import base64
import hmac
import math
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from typing import TYPE_CHECKING

from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage as AsyncRedisStorage
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindowRateLimiter
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from ..settings import USER_MAX_CONCURRENT, USER_RATE, AdmissionSettings, ApiKey, ServerConfig, hash_key
from .serving import address_key as _address_key
from .errors import ApiError
from .users import USER_TOKEN_HEADER, UserIds, check_user_id

if TYPE_CHECKING:
    from ..scaleout.state import SharedState

__all__ = ["Tenant", "Gatekeeper", "anonymous_tenant", "current_tenant", "key_tenant"]


@dataclass(frozen=True)
class Tenant:
    """The caller: a display name (never the key), its profiles, its caps; and the user inside
    it this request is for (``users.py``: ``user`` is the hashed ``user_key``, never the id), with
    that user's caps inside the key's."""

    name: str
    profiles: tuple[str, ...]
    rate: str
    max_concurrent: int
    user: str | None = None
    user_rate: str = USER_RATE
    user_max_concurrent: int = USER_MAX_CONCURRENT
    anonymous: bool = False  # auth off: the tenant is a client address, not an API key
    # the user's own id, for the app's endpoints of host functions only (signed; never stored,
    # logged or counted: ``user`` is what is)
    user_id: str | None = field(default=None, repr=False, compare=False)
    user_token: bool = False  # the user was named by a signed user token (not a plain id)
    # the API key's own id (its sha256, never shown): a key deleted and made again under the same
    # name is another key (snapshots bind to it); None with auth off
    key_id: str | None = field(default=None, repr=False, compare=False)

    def may_use(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles

    @property
    def who(self) -> str:
        """How refusals name this caller: "this API key", or "this client" with auth off."""
        return "this client" if self.anonymous else "this API key"

    @property
    def user_name(self) -> str | None:
        """The name the user's counts and windows go by (its tenant's name and ``user``)."""
        return None if self.user is None else f"{self.name}/user/{self.user}"


def key_tenant(key: ApiKey) -> Tenant:
    """The tenant of an API key (no user yet)."""
    return Tenant(key.name, key.profiles, key.rate, key.max_concurrent,
                  user_rate=key.user_rate, user_max_concurrent=key.user_max_concurrent,
                  key_id=key.key_sha256)  # fmt: skip


def anonymous_tenant(admission: AdmissionSettings, client: str) -> Tenant:
    """The tenant of a client address when auth is off (its caps: ``admission``'s anonymous ones)."""
    return Tenant(
        f"anonymous:{client}", (), admission.anonymous_rate, admission.anonymous_max_concurrent,
        user_rate=admission.anonymous_user_rate,
        user_max_concurrent=admission.anonymous_user_max_concurrent, anonymous=True,
    )  # fmt: skip


current_tenant: ContextVar[Tenant | None] = ContextVar("wasm_runner_tenant", default=None)


WS_SUBPROTOCOL = "wasm-runner"
_KEY_PROTOCOL = "wasm-runner.key."


def key_from_subprotocols(header: str) -> str | None:
    """The key a browser sent as the WebSocket subprotocol ``wasm-runner.key.<base64url(key)>``."""
    for token in header.split(","):
        token = token.strip()
        if token.startswith(_KEY_PROTOCOL):
            encoded = token[len(_KEY_PROTOCOL) :]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (ValueError, UnicodeDecodeError):
                return None
    return None


def _bearer(headers: Mapping[str, str], query: Mapping[str, str], allow_query: bool) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if headers.get("x-api-key"):
        return headers["x-api-key"].strip()
    if allow_query and headers.get("sec-websocket-protocol"):
        key = key_from_subprotocols(headers["sec-websocket-protocol"])
        if key:
            return key
    if allow_query and query.get("api_key"):
        return query["api_key"]
    return None


_LIMITS_SCHEMES = {"redis": "async+redis", "rediss": "async+rediss", "unix": "async+redis+unix"}


def _retry_after(reset_at: float) -> int:
    """Whole seconds until a moving window's oldest hit expires (at least 1)."""
    return max(1, math.ceil(reset_at - time.time()))


def _failed_error(retry: int) -> ApiError:
    return ApiError(
        429, "too_many_failed_attempts",
        f"too many requests without a valid API key or token from this address; retry in {retry} s",
        headers={"Retry-After": str(retry)},
    )  # fmt: skip


def _rate_error(tenant: Tenant, retry: int) -> ApiError:
    return ApiError(
        429, "rate_limited",
        f"rate limit of {tenant.rate} for {tenant.who} reached; retry in {retry} s",
        headers={"Retry-After": str(retry)},
    )  # fmt: skip


def _user_rate_error(tenant: Tenant, retry: int) -> ApiError:
    return ApiError(
        429, "user_rate_limited",
        f"rate limit of {tenant.user_rate} for this user reached; retry in {retry} s "
        f"(other users of {tenant.who} are not held back)",
        headers={"Retry-After": str(retry)},
    )  # fmt: skip


class Gatekeeper:
    """Authenticates callers and applies their rate limit.

    ``check`` (async) is what the service uses: in memory without ``shared``, else in Redis.
    ``authenticate`` and ``hit`` are the in-memory steps on their own (one host, tests)."""

    def __init__(self, keys: tuple[ApiKey, ...], *, auth: bool, anonymous: AdmissionSettings,
                 cluster_secret: str | None, failed_auth_rate: str, shared: SharedState | None = None) -> None:
        self.auth = auth
        self._anonymous_caps = anonymous
        self._keys = keys
        self._by_name = {k.name: k for k in keys}
        self.users = UserIds(cluster_secret)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._rates: dict[str, RateLimitItem] = {}
        self._failed_rate = parse(failed_auth_rate)
        self._shared = shared
        self._shared_limiter: AsyncMovingWindowRateLimiter | None = None

    @classmethod
    def from_config(cls, config: ServerConfig, shared: SharedState | None = None) -> Gatekeeper:
        """The gatekeeper of a server: its keys, ``auth``, the anonymous caps of ``[server]``, the
        cluster secret (signed user tokens) and the failed-auth rate."""
        return cls(config.api_keys, auth=config.auth, anonymous=config.admission,
                   cluster_secret=config.scale_out.cluster_secret,
                   failed_auth_rate=config.client_bounds.failed_auth_rate, shared=shared)  # fmt: skip

    def _item(self, rate: str) -> RateLimitItem:
        item = self._rates.get(rate)
        if item is None:
            item = self._rates[rate] = parse(rate)
        return item

    def _anonymous(self, client: str) -> Tenant:
        return anonymous_tenant(self._anonymous_caps, client)

    def _with_user(
        self,
        tenant: Tenant,
        headers: Mapping[str, str],
        user: str | None,
        user_token: str | None,
    ) -> Tenant:
        """``tenant`` with the user this request is for (``users.UserIds.read``), if any."""
        key = self._by_name.get(tenant.name) if not tenant.anonymous else None
        found = self.users.identify(
            headers, tenant.name,
            token_secret=key.user_token_secret if key is not None else None,
            token_required=key.user_token_required if key is not None else False,
            user=user, user_token=user_token,
        )  # fmt: skip
        if found is None:
            return tenant
        token = user_token if user_token is not None else headers.get(USER_TOKEN_HEADER)
        return replace(tenant, user=found[1], user_id=found[0], user_token=token is not None)

    def vouched(self, name: str, user: str | None = None, user_token: bool = False) -> Tenant:
        """The tenant another replica authenticated and passed a call on for (its rate counted
        there): the key called ``name`` in this replica's config (replicas share one config), or
        ``403 internal_forbidden`` for a name this config does not know; with the ``user`` (an
        id) that replica identified (``user_token``: by a signed token), whose ``user_key`` this
        replica computes the same way (the replicas share the secret it is made with)."""
        tenant: Tenant | None = None
        key = next((k for k in self._keys if k.name == name), None)
        if key is not None:
            tenant = key_tenant(key)
        elif not self.auth and name.startswith("anonymous:"):
            tenant = anonymous_tenant(self._anonymous_caps, name.removeprefix("anonymous:"))
        if tenant is None:  # a replica with another config: refuse rather than guess
            raise ApiError(403, "internal_forbidden", "the forwarding replica named an unknown tenant")
        if user is not None:  # checked there already; a signed hop still names a valid id only
            user = check_user_id(user)
            tenant = replace(tenant, user=self.users.user_key(name, user), user_id=user,
                             user_token=user_token)  # fmt: skip
        current_tenant.set(tenant)
        return tenant

    def _redis_limiter(self, shared: SharedState) -> AsyncMovingWindowRateLimiter:
        """The ``limits`` moving window on Redis, on the replica's own connection pool."""
        if self._shared_limiter is None:
            scheme, sep, rest = shared.url.partition("://")
            storage = AsyncRedisStorage(
                f"{_LIMITS_SCHEMES.get(scheme, 'async+redis')}{sep}{rest}",
                implementation="redispy",
                key_prefix=shared.key("limits"),
                connection_pool=shared.redis.connection_pool,  # type: ignore[arg-type]
            )
            self._shared_limiter = AsyncMovingWindowRateLimiter(storage)
        return self._shared_limiter

    async def check(
        self,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        client: str,
        *,
        allow_query: bool = False,
        key: str | None = None,
        user: str | None = None,
        user_token: str | None = None,
    ) -> Tenant:
        """Authenticate and count one request against the caller's rate: ``ApiError`` 401 or
        429, and with shared state ``503 shared_state_unavailable`` when Redis does not answer.
        With a user (``users.py``: header, or ``user`` / ``user_token`` given), the user's own
        rate is counted first: a user over it is refused without spending the key's rate."""
        shared = self._shared
        if shared is None:
            tenant = self.authenticate(headers, query, client, allow_query=allow_query, key=key)
            tenant = self._with_user(tenant, headers, user, user_token)
            self.hit(tenant)
            current_tenant.set(tenant)
            return tenant
        limiter = self._redis_limiter(shared)
        if not self.auth:
            tenant = self._anonymous(client)
        else:
            address = _address_key(client)
            if not await shared.call(limiter.test(self._failed_rate, "failed", address)):
                reset_at, _ = await shared.call(
                    limiter.get_window_stats(self._failed_rate, "failed", address)
                )
                raise _failed_error(_retry_after(reset_at))
            try:
                tenant = self._check_key(headers, query, allow_query=allow_query, key=key)
            except ApiError:
                await shared.call(limiter.hit(self._failed_rate, "failed", address))
                raise
        tenant = self._with_user(tenant, headers, user, user_token)
        await self.count(tenant)
        current_tenant.set(tenant)
        return tenant

    async def count(self, tenant: Tenant) -> None:
        """Count one request of ``tenant`` (and its user) against their rates: in Redis with
        shared state, in memory otherwise; ``ApiError(429)`` when over (an LTI launch's student,
        whom the launch session named instead of a key: ``http/routes/lti.py``)."""
        shared = self._shared
        if shared is None:
            self.hit(tenant)
            return
        limiter = self._redis_limiter(shared)
        if tenant.user_name is not None:
            user_item = self._item(tenant.user_rate)
            if not await shared.call(limiter.hit(user_item, "user", tenant.user_name)):
                reset_at, _ = await shared.call(
                    limiter.get_window_stats(user_item, "user", tenant.user_name)
                )
                raise _user_rate_error(tenant, _retry_after(reset_at))
        item = self._item(tenant.rate)
        if not await shared.call(limiter.hit(item, "rate", tenant.name)):
            reset_at, _ = await shared.call(limiter.get_window_stats(item, "rate", tenant.name))
            raise _rate_error(tenant, _retry_after(reset_at))

    def authenticate(
        self,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        client: str,
        *,
        allow_query: bool = False,
        key: str | None = None,
    ) -> Tenant:
        """The tenant behind ``key`` (if given) or these headers, or ``ApiError(401)`` (``429``
        once this address has failed too often)."""
        if not self.auth:
            tenant = self._anonymous(client)
            current_tenant.set(tenant)
            return tenant
        address = _address_key(client)
        if not self._limiter.test(self._failed_rate, "failed", address):
            reset_at, _ = self._limiter.get_window_stats(self._failed_rate, "failed", address)
            raise _failed_error(_retry_after(reset_at))
        try:
            tenant = self._check_key(headers, query, allow_query=allow_query, key=key)
        except ApiError:
            self._limiter.hit(self._failed_rate, "failed", address)
            raise
        current_tenant.set(tenant)
        return tenant

    async def failed_attempt(self, client: str) -> ApiError | None:
        """Count one failed attempt from ``client`` that is not a key (a request with internal-hop
        headers but no valid signature: ``internal.InternalGuard``; an unknown or expired network
        grant: ``routes/network.py``) in the same per-address window
        as a wrong key (``failed_auth_rate``; in Redis with shared state, so every replica counts
        together). None when counted; when the address is already over, nothing is counted and
        the ``429 too_many_failed_attempts`` to answer instead is returned (the guard then logs and
        audits nothing). With shared state ``Refused(503)`` when Redis does not answer."""
        address = _address_key(client)
        shared = self._shared
        if shared is None:
            if not self._limiter.hit(self._failed_rate, "failed", address):
                reset_at, _ = self._limiter.get_window_stats(self._failed_rate, "failed", address)
                return _failed_error(_retry_after(reset_at))
            return None
        limiter = self._redis_limiter(shared)
        if not await shared.call(limiter.hit(self._failed_rate, "failed", address)):
            reset_at, _ = await shared.call(limiter.get_window_stats(self._failed_rate, "failed", address))
            return _failed_error(_retry_after(reset_at))
        return None

    async def failed_too_often(self, client: str) -> ApiError | None:
        """The ``429 too_many_failed_attempts`` for ``client`` when its address is over
        ``failed_auth_rate`` now (counts nothing), else None: a credential that is not a key (a
        browser run's network grant: ``routes/network.py``) is then not even checked. With
        shared state ``Refused(503)`` when Redis does not answer."""
        address = _address_key(client)
        shared = self._shared
        if shared is None:
            if self._limiter.test(self._failed_rate, "failed", address):
                return None
            reset_at, _ = self._limiter.get_window_stats(self._failed_rate, "failed", address)
            return _failed_error(_retry_after(reset_at))
        limiter = self._redis_limiter(shared)
        if await shared.call(limiter.test(self._failed_rate, "failed", address)):
            return None
        reset_at, _ = await shared.call(limiter.get_window_stats(self._failed_rate, "failed", address))
        return _failed_error(_retry_after(reset_at))

    def would_authenticate(
        self, headers: Mapping[str, str], query: Mapping[str, str], *, allow_query: bool = False
    ) -> bool:
        """Whether these headers (or the query) carry a valid key; counts nothing."""
        if not self.auth:
            return True
        try:
            self._check_key(headers, query, allow_query=allow_query, key=None)
        except ApiError:
            return False
        return True

    def _check_key(
        self,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        *,
        allow_query: bool,
        key: str | None,
    ) -> Tenant:
        challenge = {"WWW-Authenticate": 'Bearer realm="wasm-runner"'}
        if not self._keys:
            raise ApiError(
                401, "unauthorized",
                "this server requires API keys but none are configured; see the README (serving)",
                headers=challenge,
            )  # fmt: skip
        key = key or _bearer(headers, query, allow_query)
        if not key:
            raise ApiError(
                401, "unauthorized",
                "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                headers=challenge,
            )  # fmt: skip
        digest = hash_key(key)
        match = None
        for candidate in self._keys:  # check them all: time does not depend on which matched
            if hmac.compare_digest(candidate.key_sha256, digest):
                match = candidate
        if match is None:
            raise ApiError(401, "unauthorized", "the API key is not valid", headers=challenge)
        return key_tenant(match)

    def hit(self, tenant: Tenant) -> None:
        """Count one request against the rate (in memory), the user's first when there is one;
        ``ApiError(429)`` with Retry-After when over."""
        if tenant.user_name is not None:
            user_item = self._item(tenant.user_rate)
            if not self._limiter.hit(user_item, "user", tenant.user_name):
                reset_at, _ = self._limiter.get_window_stats(user_item, "user", tenant.user_name)
                raise _user_rate_error(tenant, _retry_after(reset_at))
        item = self._item(tenant.rate)
        if self._limiter.hit(item, "rate", tenant.name):
            return
        reset_at, _remaining = self._limiter.get_window_stats(item, "rate", tenant.name)
        raise _rate_error(tenant, _retry_after(reset_at))
