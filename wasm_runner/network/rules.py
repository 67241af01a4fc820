"""The operator's network rules: the ``[network.NAME]`` tables of the server's config.

::

    [network.course-apis]
    destinations = ["https://api.example.org", "https://*.wikipedia.org", "http://127.0.0.1:8080"]
    addresses = []            # loopback or private addresses these destinations may reach
    max_requests = 20         # per run
    max_bytes_in = 5_000_000  # response bytes (headers and body, as sent) per run
    max_bytes_out = 100_000   # request bytes (headers and body) per run
    request_seconds = 10      # one request, at most (inside the run's wall limit)
    keys = ["course-site"]    # API keys it applies to ("*": every caller); none: nobody
    profiles = ["analyst"]    # the profiles it applies to; none: every profile

A destination is ``scheme://host[:port]``: ``https`` (``http`` only when written), a host name,
``*.suffix`` (any name under it, not the suffix itself) or an IP literal, and a port (the
scheme's default when not written). An IP literal names its address: the rule may reach it even
when it is loopback or private; a name reaches only public addresses unless ``addresses`` lists
them. Off by default: a run whose key and profile no table names has no network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..addresses import Network, parse_allow

__all__ = ["ANY_CALLER", "Destination", "NetworkRule", "describe_off", "network_from", "rules_for"]

ANY_CALLER = "*"
_KEYS = {"destinations", "addresses", "max_requests", "max_bytes_in", "max_bytes_out", "request_seconds",
         "keys", "profiles"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CAPS = {  # name -> (default, least, most, what)
    "max_requests": (20, 1, 10_000, "requests per run"),
    "max_bytes_in": (10 << 20, 1024, 1 << 30, "bytes per run"),
    "max_bytes_out": (1 << 20, 1024, 1 << 30, "bytes per run"),
    "request_seconds": (10.0, 0.1, 600.0, "seconds"),
}


@dataclass(frozen=True)
class Destination:
    """One allowed destination: scheme, host (a name, ``*.suffix`` or an IP literal), port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Destination:
        """``scheme://host[:port]``; ``ValueError`` saying what is wrong."""
        if not isinstance(text, str) or "://" not in text:
            raise ValueError(f"a destination is scheme://host[:port], like https://api.example.org, not {text!r}")
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise ValueError(f"the destination {text!r} has a port that is not a number in 0-65535") from None
        if parts.scheme not in _DEFAULT_PORTS:
            raise ValueError(f"the destination {text!r} must start with https:// (or http://)")
        if parts.username or parts.password or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"the destination {text!r} must be only scheme://host[:port] (no path, "
                             "query or credentials)")
        host = (parts.hostname or "").lower().rstrip(".")
        wildcard = host.startswith("*.")
        name = host[2:] if wildcard else host
        if not name or "*" in name or (not _is_ip(name) and not all(_label(p) for p in name.split("."))):
            raise ValueError(f"the destination {text!r} needs a host name, *.suffix or an IP address")
        if wildcard and _is_ip(name):
            raise ValueError(f"the destination {text!r}: *. goes before a name, not an address")
        return cls(parts.scheme, host, port or _DEFAULT_PORTS[parts.scheme])

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if scheme != self.scheme or port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The address an IP-literal destination names (None for a name)."""
        return ipaddress.ip_address(self.host) if _is_ip(self.host) else None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _label(part: str) -> bool:
    return 0 < len(part) <= 63 and all(c.isalnum() or c == "-" for c in part) and part.isascii()


@dataclass(frozen=True)
class NetworkRule:
    """One ``[network.NAME]`` table, checked: where runs it applies to may go, and their caps."""

    name: str
    destinations: tuple[Destination, ...]
    addresses: tuple[Network, ...] = ()
    max_requests: int = 20
    max_bytes_in: int = 10 << 20
    max_bytes_out: int = 1 << 20
    request_seconds: float = 10.0
    keys: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()

    def applies(self, key: str, profile: str) -> bool:
        """Whether runs of the caller ``key`` (an API key's name) under ``profile`` get it."""
        return (ANY_CALLER in self.keys or key in self.keys) and (not self.profiles or profile in self.profiles)

    def destination(self, scheme: str, host: str, port: int) -> Destination | None:
        return next((d for d in self.destinations if d.matches(scheme, host, port)), None)

    def allowed_addresses(self, destination: Destination) -> tuple[Network, ...]:
        """The non-public addresses a request to ``destination`` may reach: ``addresses``, and the
        address an IP-literal destination names."""
        ip = destination.address()
        return self.addresses + ((ipaddress.ip_network(ip),) if ip is not None else ())

    @classmethod
    def from_table(cls, name: str, table: Any) -> NetworkRule:
        """A ``[network.NAME]`` table; ``ValueError`` naming the table and the key."""
        where = f"[network.{name}]"
        if not isinstance(table, Mapping):
            raise ValueError(f"{where} must be a table")
        unknown = set(table) - _KEYS
        if unknown:
            raise ValueError(f"unknown {where} setting(s): {sorted(unknown)}; a rule takes {sorted(_KEYS)}")
        entries = table.get("destinations")
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{where} needs destinations, a list like [\"https://api.example.org\"]")
        try:
            destinations = tuple(Destination.parse(e) for e in entries)
        except ValueError as e:
            raise ValueError(f"{where} {e}") from None
        try:
            nets = parse_allow(_strings(table.get("addresses", []), f"{where} addresses"))
        except ValueError as e:
            raise ValueError(f"{where} addresses: {e}") from None
        caps: dict[str, Any] = {}
        for cap, (default, least, most, what) in _CAPS.items():
            value = table.get(cap, default)
            whole = isinstance(default, int)
            if isinstance(value, bool) or not isinstance(value, int if whole else int | float) \
                    or not least <= value <= most:
                raise ValueError(f"{where} {cap} must be a {'whole ' if whole else ''}number of {what} "
                                 f"from {least} to {most}, not {value!r}")
            caps[cap] = value if whole else float(value)
        return cls(name=name, destinations=destinations, addresses=nets,
                   keys=_strings(table.get("keys", []), f"{where} keys"),
                   profiles=_strings(table.get("profiles", []), f"{where} profiles"), **caps)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def network_from(tables: Any) -> dict[str, NetworkRule]:
    """The ``[network]`` tables of a config, checked; ``ValueError`` with a plain message."""
    if not isinstance(tables, Mapping):
        raise ValueError("[network] must hold one table per rule, like [network.course-apis]")
    return {str(name): NetworkRule.from_table(str(name), table) for name, table in tables.items()}


def describe_off(key: str | None, profile: str | None) -> str:
    """The sentence a run without network rules gets for every request."""
    who = " and ".join(p for p in (f"key {key!r}" if key else "", f"profile {profile!r}" if profile else "") if p)
    return (f"network access is off for this run: no [network] rule of the server names the {who}"
            if who else "network access is off for this run: it was given no network rule")


def rules_for(rules: Sequence[NetworkRule], key: str, profile: str) -> tuple[NetworkRule, ...]:
    """The rules that apply to runs of ``key`` under ``profile``, by name."""
    return tuple(sorted((r for r in rules if r.applies(key, profile)), key=lambda r: r.name))
