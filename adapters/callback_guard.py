"""The callbacks' address guard: where a callback may be sent, checked on the
addresses actually dialled.

Every connection resolves the host itself and refuses any address that is not
globally routable (loopback, private, link-local such as 169.254.169.254, CGNAT,
multicast, reserved, unspecified, and the IPv6 ranges that tunnel or translate to
IPv4 or are deprecated: 6to4, Teredo, NAT64, site-local, …: ``TRANSLATED_V6``),
unless the host (or the address, or a CIDR containing it) is on ``settings.callback_allow_hosts``.  The
check runs inside the connection (a custom network backend), on the addresses
actually dialled, so DNS rebinding between a check and the connect cannot slip
through; proxies from the environment are ignored for the same reason.

Raises :class:`CallbackRefused` (permanent: the outbox row becomes ``refused``) or
:class:`RetryableDelivery` (a name that does not resolve, for now).
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx
from httpcore._backends.auto import AutoBackend


class CallbackRefused(Exception):
    """The callback's destination is not allowed; ``reason`` says why (permanent)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RetryableDelivery(Exception):
    """An attempt failed in a way worth retrying (5xx, 429, timeout, connection)."""

    def __init__(self, reason: str, code: Optional[int] = None):
        super().__init__(reason)
        self.reason, self.code = reason, code


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class AllowList:
    """Hosts (lower-case names or literal IPs) and networks that may be non-global."""

    hosts: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    @classmethod
    def parse(cls, spec: str | Iterable[str]) -> "AllowList":
        """From ``"localhost, 10.0.0.0/8, hooks.internal"`` (or a list of items)."""
        items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
        hosts, nets = set(), []
        for item in filter(None, items):
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(nets))

    def allows(self, host: str, ip: IPAddress) -> bool:
        """True when ``host`` is listed or ``ip`` lies in a listed network."""
        return host.lower().rstrip(".") in self.hosts or any(ip in n for n in self.networks)


# IPv6 ranges that ``ipaddress``'s is_private/is_global let through (Python 3.11) or
# that reach IPv4 through a translator or tunnel, with the RFC that defines each:
# a callback to them may land on an internal IPv4 address or an old internal network
TRANSLATED_V6 = (
    (ipaddress.ip_network("2002::/16"), "6to4"),                   # RFC 3056, embeds IPv4
    (ipaddress.ip_network("2001::/32"), "Teredo"),                 # RFC 4380, embeds IPv4
    (ipaddress.ip_network("64:ff9b::/96"), "NAT64"),               # RFC 6052, embeds IPv4
    (ipaddress.ip_network("64:ff9b:1::/48"), "NAT64 (local use)"),  # RFC 8215
    (ipaddress.ip_network("::ffff:0:0:0/96"), "IPv4-translated"),  # RFC 2765
    (ipaddress.ip_network("::/96"), "IPv4-compatible"),            # RFC 4291 (deprecated)
    (ipaddress.ip_network("fec0::/10"), "site-local"),             # RFC 3879 (deprecated)
    (ipaddress.ip_network("3fff::/20"), "documentation"),          # RFC 9637
)


def address_problem(ip: IPAddress) -> Optional[str]:
    """Why ``ip`` may not receive callbacks (``"loopback"``, ``"link-local"``,
    ``"6to4 (embeds 127.0.0.1)"``, …), or None for a globally routable unicast address.

    IPv4-mapped addresses (``::ffff:a.b.c.d``) are judged as their IPv4 address; the
    translated and tunnelled IPv6 ranges of :data:`TRANSLATED_V6` are refused whole
    (a CIDR on ``callback_allow_hosts`` opens one), naming the embedded IPv4 address
    where there is one."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for attr, label in (("is_loopback", "loopback"), ("is_link_local", "link-local"),
                        ("is_unspecified", "unspecified"), ("is_multicast", "multicast")):
        if getattr(ip, attr):
            return label
    if isinstance(ip, ipaddress.IPv6Address):
        for net, label in TRANSLATED_V6:
            if ip in net:
                embedded = _embedded_ipv4(ip, label)
                return f"{label} (embeds {embedded})" if embedded else label
    for attr, label in (("is_private", "private"), ("is_reserved", "reserved")):
        if getattr(ip, attr):
            return label
    if not ip.is_global:
        return "not globally routable"
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address, label: str) -> Optional[ipaddress.IPv4Address]:
    if label == "6to4":
        return ip.sixtofour
    if label == "Teredo":
        return ip.teredo[1] if ip.teredo else None  # the client's (obfuscated) address
    if label in ("NAT64", "IPv4-translated", "IPv4-compatible"):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def check_url_syntax(url: str) -> str:
    """Validate a callback URL's form; returns it.  Raises CallbackRefused for a
    scheme other than http/https, a missing host, or more than 2048 characters."""
    if len(url) > 2048:
        raise CallbackRefused("callback URL longer than 2048 characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 — raises ValueError for a bad port
    except ValueError as exc:
        raise CallbackRefused(f"malformed callback URL: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise CallbackRefused(f"callback URL scheme {parts.scheme!r} is not http or https")
    if not parts.hostname:
        raise CallbackRefused("callback URL has no host")
    return url


def redact_url(url: str) -> str:
    """``url`` safe to log: scheme, host, port and path only; user-info, query and
    fragment (where receivers put tokens) become ``***``.  Never raises."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = ("***@" if "@" in parts.netloc else "") + (f"[{host}]" if ":" in host else host)
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "***" if parts.query else "",
                           "***" if parts.fragment else ""))
    except ValueError:
        return "<malformed URL>"


async def resolve_allowed(host: str, port: int, allow: AllowList) -> list[str]:
    """Resolve ``host`` and return the addresses a callback may dial (in resolver
    order).  Raises CallbackRefused when any resolved address is not allowed (a host
    that resolves to one public and one private address is refused whole), and
    RetryableDelivery when the name does not resolve."""
    try:
        ips = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise RetryableDelivery(f"cannot resolve {host}: {exc}") from exc
        ips = list(dict.fromkeys(ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos))
    for ip in ips:
        problem = address_problem(ip)
        if problem and not allow.allows(host, ip):
            raise CallbackRefused(
                f"callback host {host} resolves to {ip}, a {problem} address; refused "
                f"(allow it with RAGSTREAM_CALLBACK_ALLOW_HOSTS)")
    return [str(ip) for ip in ips]


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend that dials only addresses the allow-list permits.

    TLS still verifies the certificate against the URL's host name (httpcore passes
    the origin host as SNI), so pinning the dialled IP keeps HTTPS intact.
    """

    def __init__(self, allow: AllowList):
        self.allow = allow
        self._inner = AutoBackend()

    async def connect_tcp(self, host: str, port: int, timeout: Optional[float] = None,
                          local_address: Optional[str] = None, socket_options=None):
        """Resolve, check every address, dial the first allowed one that answers.
        Raises CallbackRefused or httpcore.ConnectError."""
        addresses = await resolve_allowed(host, port, self.allow)
        last: Optional[Exception] = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(ip, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {last}")

    async def connect_unix_socket(self, *args, **kwargs):
        """Never: callbacks go over TCP only.  Raises CallbackRefused."""
        raise CallbackRefused("Unix sockets are not callback destinations")

    async def sleep(self, seconds: float) -> None:
        """Sleep (used by httpcore's retries)."""
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connection pool dials through :class:`GuardedBackend`."""

    def __init__(self, allow: AllowList, **kwargs: Any):
        super().__init__(trust_env=False, **kwargs)
        # httpx builds its httpcore pool privately; swap in one with the guard.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=50,
            max_keepalive_connections=10, keepalive_expiry=5.0,
            network_backend=GuardedBackend(allow))


def guarded_client(allow: AllowList, timeout_s: float) -> httpx.AsyncClient:
    """An httpx client for callbacks: guarded dialling, no redirects, no env proxies."""
    return httpx.AsyncClient(transport=GuardedTransport(allow), timeout=timeout_s,
                             follow_redirects=False, trust_env=False,
                             headers={"User-Agent": "ragstream-notifier/0.1"})
