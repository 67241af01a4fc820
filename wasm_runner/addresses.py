"""Which addresses the host may connect to for a guest: one rule set for the app's endpoints
(``host_functions/endpoint.py``) and the guest's network requests (``network/``).

``check_address`` passes an address an operator listed (``allow``: addresses or networks) or a
public one (globally routable, not multicast); it refuses loopback, private, link-local (the
cloud metadata address 169.254.169.254 among them), multicast and reserved ones. An IPv4 address
written as IPv6 is judged as IPv4: mapped (``::ffff:a.b.c.d``) as that address; NAT64
(``64:ff9b::/96``) and 6to4 (``2002::/16``) by the IPv4 address inside; IPv4-compatible
(``::a.b.c.d``), local-use NAT64 (``64:ff9b:1::/48``) and site-local (``fec0::/10``) are refused.
Names are resolved by the host itself (``resolve_name``, on ``lookup_threads``), and the
connection goes to the address checked: a rebinding name gets no second lookup to answer with.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable

from .errors import WasmRunnerError

__all__ = ["LOOKUP_THREADS", "Address", "AddressRefused", "Network", "Resolver", "check_address",
           "lookup_threads", "parse_allow", "resolve_name"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]  # (name, port) -> its addresses, blocking
LOOKUP_THREADS = 16  # lookups in progress at once (each bounded by its caller's timeout)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the well-known prefix, an IPv4 address inside
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local-use translation
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")  # RFC 3056: an IPv4 address inside
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # RFC 4291: deprecated, an IPv4 address inside
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")  # RFC 3879: deprecated, private in practice
NOT_PUBLIC = "a loopback, private or reserved address"


class AddressRefused(WasmRunnerError, ValueError):
    """An address the rules refuse: ``ip``, and ``what`` it is (``NOT_PUBLIC``, "a 6to4 address
    (2002::/16) for 10.0.0.1, ...")."""

    def __init__(self, ip: Address, what: str) -> None:
        super().__init__(f"{ip} is {what}")
        self.ip, self.what = ip, what


def parse_allow(entries: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or networks (``127.0.0.1``, ``10.0.0.0/8``, ``::1``) that may be reached
    although they are not public; ``ValueError`` for one that is neither."""
    return tuple(ipaddress.ip_network(e, strict=False) for e in entries)


def check_address(address: str, allow: tuple[Network, ...]) -> Address:
    """``address`` when the host may connect to it: in ``allow``, or public; ``AddressRefused``
    saying what it is else (the module's docstring has the rules)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in net for net in allow):
        return ip
    if isinstance(ip, ipaddress.IPv6Address):
        inside, form = None, ""
        if ip in _NAT64:
            inside, form = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "a NAT64 address (64:ff9b::/96)"
        elif ip in _SIX_TO_FOUR and ip.sixtofour is not None:
            inside, form = ip.sixtofour, "a 6to4 address (2002::/16)"
        elif ip in _NAT64_LOCAL:
            raise AddressRefused(ip, "a local-use NAT64 address (64:ff9b:1::/48)")
        elif ip in _IPV4_COMPATIBLE and int(ip) > 1:  # :: and ::1 are judged below
            raise AddressRefused(ip, "an IPv4-compatible address (::/96, deprecated)")
        elif ip in _SITE_LOCAL:
            raise AddressRefused(ip, "a site-local address (fec0::/10, deprecated)")
        if inside is not None and (not inside.is_global or inside.is_multicast):
            raise AddressRefused(ip, f"{form} for {inside}, {NOT_PUBLIC}")
    if not ip.is_global or ip.is_multicast:
        raise AddressRefused(ip, NOT_PUBLIC)
    return ip


def resolve_name(host: str, port: int) -> list[str]:
    """The addresses of ``host`` (the system's resolver; blocking)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


_lookups: list[concurrent.futures.ThreadPoolExecutor] = []
_lookups_lock = threading.Lock()


def lookup_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The threads names are resolved on (their own: a hung lookup holds neither an event loop nor
    its default executor, and does not delay the loop's shutdown)."""
    with _lookups_lock:
        if not _lookups:
            _lookups.append(concurrent.futures.ThreadPoolExecutor(LOOKUP_THREADS,
                                                                  thread_name_prefix="wasm-runner-dns"))
        return _lookups[0]
