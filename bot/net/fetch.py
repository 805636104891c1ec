"""The guarded fetch: the only way to fetch a URL someone else chose (the model, an API client,
a message).  Redirects are followed here, one hop at a time, and every hop goes through the
guard (``bot.net.guard``): the host as the client reads it, one lookup, every address checked,
the connection pinned to those addresses.  The body is read up to a cap.

``endpoint_session`` is for the other kind of request: endpoints the owner configured (search
providers), where the guard does not apply."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin

import aiohttp

from .guard import FetchError, HostRules, PinnedResolver, Target, check_url, vet

REDIRECTS = (301, 302, 303, 307, 308)


class TooLarge(FetchError):
    """The body is over ``Limits.max_bytes`` (declared or read) and ``overflow`` is refuse."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    timeout: float = 60.0  # the whole fetch, all hops
    connect_timeout: float = 10.0
    max_redirects: int = 5
    overflow: Literal["cut", "refuse"] = "cut"


@dataclass(frozen=True)
class Head:
    """The final response before its body is read."""

    status: int
    headers: Mapping[str, str]
    content_type: str  # lowercase media type without parameters, "" when absent
    charset: str | None
    content_length: int | None


@dataclass(frozen=True)
class Fetched:
    url: str  # the URL of the final hop
    head: Head
    body: bytes
    truncated: bool  # cut at max_bytes (overflow="cut")


async def fetch_url(
    url: str,
    rules: HostRules,
    limits: Limits,
    *,
    headers: Mapping[str, str] | None = None,
    check_head: Callable[[Head], None] | None = None,
) -> Fetched:
    """GET ``url`` through the guard, following redirects itself.  ``check_head`` may refuse
    the final response (by raising) before its body is read.  Raises ``FetchError``."""
    resolver = PinnedResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    timeout = aiohttp.ClientTimeout(
        total=limits.timeout, connect=min(limits.connect_timeout, limits.timeout)
    )
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=dict(headers or {}), trust_env=False
    ) as session:
        current = url
        for _hop in range(limits.max_redirects + 1):
            target = check_url(current)
            resolver.pin(target.host, await vet(target, rules))
            with _client_errors(target, limits):
                async with session.get(target.url, allow_redirects=False) as resp:
                    if resp.status in REDIRECTS:
                        current = _next_hop(target, resp)
                        continue
                    head = _head(resp)
                    if check_head is not None:
                        check_head(head)
                    body, cut = await _read(resp, head, limits)
                    return Fetched(current, head, body, cut)
        raise FetchError(f"too many redirects: more than {limits.max_redirects}")


def _next_hop(target: Target, resp: aiohttp.ClientResponse) -> str:
    loc = resp.headers.get("Location")
    if not loc:
        raise FetchError(f"HTTP {resp.status}: a redirect without a Location")
    return urljoin(str(target.url), loc)


def _head(resp: aiohttp.ClientResponse) -> Head:
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
    return Head(resp.status, resp.headers, ctype, resp.charset, resp.content_length)


async def _read(resp: aiohttp.ClientResponse, head: Head, limits: Limits) -> tuple[bytes, bool]:
    cap = limits.max_bytes
    refuse = limits.overflow == "refuse"
    if refuse and head.content_length is not None and head.content_length > cap:
        raise TooLarge(f"too large: {head.content_length} bytes, over {cap}")
    buf = bytearray()
    async for chunk in resp.content.iter_chunked(65536):
        buf += chunk
        if len(buf) > cap:
            if refuse:
                raise TooLarge(f"too large: more than {cap} bytes")
            del buf[cap:]
            return bytes(buf), True
    return bytes(buf), False


@contextlib.contextmanager
def _client_errors(target: Target, limits: Limits) -> Iterator[None]:
    """aiohttp's failures as ``FetchError`` messages that name their kind."""
    host, port = target.host, target.port
    try:
        yield
    except TimeoutError:
        raise FetchError(f"timeout: {host} did not answer within {limits.timeout:g}s") from None
    except aiohttp.ClientConnectorCertificateError as e:
        raise FetchError(
            f"TLS: the certificate of {host} is not valid: {e.certificate_error}"
        ) from None
    except (aiohttp.ClientSSLError, ssl.SSLError) as e:
        raise FetchError(f"TLS: handshake with {host} failed: {e}") from None
    except aiohttp.ClientConnectorError as e:
        raise FetchError(
            f"connection: cannot connect to {host}:{port}: {e.os_error or e}"
        ) from None
    except aiohttp.ClientPayloadError as e:
        raise FetchError(f"connection: the body from {host} was broken: {e}") from None
    except aiohttp.ClientError as e:
        raise FetchError(f"connection: {type(e).__name__}: {e}") from None


def endpoint_pool(headers: Mapping[str, str]) -> aiohttp.ClientSession:
    """A long-lived session with kept-alive connections for a model endpoint the owner
    configured (the Chat Completions path, bot.model.openai_compat); per-call timeouts are
    the caller's.  Never for a URL someone else chose.  No cookie jar: a model endpoint has
    no use for cookies, and a Set-Cookie from one endpoint must not ride along to the next
    request (or to another endpoint on the same host)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        headers=dict(headers),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def endpoint_session(timeout: float, headers: Mapping[str, str]) -> aiohttp.ClientSession:
    """A session for an endpoint the owner configured (a search provider's API), never for a
    URL someone else chose: that goes through ``fetch_url``."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout), headers=dict(headers), trust_env=True
    )
