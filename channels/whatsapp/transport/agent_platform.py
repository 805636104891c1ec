"""The official WhatsApp Agent Platform over aiohttp (no SDK): long-poll ``GET /updates``,
``POST /messages``, ``POST /statuses``, ``POST /media``, ``GET /media/<id>`` and the download.

Every method keeps to the platform's per-minute budget (:class:`Pacer`, one per method) so
limits are honoured, not discovered; a ``429`` that comes anyway waits ``Retry-After`` (60 s
without one) and the same call is made again, since nothing happened."""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from channels.base import ChannelError, FetchUrl, MediaTooLarge
from channels.util import capped_file, is_loopback
from channels.whatsapp.transport import ApiError

log = logging.getLogger("chela.channels.whatsapp")

DEFAULT_BASE = "https://api.whatsapp.com/agent/v1"
MEDIA_HOSTS = (".fbsbx.com", ".whatsapp.net")
RETRY_AFTER_DEFAULT = 60.0
MAX_429 = 5  # rate-limit answers in a row before a call gives up (the outbox retries later)


class Pacer:
    """At most ``limit`` calls in any ``window`` seconds: :meth:`take` waits for a slot."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._sent: collections.deque[float] = collections.deque()
        self._lock = asyncio.Lock()

    def wait_needed(self) -> float:
        now = self.clock()
        while self._sent and now - self._sent[0] >= self.window:
            self._sent.popleft()
        return 0.0 if len(self._sent) < self.limit else self._sent[0] + self.window - now

    async def take(self) -> None:
        async with self._lock:
            wait = self.wait_needed()
            if wait > 0:  # the oldest call leaves the window then: one slot is free
                await asyncio.sleep(wait)
                self._sent.popleft()
            self._sent.append(self.clock())


def check_base(api_base: str) -> str:
    """``api_base`` when the key may go there: https, or http to a loopback host."""
    parts = urlsplit(api_base)
    if parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname or "")):
        return api_base.rstrip("/")
    raise ChannelError(f"whatsapp: api_base {api_base!r} must be https (http only on loopback)")


def media_url_allowed(url: str, api_base: str) -> bool:
    """A download URL the key may be sent to: the api_base host or Meta's media hosts, over
    https (http only on loopback)."""
    parts, base = urlsplit(url), urlsplit(api_base)
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(host)):
        return False
    return host == (base.hostname or "").lower() or host.endswith(MEDIA_HOSTS)


async def _error(resp: aiohttp.ClientResponse, what: str, *, send: bool = False) -> ApiError:
    try:
        body = await resp.json(content_type=None)
    except (ValueError, aiohttp.ClientError):
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    code = err.get("code")
    code = code if isinstance(code, int) else 0
    try:
        retry = float(resp.headers.get("Retry-After", ""))
    except ValueError:
        retry = None
    return ApiError(
        what,
        resp.status,
        code,
        str(err.get("message", ""))[:200],
        retry_after=retry,
        unknown_outcome=send and resp.status == 500,
    )


class AgentPlatform:
    """One API key's connection (one agent, one creator)."""

    def __init__(
        self,
        api_key: str,
        api_base: str = DEFAULT_BASE,
        *,
        per_window: int = 12,
        polls_per_window: int = 15,
        window: float = 60.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
        fetch: FetchUrl | None = None,
    ) -> None:
        self.base = check_base(api_base or DEFAULT_BASE)
        self._fetch = fetch  # the app's guarded fetch (bot.net): media downloads, and only them
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self._session: aiohttp.ClientSession | None = None
        self._sleep = sleep
        self.pacers = {
            m: Pacer(per_window, window) for m in ("messages", "statuses", "media", "media_get")
        }
        self.pacers["updates"] = Pacer(polls_per_window, window)

    async def open(self) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._auth)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def pairing_qr(self) -> str | None:
        return None  # nothing to pair: the key is the link

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise ChannelError("whatsapp: transport is not open")
        return self._session

    async def _call(self, method: str, pacer: str, path: str, **kw: Any) -> Any:
        """One paced call; 429 waits and tries again.  The answer's JSON, None on 204."""
        send = method == "POST" and path == "/messages"
        for _ in range(MAX_429):
            await self.pacers[pacer].take()
            try:
                async with self._http().request(method, self.base + path, **kw) as resp:
                    if resp.status == 204:
                        return None
                    if resp.status < 300:
                        return await resp.json(content_type=None)
                    err = await _error(resp, f"{method} {path}", send=send)
            except aiohttp.ClientConnectorError as e:  # never reached the platform: retried
                raise ApiError(f"{method} {path}", 0, 0, f"cannot connect ({e})") from None
            except (aiohttp.ClientError, TimeoutError, ValueError) as e:
                # cut off after the request went out: a send's outcome is unknown
                why = f"{type(e).__name__}: {e}"
                raise ApiError(f"{method} {path}", 0, 0, why, unknown_outcome=send) from None
            if err.status != 429:
                raise err
            wait = err.retry_after if err.retry_after is not None else RETRY_AFTER_DEFAULT
            log.warning("whatsapp: %s %s rate limited; waiting %.0fs", method, path, wait)
            await self._sleep(wait)
        raise err

    async def poll(self, offset: int | None, timeout: int) -> Any:
        params = {"limit": "50", "timeout": str(max(0, min(25, timeout)))}
        if offset is not None:
            params["offset"] = str(offset)
        read = aiohttp.ClientTimeout(total=timeout + 15.0)
        return await self._call("GET", "updates", "/updates", params=params, timeout=read)

    async def send_message(self, payload: dict[str, Any]) -> str:
        body = await self._call("POST", "messages", "/messages", json=payload)
        msgs = body.get("messages") if isinstance(body, dict) else None
        if not (isinstance(msgs, list) and msgs and isinstance(msgs[0], dict)):
            raise ApiError("POST /messages: an answer without a message id", 500, 0)
        return str(msgs[0].get("id", ""))

    async def mark_read(self, payload: dict[str, Any]) -> None:
        await self._call("POST", "statuses", "/statuses", json=payload)

    async def upload(self, path: Path, mime: str) -> str:
        data = aiohttp.FormData()
        data.add_field("messaging_product", "whatsapp")
        data.add_field("type", mime)
        content = await asyncio.to_thread(path.read_bytes)  # the core checked the path
        data.add_field("file", content, filename=path.name, content_type=mime)
        body = await self._call("POST", "media", "/media", data=data)
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            raise ApiError("POST /media: an answer without a media id", 500, 0)
        return str(body["id"])

    async def download(self, media_id: str, dest: Path, max_bytes: int) -> tuple[str, int]:
        info = await self._call("GET", "media_get", f"/media/{media_id}")
        url = info.get("url") if isinstance(info, dict) else None
        if not isinstance(url, str) or not media_url_allowed(url, self.base):
            raise ChannelError("whatsapp: a media URL outside the platform's hosts; not fetched")
        size = info.get("file_size")
        if isinstance(size, int) and size > max_bytes:
            raise MediaTooLarge(f"whatsapp media is {size} bytes, over {max_bytes}")
        if self._fetch is None:
            raise ChannelError("whatsapp: no guarded fetch was given; media not fetched")
        _, body = await self._fetch(url, self._auth, max_bytes)
        if not _same_digest(info.get("sha256"), hashlib.sha256(body).digest()):
            raise ChannelError("whatsapp: media download does not match its SHA-256")
        with capped_file(dest, max_bytes, "whatsapp media") as out:
            out.write(body)
        return str(info.get("mime_type", "")), len(body)


def _same_digest(expected: Any, got: bytes) -> bool:
    """The platform gives the SHA-256 as hex here (Base64 in the update); none: accepted."""
    if not isinstance(expected, str) or not expected:
        return True
    return expected.lower() == got.hex() or expected == base64.b64encode(got).decode()
