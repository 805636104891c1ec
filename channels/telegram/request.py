"""python-telegram-bot's HTTP layer on aiohttp instead of httpx.

PTB lets a bot bring its own :class:`telegram.request.BaseRequest`: the subclass moves bytes,
PTB keeps everything else (parameter encoding, JSON parsing, status → ``TelegramError``
mapping).  We use aiohttp because the daemon already depends on it and because, measured
with ``bench/e2e_bench.py``, each Bot API call through httpx cost about three times the CPU
of the same call through aiohttp; with two calls per answered message (typing + send) that
was a third of the daemon's CPU.

Error contract, the same as PTB's own httpx request:

* the request may have reached Telegram (read or write timed out) → :class:`TimedOut`,
  which our adapter never retries, so a message is not sent twice;
* the connection could not be made or broke → :class:`NetworkError`, safe to retry;
* no connection within ``pool_timeout + connect_timeout`` → :class:`TimedOut` saying nothing
  was sent (PTB's httpx request raises ``TimedOut`` for pool and connect timeouts as well).

Error texts never carry the bot token: request URLs embed it, so it is masked.
"""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from typing import Any

import aiohttp
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.request import BaseRequest, RequestData

from channels.base import MediaTooLarge
from channels.util import is_loopback

_TOKEN_IN_URL = re.compile(r"/bot[^/\s]+")
_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _mask(text: str) -> str:
    return _TOKEN_IN_URL.sub("/bot<token>", text)


class AiohttpRequest(BaseRequest):
    """One aiohttp session with a bounded connection pool, PTB's :class:`BaseRequest` API."""

    def __init__(
        self,
        connection_pool_size: int = 8,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self._pool_size = max(1, int(connection_pool_size))
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._media_write_timeout = media_write_timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}  # (scheme, host) → proxy

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, limit_per_host=self._pool_size)
            # No trust_env: with it aiohttp looks up ~/.netrc and the proxy variables in a
            # worker thread on every request (two thread hops per call); _proxy_for reads the
            # proxy variables once per host instead.  No cookies: the Bot API sets none.
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    def _timeout(
        self, read: Any, write: Any, connect: Any, pool: Any, has_files: bool
    ) -> aiohttp.ClientTimeout:
        def pick(value: Any, default: float | None) -> float | None:
            return default if value is BaseRequest.DEFAULT_NONE else value

        read_s = pick(read, self._read_timeout)
        write_s = pick(write, self._media_write_timeout if has_files else self._write_timeout)
        connect_s = pick(connect, self._connect_timeout)
        pool_s = pick(pool, self._pool_timeout)
        # aiohttp's ``connect`` covers waiting for a pooled connection plus opening it;
        # ``sock_connect`` only the opening.  It has no write timeout, so an upload is bounded
        # by the whole-request limit: the sum of the four, the ceiling httpx's timeouts add up to.
        wait = None if pool_s is None or connect_s is None else pool_s + connect_s
        parts = (pool_s, connect_s, write_s, read_s)
        given = [t for t in parts if t is not None]
        total = sum(given) if len(given) == len(parts) else None
        return aiohttp.ClientTimeout(
            total=total, connect=wait, sock_connect=connect_s, sock_read=read_s
        )

    def _proxy_for(self, url: str) -> str | None:
        """HTTP(S)_PROXY / NO_PROXY from the environment, as httpx honours them, read once per
        host; never for loopback."""
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        key = (parts.scheme, host)
        if key not in self._proxies:
            proxy = None
            if host and not is_loopback(host) and not urllib.request.proxy_bypass(host):
                env = urllib.request.getproxies()
                proxy = env.get(parts.scheme) or env.get("all") or None
                if proxy and "://" not in proxy:
                    proxy = f"http://{proxy}"
            self._proxies[key] = proxy
        return self._proxies[key]

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        files = request_data.multipart_data if request_data else None
        fields = request_data.json_parameters if request_data else None
        timeout = self._timeout(
            read_timeout, write_timeout, connect_timeout, pool_timeout, bool(files)
        )

        body: Any = None
        headers: dict[str, str] | None = None
        if files:
            # 8-bit file names as browsers and httpx send them (aiohttp's default would
            # percent-encode "my notes.txt" and Telegram would show it that way); line
            # breaks cannot go into a header at all.
            form = aiohttp.FormData(quote_fields=False)
            for name, value in (fields or {}).items():
                form.add_field(name, value)
            for name, (filename, content, mimetype) in files.items():
                safe_name = re.sub(r"[\r\n]+", " ", filename) if filename else filename
                form.add_field(name, content, filename=safe_name, content_type=mimetype)
            body = form
        elif fields:
            # url-encoded form, like PTB's httpx request; encoded here in one call (aiohttp's
            # FormData for a plain dict costs several times as much per request)
            body = urllib.parse.urlencode(fields).encode()
            headers = _FORM

        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=timeout,
                proxy=self._proxy_for(url),
            ) as resp:
                return resp.status, await resp.read()
        except aiohttp.ConnectionTimeoutError:
            raise TimedOut(
                "Timed out waiting for a connection to the Bot API; the request was not sent."
            ) from None
        except TimeoutError as err:
            raise TimedOut(f"Timed out talking to the Bot API ({type(err).__name__})") from None
        except aiohttp.ClientConnectorError as err:
            # the connection was never made: nothing reached Telegram
            raise NetworkError(_mask(f"aiohttp.{type(err).__name__}: {err}")) from None
        except aiohttp.ClientError as err:
            raise NetworkError(_mask(f"aiohttp.{type(err).__name__}: {err}")) from None

    async def download_capped(self, url: str, out: Any, max_bytes: int, timeout: float) -> int:
        """GET ``url`` and write the body to the binary file object ``out``, at most
        ``max_bytes`` bytes.  Returns the number of bytes written.

        PTB's own file download (``File.download_to_drive``) goes through ``do_request``,
        which holds the whole body in memory and has no size limit; this streams instead
        and stops at the cap.  Raises :class:`MediaTooLarge` past ``max_bytes`` (the caller
        removes the partial file), :class:`TimedOut` / :class:`NetworkError` on transport
        failures and :class:`TelegramError` on a non-200 answer.  Texts never carry the token.
        """
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        client_timeout = aiohttp.ClientTimeout(
            total=timeout, connect=self._connect_timeout, sock_read=self._read_timeout
        )
        written = 0
        try:
            async with session.get(url, timeout=client_timeout, proxy=self._proxy_for(url)) as resp:
                if resp.status != 200:
                    raise TelegramError(f"file download answered HTTP {resp.status}")
                declared = resp.content_length
                if declared is not None and declared > max_bytes:
                    raise MediaTooLarge(
                        f"file is {declared} bytes, over the {max_bytes}-byte limit"
                    )
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    written += len(chunk)
                    if written > max_bytes:
                        raise MediaTooLarge(f"file is over the {max_bytes}-byte limit")
                    out.write(chunk)
        except TimeoutError as err:
            raise TimedOut(f"Timed out downloading a file ({type(err).__name__})") from None
        except aiohttp.ClientError as err:
            raise NetworkError(_mask(f"aiohttp.{type(err).__name__}: {err}")) from None
        return written
