"""A loopback HTTP/CONNECT proxy that holds every request of a browser to the URL rule.

The browser tool launches Chromium with this proxy and no bypass list, so every connection the
browser opens -- pages, sub-resources, redirects, pop-ups, iframes, workers, WebSockets, even
loopback -- arrives here as ``CONNECT host:port`` or an absolute ``http://`` request.  Each one is
judged by ``bot.net.guard`` exactly as ``web_fetch`` is (the host as the client dials it, resolved
once, every address checked, the checked address dialled), with the owner's host patterns on top
(``allow_hosts``: when not empty only matching hosts; ``deny_hosts``: never).  A refused request
gets a ``403`` whose body says why, and the reason is kept in ``refusals`` so the tool can tell
the model why a navigation failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .guard import FetchError, HostRules, Target, check_url, host_key, vet

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT = 10.0
HEAD_TIMEOUT = 30.0
TUNNEL_GRACE = 30.0  # how long an origin may go on once the client has closed its tunnel
_DROPPED = frozenset(
    {"proxy-connection", "proxy-authorization", "connection", "keep-alive", "host"}
)


class HostPatterns:
    """``allow_hosts`` / ``deny_hosts``: exact names or ``*.example.com`` (subdomains only)."""

    def __init__(self, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> None:
        self.allow = [_pattern(p) for p in allow]
        self.deny = [_pattern(p) for p in deny]

    @staticmethod
    def _match(host: str, pattern: str) -> bool:
        if pattern.startswith("*."):
            return host.endswith(pattern[1:]) and host != pattern[2:]
        return host == pattern

    def check(self, host: str) -> None:
        if any(self._match(host, p) for p in self.deny):
            raise FetchError(f"blocked host: {host} is in tools.browser.deny_hosts")
        if self.allow and not any(self._match(host, p) for p in self.allow):
            raise FetchError(f"blocked host: {host} is not in tools.browser.allow_hosts")


def _pattern(text: str) -> str:
    """A pattern in the form hosts are compared in (lower case, no trailing dot, IDNA)."""
    text = text.strip()
    if text.startswith("*."):
        return "*." + host_key(text[2:])
    return host_key(text)


@dataclass(frozen=True)
class Refusal:
    host: str
    reason: str
    at: float


class GuardProxy:
    """``async with GuardProxy(rules) as proxy:`` listens on 127.0.0.1:``proxy.port``."""

    def __init__(self, rules: HostRules, patterns: HostPatterns | None = None) -> None:
        self.rules = rules
        self.patterns = patterns or HostPatterns()
        self.refusals: deque[Refusal] = deque(maxlen=64)
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t

    async def __aenter__(self) -> GuardProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def refusal_since(self, since: float) -> Refusal | None:
        """The most recent refusal at or after ``since`` (a ``time.monotonic()`` value)."""
        for r in reversed(self.refusals):
            if r.at >= since:
                return r
        return None

    # ------------------------------------------------------------------ one connection
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except asyncio.CancelledError:  # close(): the connection ends quietly (Python 3.11's
            pass  # start_server logs a cancelled handler's CancelledError as unhandled)
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        if len(head) > MAX_HEAD:
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return
        method, target, version = parts
        try:
            hop = check_url(f"http://{target}/" if method == "CONNECT" else target)
            if method != "CONNECT" and hop.url.scheme != "http":
                raise FetchError("bad URL: only http is proxied without CONNECT")
            upstream = await self._dial(hop)
        except FetchError as e:
            await self._refuse(writer, target, str(e))
            return
        up_reader, up_writer = upstream
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await _pipe_both(reader, writer, up_reader, up_writer)
                return
            # one request per connection: only this request's body goes upstream, so a request
            # the browser sends next on the same connection never reaches this origin
            length = _content_length(lines[1:])
            if length < 0:
                await self._refuse(writer, target, "bad request: chunked uploads are not relayed")
                return
            up_writer.write(_origin_head(method, hop, version, lines[1:]))
            await _copy_body(reader, up_writer, length)
            await _answer(reader, up_reader, writer)
        finally:
            up_writer.close()

    async def _dial(self, hop: Target) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.patterns.check(hop.host)
        addrs = await vet(hop, self.rules)  # resolved once, every address checked
        last: Exception | None = None
        for ip in addrs:  # only the checked addresses are dialled
            try:
                return await asyncio.wait_for(
                    asyncio.open_connection(str(ip), hop.port), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError) as e:
                last = e
        raise FetchError(f"connection: cannot connect to {hop.host}: {last}")

    async def _refuse(self, writer: asyncio.StreamWriter, target: str, reason: str) -> None:
        try:
            host = urlsplit(target if "://" in target else f"//{target}").hostname or target
        except ValueError:
            host = target
        self.refusals.append(Refusal(host, reason, time.monotonic()))
        log.info("browser proxy refused %s: %s", host, reason)
        body = f"Refused by Chela: {reason}\n".encode()
        writer.write(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        with contextlib.suppress(OSError):
            await writer.drain()


def _origin_head(method: str, hop: Target, version: str, headers: list[str]) -> bytes:
    """The request as the origin expects it: origin-form target, no proxy headers, one request,
    and the checked host as ``Host`` (whatever ``Host`` the client sent)."""
    path = hop.url.raw_path_qs or "/"
    kept = [h for h in headers if h and h.split(":", 1)[0].strip().lower() not in _DROPPED]
    host = f"Host: {hop.url.raw_authority}"
    text = "\r\n".join([f"{method} {path} {version}", host, *kept, "Connection: close", "", ""])
    return text.encode("latin-1")


def _content_length(headers: list[str]) -> int:
    """The request body's length; -1 for a chunked upload, which is not relayed (browsers do
    not stream uploads over HTTP/1.1)."""
    for h in headers:
        name, _, value = h.partition(":")
        if name.strip().lower() == "transfer-encoding":
            return -1
        if name.strip().lower() == "content-length" and value.strip().isdigit():
            return int(value.strip())
    return 0


async def _copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        data = await reader.read(min(n, 65536))
        if not data:
            break
        writer.write(data)
        n -= len(data)
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


async def _answer(
    c_reader: asyncio.StreamReader, u_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter
) -> None:
    """Relay the origin's answer until it ends or the client goes away (a page that never
    loads must not hold the origin's connection once the browser gives up); anything more the
    client sends is dropped (one request per connection)."""
    relay = asyncio.ensure_future(_pipe(u_reader, c_writer))
    gone = asyncio.ensure_future(_until_eof(c_reader))
    try:
        await asyncio.wait((relay, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (relay, gone):
            t.cancel()
            with contextlib.suppress(BaseException):
                await t


async def _until_eof(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(OSError):
        while await reader.read(65536):
            pass


async def _pipe_both(
    c_reader: asyncio.StreamReader,
    c_writer: asyncio.StreamWriter,
    u_reader: asyncio.StreamReader,
    u_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways; when the origin is done the client connection ends too, and when the
    client is done the origin has ``TUNNEL_GRACE`` seconds to finish (an origin that neither
    answers nor closes does not hold the tunnel until the daemon ends)."""
    up = asyncio.ensure_future(_pipe(c_reader, u_writer))
    down = asyncio.ensure_future(_pipe(u_reader, c_writer))
    try:
        await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        if not down.done():
            await asyncio.wait((down,), timeout=TUNNEL_GRACE)
    finally:
        for t in (up, down):
            t.cancel()
            with contextlib.suppress(BaseException):
                await t
