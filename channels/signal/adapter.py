"""Signal adapter: a small aiohttp client for ``signal-cli daemon --http``.

Transport (signal-cli-jsonrpc(5)):

* ``POST /api/v1/rpc``   JSON-RPC 2.0 — ``send``, ``sendTyping``, ``sendReaction``, ``version``.
* ``GET  /api/v1/events`` Server-Sent Events; every event's ``data`` is a JSON object
  ``{"envelope": {...}, "account": "+1555..."}``.  Recent signal-cli versions give each
  event an ``id`` and replay the events after ``Last-Event-ID`` on reconnect (all kept
  events when the id is unknown), so replays are expected and de-duplicated here by
  ``(source, timestamp)``.
* ``GET  /api/v1/check``  200 when the daemon runs (used by ``start``).

Chat ids: a DM chat id is the peer's phone number (``+15550001``) or, when the number is
hidden, its service id (a UUID); a group chat id is the group's base64 ``groupId``.  When
sending, the kind of a chat id is taken from what was seen inbound; otherwise it is decided
by shape: ``+<digits>`` or a UUID is a direct recipient, anything else (base64) a group.
The prefixes ``group:<id>`` and ``direct:<id>`` force a kind (handy for proactive sends).

Inbound attachments: signal-cli has already stored them in its attachments directory.  At
intake an attachment only carries that location as ``ref`` (nothing is read or copied); the
core calls ``fetch_media`` once the sender is admitted (SPEC §9.4), which copies the file into
the core's media directory with a size cap.

Message ids are Signal's sent timestamps (milliseconds, as strings).  Quotes and reactions
need the target message's author too; the adapter remembers (bounded) who wrote the
messages it has seen and sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import re
import stat
import time
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import aiohttp
from yarl import URL

from channels.util import BoundedLRU, capped_file
from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
)
import contextlib

log = logging.getLogger(__name__)

MENTION_PLACEHOLDER = "\ufffc"
DEFAULT_ATTACHMENTS_DIR = "~/.local/share/signal-cli/attachments"

_PHONE_RE = re.compile(r"^\+[0-9]{3,20}$")
_UUID_RE = re.compile(
    r"^(PNI:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_COPY_CHUNK = 64 * 1024

_MEDIA_LABELS = {
    "image": "Image",
    "document": "File",
    "video": "Video",
    "audio": "Audio",
    "voice": "Voice",
}


# ----------------------------------------------------------------------------- helpers


class SSEEvent:
    __slots__ = ("data", "event", "id")

    def __init__(self, event: str, data: str, id: str | None) -> None:
        self.event = event
        self.data = data
        self.id = id

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"SSEEvent(event={self.event!r}, id={self.id!r}, data={self.data[:60]!r})"


class SSEParser:
    """Incremental Server-Sent Events parser (WHATWG rules).

    Feed raw bytes as they arrive; complete events are returned.  Lines may end in CRLF,
    LF or CR (also split across chunks); ``:`` lines are comments; several ``data:``
    lines join with ``\\n``; a blank line dispatches; an event without data is dropped.
    ``last_event_id`` persists across events as the spec requires.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._event = ""
        self._started = False
        self._skip_lf = False
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        self._buf.extend(chunk)
        events: list[SSEEvent] = []
        for line in self._lines():
            ev = self._line(line)
            if ev is not None:
                events.append(ev)
        return events

    def _lines(self) -> Iterator[str]:
        buf = self._buf
        start = 0
        i = 0
        if self._skip_lf and buf[:1] == b"\n":
            start = i = 1  # second half of a CRLF split across chunks
        self._skip_lf = False
        n = len(buf)
        while i < n:
            b = buf[i]
            if b == 0x0A:  # LF
                yield self._decode(buf[start:i])
                i += 1
                start = i
            elif b == 0x0D:  # CR or CRLF
                yield self._decode(buf[start:i])
                if i + 1 < n:
                    i += 2 if buf[i + 1] == 0x0A else 1
                else:
                    i += 1
                    self._skip_lf = True  # the LF may arrive with the next chunk
                start = i
            else:
                i += 1
        del buf[:start]

    def _decode(self, raw: bytes | bytearray) -> str:
        text = bytes(raw).decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        return text

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            ev = SSEEvent(self._event or "message", "\n".join(self._data), self.last_event_id)
            self._data = []
            self._event = ""
            return ev
        if line.startswith(":"):
            return None  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif field == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None


def _utf16_to_index(text: str, offset: int) -> int:
    """Signal mention offsets count UTF-16 code units; convert to a Python index."""
    units = 0
    for idx, ch in enumerate(text):
        if units >= offset:
            return idx
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def _media_kind(mime: str, voice: bool = False) -> str:
    mime = (mime or "").lower()
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("video/"):
        return "video"
    if mime.startswith("audio/"):
        return "voice" if voice else "audio"
    return "document"


def _hard_split(text: str, limit: int) -> list[str]:
    """Last-resort split of an already rendered chunk that is still too long."""
    if len(text) <= limit:
        return [text]
    out = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return [c for c in out if c]


class _RpcError(Exception):
    def __init__(
        self, message: str, *, code: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


def _find_retry_after(data: Any, depth: int = 0) -> float | None:
    """signal-cli reports rate limits with a ``retryAfterSeconds`` somewhere in error data."""
    if depth > 4:
        return None
    if isinstance(data, dict):
        for key in ("retryAfterSeconds", "retry_after", "retryAfter"):
            val = data.get(key)
            if isinstance(val, (int, float)) and val >= 0:
                return float(val)
        for val in data.values():
            found = _find_retry_after(val, depth + 1)
            if found is not None:
                return found
    elif isinstance(data, list):
        for val in data:
            found = _find_retry_after(val, depth + 1)
            if found is not None:
                return found
    return None


# ----------------------------------------------------------------------------- adapter


class SignalChannel(Channel):
    name = "signal"
    capabilities = Capabilities(reactions=True, media=True, typing=True, max_text=4000)

    def __init__(
        self,
        *,
        account: str,
        http_url: str = "http://127.0.0.1:8080",
        account_name: str = "default",
        media_dir: Path | str | None = None,
        chunk_limit: int = 4000,
        attachments_dir: str = "",
        account_uuid: str = "",
        reconnect_initial: float = 1.0,
        reconnect_max: float = 60.0,
        idle_timeout: float | None = 90.0,
        connect_timeout: float = 10.0,
        rpc_timeout: float = 60.0,
        rpc_retry_delay: float = 1.0,
        max_retry_after: float = 30.0,
        rpc_account: bool = True,
        dedupe_size: int = 4096,
        memory_size: int = 10000,
    ) -> None:
        if not account:
            raise ValueError("signal: account (the bot's number) is required")
        self.account = account
        self.account_uuid = account_uuid
        self.http_url = http_url.rstrip("/")
        self.account_name = account_name
        self.media_dir = Path(media_dir).expanduser() if media_dir else None
        self.chunk_limit = (
            min(int(chunk_limit), self.capabilities.max_text) if chunk_limit else 4000
        )
        self.attachments_dir = Path(os.path.expanduser(attachments_dir or DEFAULT_ATTACHMENTS_DIR))
        self.reconnect_initial = reconnect_initial
        self.reconnect_max = reconnect_max
        self.idle_timeout = idle_timeout
        self.connect_timeout = connect_timeout
        self.rpc_timeout = rpc_timeout
        self.rpc_retry_delay = rpc_retry_delay
        self.max_retry_after = max_retry_after
        self.rpc_account = rpc_account

        self._session: aiohttp.ClientSession | None = None
        self._sink: InboundSink | None = None
        self._task: asyncio.Task | None = None
        self._resp: aiohttp.ClientResponse | None = None
        self._running = False
        self._last_event_id: str | None = None
        self._ids = itertools.count(1)
        self._seen = BoundedLRU(dedupe_size)  # (source, timestamp) already delivered
        self._authors = BoundedLRU(memory_size)  # (chat_id, message_id) -> (author, text snippet)
        self._chat_kinds = BoundedLRU(memory_size)  # chat_id -> "group" | "direct"
        self._own_sent = BoundedLRU(memory_size)  # timestamps of messages we sent
        self._text_styles = True  # until signal-cli refuses them
        self.connects = 0  # successful events-stream connections
        self._stream_got_data = False  # the current events stream delivered bytes

    # ------------------------------------------------------------------ lifecycle

    @property
    def bot_identity(self) -> dict:
        return {"id": self.account, "username": self.account, "uuid": self.account_uuid}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    def _unreachable(self, err: object) -> ChannelError:
        return ChannelError(
            f"signal-cli daemon not reachable at {self.http_url} ({err}); start it with "
            f"`signal-cli -a {self.account} daemon --http {self._host_port()}`"
        )

    def _host_port(self) -> str:
        u = URL(self.http_url)
        return f"{u.host or '127.0.0.1'}:{u.port or 8080}"

    async def start(self, sink: InboundSink) -> None:
        if self._task is not None and not self._task.done():
            return
        self._sink = sink
        self._get_session()
        try:
            await self._check_daemon()
            resp = await self._open_events()
        except ChannelError:
            await self._close_session()
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            await self._close_session()
            raise self._unreachable(e) from e
        self._running = True
        self.connects += 1
        log.info("signal: connected to signal-cli at %s as %s", self.http_url, self.account)
        self._resp = resp
        self._task = asyncio.create_task(self._run(resp), name=f"signal-events-{self.account_name}")

    async def open_for_sending(self) -> None:
        """JSON-RPC only (no event stream): check that the daemon answers."""
        self._get_session()
        try:
            await self._check_daemon()
        except ChannelError:
            await self._close_session()
            raise
        log.info(
            "signal: connected to signal-cli at %s as %s for sending only",
            self.http_url,
            self.account,
        )

    async def stop(self) -> None:
        self._running = False
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        resp, self._resp = self._resp, None
        if resp is not None:
            resp.close()  # the task may have been cancelled before it ever ran
        await self._close_session()

    async def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def _check_daemon(self) -> None:
        session = self._get_session()
        timeout = aiohttp.ClientTimeout(total=self.connect_timeout)
        try:
            async with session.get(f"{self.http_url}/api/v1/check", timeout=timeout) as resp:
                status = resp.status
                await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise self._unreachable(e) from e
        if status == 200:
            return
        if status == 404:  # older signal-cli without /check: any JSON-RPC answer will do
            try:
                await self._rpc_once("version", {})
                return
            except _RpcError as e:
                raise self._unreachable(e) from e
        raise self._unreachable(f"HTTP {status} from /api/v1/check")

    # ------------------------------------------------------------------ events stream

    async def _open_events(self) -> aiohttp.ClientResponse:
        session = self._get_session()
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self._last_event_id:
            headers["Last-Event-ID"] = self._last_event_id
        timeout = aiohttp.ClientTimeout(total=None, connect=self.connect_timeout, sock_read=None)
        resp = await session.get(
            f"{self.http_url}/api/v1/events",
            params={"account": self.account},
            headers=headers,
            timeout=timeout,
        )
        if resp.status != 200:
            body = (await resp.text(errors="replace"))[:200]
            resp.release()
            raise ChannelError(f"signal-cli events endpoint returned HTTP {resp.status}: {body}")
        return resp

    async def _run(self, resp: aiohttp.ClientResponse | None) -> None:
        delay = self.reconnect_initial
        while self._running:
            if resp is None:
                try:
                    resp = await self._open_events()
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    log.warning(
                        "signal: events stream connect to %s failed (%s); retrying in %.1fs",
                        self.http_url,
                        e,
                        delay,
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.reconnect_max)
                    continue
                self.connects += 1
                self._resp = resp
                log.info("signal: events stream reconnected (%s)", self.http_url)
            got_data = False
            self._stream_got_data = False
            try:
                got_data = await self._read_stream(resp)
                reason = "closed by the daemon"
            except asyncio.CancelledError:
                resp.close()
                raise
            except _Stalled:
                reason = f"silent for {self.idle_timeout:g}s (no keep-alive)"
                got_data = True
            except Exception as e:
                reason = f"failed ({type(e).__name__}: {e})"
                # a stream that delivered data and then broke was healthy: reset the backoff
                got_data = self._stream_got_data
            finally:
                resp.close()
            resp = self._resp = None
            if not self._running:
                break
            if got_data:
                delay = self.reconnect_initial
            log.warning("signal: events stream %s; reconnecting in %.1fs", reason, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.reconnect_max)

    async def _read_stream(self, resp: aiohttp.ClientResponse) -> bool:
        parser = SSEParser()
        got_data = False
        while True:
            try:
                if self.idle_timeout:
                    async with asyncio.timeout(self.idle_timeout):
                        chunk = await resp.content.readany()
                else:
                    chunk = await resp.content.readany()
            except TimeoutError:
                raise _Stalled() from None
            if not chunk:
                return got_data
            got_data = self._stream_got_data = True
            for ev in parser.feed(chunk):
                try:
                    await self._handle_event(ev)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("signal: could not handle event %s: %.300r", ev.id, ev.data)
                if ev.id is not None:
                    self._last_event_id = ev.id

    async def _handle_event(self, ev: SSEEvent) -> None:
        if ev.event not in ("message", "receive"):
            log.debug("signal: ignoring SSE event %r", ev.event)
            return
        try:
            payload = json.loads(ev.data)
        except ValueError:
            log.warning("signal: undecodable event data: %.200r", ev.data)
            return
        if (
            isinstance(payload, dict) and payload.get("method") == "receive"
        ):  # JSON-RPC notification form
            payload = payload.get("params") or {}
        if isinstance(payload, dict) and "result" in payload and "envelope" not in payload:
            payload = payload.get("result") or {}
        if not isinstance(payload, dict):
            return
        if payload.get("exception") and "envelope" not in payload:
            log.warning("signal: daemon reported %s", payload.get("exception"))
            return
        acct = payload.get("account")
        if acct and acct not in (self.account, self.account_uuid):
            return  # another account of a multi-account daemon
        envelope = payload.get("envelope")
        if isinstance(envelope, dict):
            await self._handle_envelope(envelope)

    async def _handle_envelope(self, env: dict) -> None:
        key = (
            env.get("sourceNumber") or env.get("source") or env.get("sourceUuid"),
            env.get("timestamp"),
        )
        if key in self._seen:
            log.debug("signal: duplicate envelope %s ignored", key)
            return
        msg = self.translate(env)
        if msg is None:
            return
        sink = self._sink
        if sink is None:
            return
        for attempt in range(3):
            try:
                await sink(msg)
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "signal: inbound sink failed for %s (attempt %d)", msg.raw_id, attempt + 1
                )
                if attempt == 2:
                    return
                await asyncio.sleep(0.5 * (attempt + 1))
        self._seen.put(key)

    # ------------------------------------------------------------------ translation

    def _is_self(self, *ids: Any) -> bool:
        return any(
            i and (i == self.account or (self.account_uuid and i == self.account_uuid)) for i in ids
        )

    def translate(self, env: dict) -> InboundMessage | None:
        """Turn one envelope into an ``InboundMessage`` (``None`` for everything else)."""
        dm = env.get("dataMessage")
        if not isinstance(dm, dict):
            return None  # receipts, typing, sync, calls, stories, edits
        number = env.get("sourceNumber") or (
            env.get("source") if _PHONE_RE.match(str(env.get("source") or "")) else None
        )
        uuid = env.get("sourceUuid") or ""
        source = number or env.get("source") or uuid
        if not source or self._is_self(number, uuid, env.get("source")):
            return None
        if dm.get("reaction") or dm.get("remoteDelete") or dm.get("groupV2Change"):
            return None
        timestamp = dm.get("timestamp") or env.get("timestamp") or 0
        group = dm.get("groupInfo") or dm.get("groupV2") or None
        text = dm.get("message") or ""
        text, mentioned = self._apply_mentions(text, dm.get("mentions") or [])

        attachments, notes = self._attachments(dm.get("attachments") or [])
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)
        if not text.strip() and not attachments:
            return None  # group updates, stickers, empty messages

        if isinstance(group, dict) and group.get("groupId"):
            chat_id = group["groupId"]
            chat_type = "group"
            title = group.get("groupName") or group.get("name") or ""
        else:
            chat_id = source
            chat_type = "direct"
            title = ""
        self._chat_kinds.put(chat_id, chat_type)

        reply_to_id = None
        reply_to_bot = False
        quote = dm.get("quote")
        if isinstance(quote, dict) and quote.get("id") is not None:
            reply_to_id = str(quote["id"])
            reply_to_bot = self._is_self(
                quote.get("author"), quote.get("authorNumber"), quote.get("authorUuid")
            )
            if not reply_to_bot and reply_to_id.isdigit() and int(reply_to_id) in self._own_sent:
                reply_to_bot = True
            if (
                reply_to_bot
                and not self.account_uuid
                and quote.get("authorUuid")
                and (quote.get("authorNumber") == self.account)
            ):
                self.account_uuid = quote["authorUuid"]

        message_id = str(timestamp)
        self._remember(chat_id, message_id, source, text)
        return InboundMessage(
            channel=self.name,
            chat_id=chat_id,
            sender_id=source,
            text=text,
            message_id=message_id,
            chat_type=chat_type,
            account=self.account_name,
            sender_name=env.get("sourceName") or "",
            chat_title=title,
            reply_to_id=reply_to_id,
            reply_to_bot=reply_to_bot,
            mentioned=mentioned,
            attachments=attachments,
            timestamp=(env.get("timestamp") or timestamp) / 1000.0,
            group_kind="group",
            raw_id=f"{source}:{env.get('timestamp') or timestamp}",
        )

    def _apply_mentions(self, text: str, mentions: list) -> tuple[str, bool]:
        mentioned = False
        spans = []
        for m in mentions:
            if not isinstance(m, dict):
                continue
            ids = (m.get("number"), m.get("uuid"), m.get("name"))
            is_bot = self._is_self(*ids)
            if is_bot:
                mentioned = True
                if not self.account_uuid and m.get("uuid") and m.get("number") == self.account:
                    self.account_uuid = m["uuid"]
            label = m.get("name") or m.get("number") or (m.get("uuid") or "")[:8] or "someone"
            spans.append(
                (int(m.get("start") or 0), int(m.get("length") or 1), "@" + label.lstrip("@"))
            )
        # Replace from the end so earlier offsets stay valid (offsets are UTF-16 units).
        for start, length, label in sorted(spans, key=lambda s: s[0], reverse=True):
            i = _utf16_to_index(text, start)
            j = _utf16_to_index(text, start + length)
            if i < len(text) and text[i:j] == MENTION_PLACEHOLDER * (j - i) and j > i:
                text = text[:i] + label + text[j:]
        text = text.replace(MENTION_PLACEHOLDER, "@")
        return text, mentioned

    def _attachments(self, items: list) -> tuple[list[MediaItem], list[str]]:
        """Attachments as not-yet-fetched items: ``ref`` is signal-cli's stored file (its
        ``storedFilename``, else the attachment id inside ``attachments_dir``).  No disk
        access here: the sender has not been admitted yet."""
        out: list[MediaItem] = []
        notes: list[str] = []
        for att in items:
            if not isinstance(att, dict):
                continue
            name = att.get("filename") or att.get("id") or "attachment"
            mime = att.get("contentType") or ""
            kind = _media_kind(mime, bool(att.get("voiceNote")))
            ref = att.get("storedFilename") or att.get("id") or ""
            if not isinstance(ref, str) or not ref:
                notes.append(f"[attachment unavailable: {name}]")
                continue
            try:
                size = max(0, int(att.get("size") or 0))
            except (TypeError, ValueError):
                size = 0
            out.append(
                MediaItem(
                    kind=kind,
                    target="",
                    name=name,
                    mime=mime,  # type: ignore[arg-type]
                    ref=ref,
                    size=size,
                )
            )
        return out, notes

    def _stored_path(self, ref: str) -> Path:
        """Where signal-cli keeps the attachment ``ref``.  An absolute path is signal-cli's
        own ``storedFilename``; anything else must be a bare attachment id (no directory
        parts), looked up in ``attachments_dir``."""
        path = Path(ref)
        if path.is_absolute():
            return path
        if "/" in ref or "\\" in ref or ref in (".", "..") or "\x00" in ref:
            raise ChannelError(f"signal: unusable attachment reference {ref!r}")
        return self.attachments_dir / ref

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """Copy signal-cli's stored file into ``dest_dir`` (mode 0600), at most ``max_bytes``."""
        if not item.ref:
            return item
        name = item.name or "attachment"
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(f"signal: {name} is {item.size} bytes, over {max_bytes}")
        src = self._stored_path(item.ref)
        safe = _SAFE_NAME.sub("_", Path(name).name).strip("._")[:80] or "attachment"
        dest = Path(dest_dir).absolute() / f"signal_{uuid.uuid4().hex[:12]}_{safe}"
        try:
            await asyncio.to_thread(_copy_capped, src, dest, max_bytes, name)
        except OSError as e:  # anything _copy_capped did not already translate
            dest.unlink(missing_ok=True)
            raise ChannelError(f"signal: copying attachment {name} failed ({e})") from None
        return dataclasses.replace(item, target=str(dest))

    def _remember(self, chat_id: str, message_id: str, author: str, text: str = "") -> None:
        self._authors.put((chat_id, message_id), (author, text[:200]))
        self._authors.put(("", message_id), (author, text[:200]))

    def _author_of(self, chat_id: str, message_id: str) -> tuple[str, str] | None:
        return self._authors.get((chat_id, message_id)) or self._authors.get(("", message_id))

    # ------------------------------------------------------------------ outbound

    def _target(self, chat_id: str) -> tuple[str, dict]:
        """Return (clean chat id, recipient params) for a chat id."""
        if chat_id.startswith("group:"):
            cid = chat_id[len("group:") :]
            return cid, {"groupId": cid}
        if chat_id.startswith("direct:"):
            cid = chat_id[len("direct:") :]
            return cid, {"recipient": [cid]}
        kind = self._chat_kinds.get(chat_id)
        if kind is None:
            kind = "direct" if (_PHONE_RE.match(chat_id) or _UUID_RE.match(chat_id)) else "group"
        if kind == "group":
            return chat_id, {"groupId": chat_id}
        return chat_id, {"recipient": [chat_id]}

    def _quote(self, chat_id: str, params: dict, reply_to_id: str | None) -> dict | None:
        if not reply_to_id:
            return None
        try:
            ts = int(reply_to_id)
        except (TypeError, ValueError):
            log.debug(
                "signal: reply_to_id %r is not a Signal timestamp; sending without quote",
                reply_to_id,
            )
            return None
        known = self._author_of(chat_id, str(ts))
        if known is not None:
            author, text = known
        elif int(ts) in self._own_sent:
            author, text = self.account, ""
        elif "recipient" in params:
            author, text = chat_id, ""  # in a DM the other side is the likely author
        else:
            log.info("signal: unknown author of message %s in group; sending without quote", ts)
            return None
        quote = {"quoteTimestamp": ts, "quoteAuthor": author}
        if text:
            quote["quoteMessage"] = text
        return quote

    async def send(self, msg: OutboundMessage) -> list[str]:
        chat_id, target = self._target(msg.chat_id)
        limit = self.chunk_limit
        chunks: list[str] = []
        styles: dict[int, list[str]] = {}  # chunk index → signal-cli text styles
        if msg.text and msg.text.strip():
            from channels.chunking import chunk_markdown
            from channels.formatting import markdown_to_signal

            # rendering only removes markup ("[t](u)" becomes "t (u)"), so chunks stay in the limit
            for md in chunk_markdown(msg.text, limit):
                plain, ranges = markdown_to_signal(md)
                if plain.strip():
                    if ranges and self._text_styles:
                        styles[len(chunks)] = ranges
                    chunks.append(plain)

        paths: list[str] = []
        notes: list[str] = []
        for item in msg.media:
            label = _MEDIA_LABELS.get(item.kind, "File")
            if item.is_url:
                notes.append(f"{label}: {item.target}")
                continue
            p = Path(item.target)
            if p.is_absolute() and p.is_file():
                paths.append(str(p))
            else:
                notes.append(f"[attachment unavailable: {item.name or p.name}]")
        if notes:
            tail = "\n".join(notes)
            if chunks and len(chunks[-1]) + 2 + len(tail) <= limit:
                chunks[-1] = f"{chunks[-1]}\n\n{tail}"
            else:
                chunks.extend(_hard_split(tail, limit))
        if not chunks and not paths:
            return []
        if not chunks:
            chunks = [""]

        quote = self._quote(chat_id, target, msg.reply_to_id)
        ids: list[str] = []
        last = len(chunks) - 1
        for i, text in enumerate(chunks):
            params: dict[str, Any] = dict(target)
            if text:
                params["message"] = text
            if quote and (i == 0 or msg.reply_mode == "all"):
                params.update(quote)
            if i == last and paths:
                params["attachments"] = paths
            try:
                result = await self._send_styled(params, styles.get(i))
            except ChannelError:
                if not ids:
                    raise
                log.exception(
                    "signal: chunk %d/%d to %s failed; continuing", i + 1, len(chunks), chat_id
                )
                continue
            ts = result.get("timestamp") if isinstance(result, dict) else None
            if ts is not None:
                ids.append(str(ts))
                self._own_sent.put(int(ts))
                self._remember(chat_id, str(ts), self.account, text)
        return ids

    async def _send_styled(self, params: dict, styles: list[str] | None) -> Any:
        """``send`` with text styles; if signal-cli refuses the call with them (versions
        before text styles), send again without and stop using them."""
        if not styles or not self._text_styles:
            return await self._rpc("send", params)
        try:
            return await self._rpc("send", dict(params, textStyle=styles))
        except ChannelError as styled_error:
            refused = styled_error.__cause__
            if not isinstance(refused, _RpcError) or refused.code is None:
                raise  # no JSON-RPC answer (transport, HTTP): not the styles' fault
            result = await self._rpc("send", params)
            self._text_styles = False
            log.warning(
                "signal: signal-cli refused text styles (%s); sending plain text from now on",
                styled_error,
            )
            return result

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        _, target = self._target(chat_id)
        try:
            await self._rpc("sendTyping", dict(target), retries=0)
        except ChannelError as e:
            log.debug("signal: sendTyping failed: %s", e)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        cid, target = self._target(chat_id)
        try:
            ts = int(message_id)
        except (TypeError, ValueError):
            raise ChannelError(
                f"signal: cannot react to non-timestamp message id {message_id!r}"
            ) from None
        known = self._author_of(cid, str(ts))
        if known is not None:
            author = known[0]
        elif ts in self._own_sent:
            author = self.account
        elif "recipient" in target:
            author = cid
        else:
            raise ChannelError(f"signal: unknown author of message {message_id} in group {cid}")
        params = dict(target, emoji=emoji, targetAuthor=author, targetTimestamp=ts)
        await self._rpc("sendReaction", params)

    # ------------------------------------------------------------------ JSON-RPC

    async def _rpc(self, method: str, params: dict, *, retries: int = 1) -> Any:
        last: _RpcError | None = None
        for attempt in range(retries + 1):
            try:
                return await self._rpc_once(method, params)
            except _RpcError as e:
                last = e
                if attempt < retries:
                    wait = self.rpc_retry_delay
                    if e.retry_after is not None:
                        wait = min(max(e.retry_after, wait), self.max_retry_after)
                    log.warning("signal: %s failed (%s); retrying in %.1fs", method, e, wait)
                    await asyncio.sleep(wait)
        raise ChannelError(f"signal-cli {method} failed: {last}") from last

    async def _rpc_once(self, method: str, params: dict) -> Any:
        session = self._get_session()
        if self.rpc_account and "account" not in params and method != "version":
            params = dict(params, account=self.account)
        body = {
            "jsonrpc": "2.0",
            "method": method,
            "params": params,
            "id": f"chela-{next(self._ids)}",
        }
        timeout = aiohttp.ClientTimeout(total=self.rpc_timeout, connect=self.connect_timeout)
        started = time.monotonic()
        try:
            async with session.post(
                f"{self.http_url}/api/v1/rpc", json=body, timeout=timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
                retry_after_hdr = resp.headers.get("Retry-After")
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise _RpcError(f"{type(e).__name__}: {e} (daemon at {self.http_url})") from e
        log.debug(
            "signal: rpc %s -> HTTP %s in %.0fms",
            method,
            status,
            (time.monotonic() - started) * 1000,
        )
        if status != 200:
            retry_after = None
            if status == 429 and retry_after_hdr and retry_after_hdr.strip().isdigit():
                retry_after = float(retry_after_hdr)
            raise _RpcError(
                f"HTTP {status}: {raw[:200].decode('utf-8', 'replace')}", retry_after=retry_after
            )
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise _RpcError(f"invalid JSON from daemon: {raw[:200]!r}") from e
        if not isinstance(data, dict):
            raise _RpcError(f"unexpected JSON-RPC response: {str(data)[:200]}")
        err = data.get("error")
        if err:
            if isinstance(err, dict):
                raise _RpcError(
                    f"JSON-RPC error {err.get('code')}: {err.get('message')}",
                    code=err.get("code"),
                    retry_after=_find_retry_after(err.get("data")),
                )
            raise _RpcError(f"JSON-RPC error: {err}")
        return data.get("result")


def _copy_capped(src: Path, dest: Path, max_bytes: int, name: str) -> None:
    """Copy the regular file ``src`` (a symlink is refused, not followed) to the new file
    ``dest`` (mode 0600), reading at most ``max_bytes`` + 1 bytes.  On any failure ``dest``
    is removed.  Raises ``MediaTooLarge`` or ``ChannelError``."""
    try:
        # O_NONBLOCK: opening a FIFO planted there must not hang the worker thread
        src_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ChannelError(
            f"signal: attachment {name} not found at {src} (is attachments_dir right?)"
        ) from None
    except OSError as e:
        raise ChannelError(f"signal: cannot open attachment {name} ({e.strerror or e})") from None
    with os.fdopen(src_fd, "rb", buffering=0) as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ChannelError(f"signal: attachment {name} is not a regular file")
        if info.st_size > max_bytes:
            raise MediaTooLarge(f"signal: {name} is {info.st_size} bytes, over {max_bytes}")
        with capped_file(dest, max_bytes, f"signal: copying attachment {name}") as out:
            while chunk := source.read(_COPY_CHUNK):
                out.write(chunk)  # raises past the cap if the file grew after the check


class _Stalled(Exception):
    """No bytes (not even a keep-alive) within ``idle_timeout``."""
