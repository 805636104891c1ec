"""The URL guard: which host a URL names, which addresses it may reach.

The host is judged exactly as the HTTP client (aiohttp, whose URLs are yarl's) will connect to
it: a non-ASCII host goes through UTS 46 mapping (the ``idna`` package, as yarl does), so a
fullwidth or segmented digit becomes the ASCII digit the client dials; a host that does not
map cleanly to plain ASCII (bidirectional or zero-width characters, code points UTS 46 drops or
forbids) is refused, and so is a URL that yarl reads with a different host than ours.  Python's
own ``idna`` codec (IDNA 2003) is never used: it spells ``127.0.0.<U+1FBF1>`` as the DNS name
``127.0.0.xn--ub0i`` while the client connects to 127.0.0.1.

The host is then resolved once; every address is checked (loopback, private, link-local,
shared, multicast, reserved and cloud metadata addresses are refused unless the owner listed
the host or a covering network in ``tools.web.allow_private_hosts``; metadata addresses
whatever the list says), and the connection goes to exactly those addresses through
``PinnedResolver``.  ``bot.net.fetch`` does this at every redirect hop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import idna
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchError(Exception):
    """A refused or failed fetch; the message starts with its kind (bad URL, blocked address,
    DNS, TLS, timeout, connection, too many redirects, too large)."""


# Cloud metadata services: never reachable, whatever allow_private_hosts says.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS DNS resolver
        "169.254.169.123",  # AWS time sync
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IPv6 metadata
        "fd00:ec2::253",
    )
)
METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

_SPECIAL_V4 = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


# --------------------------------------------------------------------------- host names
_ASCII_HOST = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")
# Characters refused before mapping: format (bidi controls, zero-width, soft hyphen, BOM),
# controls, separators, private use, unassigned.
_REFUSED_CATEGORIES = frozenset({"Cf", "Cc", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def canonical_host(host: str) -> str:
    """The host as the HTTP client connects to it: plain lowercase ASCII without a trailing
    dot, an IPv4 address in dotted form or an IPv6 address compressed (no brackets).
    Raises ``FetchError`` ("bad URL: ...") for a host that does not map cleanly."""
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if ":" in h:
        try:
            return ipaddress.IPv6Address(h).compressed
        except ValueError:
            raise FetchError(f"bad URL: {host!r} is not an IPv6 address") from None
    if not h.isascii():
        h = _uts46(host, h)
    h = h.lower()
    if h.endswith("."):
        h = h[:-1]
    if not _ASCII_HOST.fullmatch(h):
        raise FetchError(f"bad URL: the host {host!r} is not a valid host name")
    try:
        return str(ipaddress.IPv4Address(h))
    except ValueError:
        return h


def _uts46(original: str, h: str) -> str:
    """UTS 46 mapping and IDNA 2008 encoding, refusing what would be silently dropped."""
    for ch in h:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES or not _maps_to_something(ch):
            raise FetchError(
                f"bad URL: the host {original!r} contains U+{ord(ch):04X}, an invisible or "
                "formatting character"
            )
    try:
        encoded = idna.encode(h, uts46=True, std3_rules=False, transitional=False)
    except (UnicodeError, ValueError) as e:
        raise FetchError(f"bad URL: the host {original!r} is not a valid host name ({e})") from None
    return encoded.decode("ascii")


def _maps_to_something(ch: str) -> bool:
    """False for a character UTS 46 would silently drop (it could hide inside a name)."""
    try:
        return bool(idna.uts46_remap(ch, std3_rules=False, transitional=False))
    except UnicodeError:
        return True  # disallowed: idna.encode refuses it with its own message


def host_key(host: str) -> str:
    """``canonical_host`` when it applies, else the lowercase text without a trailing dot (for
    names that are compared, never dialled)."""
    try:
        return canonical_host(host)
    except FetchError:
        return host.strip().lower().rstrip(".")


# ---------------------------------------------------------------------------- addresses
def plain(ip: IPAddress) -> IPAddress:
    """IPv4-mapped / NAT64-style IPv6 forms judged as the IPv4 address they carry."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_metadata(ip: IPAddress) -> bool:
    return plain(ip) in METADATA_ADDRESSES


def is_internal(ip: IPAddress) -> bool:
    """Anything that is not a public unicast address."""
    ip = plain(ip)
    if isinstance(ip, ipaddress.IPv4Address):
        return any(ip in n for n in _SPECIAL_V4)
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip.is_site_local
        or not ip.is_global
    )


class HostRules:
    """``allow_private_hosts``: host names (compared after the same mapping as URLs) and IPs /
    CIDRs.  Metadata hosts and addresses stay refused whatever the list says."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.names: set[str] = set()
        self.nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in allow:
            e = entry.strip().lower().rstrip(".")
            try:
                self.nets.append(ipaddress.ip_network(e.strip("[]"), strict=False))
            except ValueError:
                self.names.add(host_key(e))

    def check(self, host: str, addrs: list[IPAddress]) -> None:
        """Raise ``FetchError`` unless every address of ``host`` may be contacted."""
        h = host_key(host)
        if h in METADATA_HOSTS:
            raise FetchError(f"blocked address: {host} is a cloud metadata service")
        for ip in addrs:
            if is_metadata(ip):
                raise FetchError(
                    f"blocked address: {host} resolves to {ip}, a cloud metadata address "
                    "(never allowed)"
                )
            if is_internal(ip) and not self._allowed(h, ip):
                raise FetchError(
                    f"blocked address: {host} resolves to {ip}, a loopback, private or "
                    "link-local address (add the host or its network to "
                    "tools.web.allow_private_hosts to allow it)"
                )

    def _allowed(self, host: str, ip: IPAddress) -> bool:
        if host in self.names:
            return True
        return any(a.version == n.version and a in n for n in self.nets for a in {ip, plain(ip)})


# ------------------------------------------------------------------------------ targets
@dataclass(frozen=True)
class Target:
    """One hop: the URL as the client will send it, and the host and port it will dial."""

    url: yarl.URL
    host: str
    port: int


def check_url(url: str) -> Target:
    """Parse ``url`` as both the standard library and the HTTP client do; refuse anything but
    http(s) without credentials whose host both read the same way."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port  # urllib raises on a bad port only when it is read
        client = yarl.URL(text)
    except ValueError:
        raise FetchError(f"bad URL {url!r}") from None
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"bad URL {url!r}: only http and https are fetched")
    if not parts.hostname:
        raise FetchError(f"bad URL {url!r}: no host")
    if parts.username or parts.password or client.user or client.password:
        raise FetchError("bad URL: credentials in the URL are not sent")
    host = canonical_host(parts.hostname)
    port = port or (443 if parts.scheme == "https" else 80)
    if host_key(client.raw_host or "") != host or client.port != port:
        raise FetchError(f"bad URL {url!r}: its host is read two ways")
    return Target(client, host, port)


# ----------------------------------------------------------------------- resolve and pin
async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """The addresses of a canonical host (an IP literal is its own address): one lookup."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise FetchError(f"DNS: cannot resolve {host}: {e.strerror or e}") from None
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if ip not in out:
            out.append(ip)
    if not out:
        raise FetchError(f"DNS: {host} has no address")
    return out


async def vet(target: Target, rules: HostRules) -> list[IPAddress]:
    """Resolve the hop's host once and check every address; the addresses to pin."""
    addrs = await resolve_host(target.host, target.port)
    rules.check(target.host, addrs)
    return addrs


class PinnedResolver(AbstractResolver):
    """Answers only from the addresses checked for the current hop (no second lookup)."""

    def __init__(self) -> None:
        self.pinned: dict[str, list[IPAddress]] = {}

    def pin(self, host: str, addrs: list[IPAddress]) -> None:
        self.pinned = {host: list(addrs)}

    async def resolve(
        self, host: str, port: int = 0, family: int = socket.AF_UNSPEC
    ) -> list[ResolveResult]:
        addrs = self.pinned.get(host_key(host))
        if not addrs:
            raise OSError(f"no vetted address for {host}")
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in addrs
        ]

    async def close(self) -> None:
        pass
