"""A wire-level fake of the Telegram Bot API, for tests and benchmarks.

It is a small aiohttp server on 127.0.0.1 that speaks enough of the Bot API for the real
python-telegram-bot client (or any other client) to run against it unchanged::

    fake = FakeTelegram(token="123:ABC", bot_username="chela_bot")
    await fake.start()
    bot = telegram.Bot("123:ABC", base_url=fake.base_url, base_file_url=fake.base_file_url)
    # or: TelegramChannel(token="123:ABC", api_base=fake.api_base, ...)

    uid = fake.inject_message(42, "hello @chela_bot", from_id=42, username="alice")
    sent = await fake.wait_for_sent(1)             # what the bot answered
    assert sent[0].chat_id == 42 and sent[0].parse_mode == "HTML"
    assert fake.confirmed_offset == uid + 1        # the bot acknowledged the update
    await fake.stop()

Supported methods: getMe, deleteWebhook, setWebhook (recorded only), getUpdates (real long-poll
semantics: ``offset`` confirms and drops older updates, ``timeout`` waits until an update arrives,
``limit``; an overlapping poll terminates the older one with 409 Conflict; ``allowed_updates``
is recorded, not enforced), sendMessage,
editMessageText, deleteMessage, sendChatAction, setMessageReaction, sendPhoto, sendDocument,
sendVideo, sendAudio, sendVoice, sendAnimation (multipart upload, ``attach://`` part, URL or a
known file_id), getFile and file download under ``base_file_url``, answerCallbackQuery.  Anything
else is answered 404 like the real server.  Bodies may be JSON, form-urlencoded or multipart; query
strings work too.

Records (plain attributes, read them freely):

* ``calls`` – every API call as ``(method, params)`` in arrival order (method as sent,
  params decoded: ints as ints, JSON fields as objects, uploads as :class:`Upload`).
* ``sent`` – one :class:`SentMessage` per message the bot created (text and media).
* ``reactions`` – ``(chat_id, message_id, [reaction dicts])`` per setMessageReaction.
* ``chat_actions`` – ``(chat_id, action, message_thread_id)`` per sendChatAction.
* ``messages`` – every message in the fake's world keyed by ``(chat_id, message_id)`` (Bot API
  JSON dicts: injected user messages and the bot's own messages).
* ``downloads`` – the ``file_path`` of every file fetched under ``base_file_url``.

Behaviour switches and failure injection:

* ``fail_next(method, status=429, retry_after=1)`` / ``fail_next(method, status=400,
  description="Bad Request: can't parse entities: ...")`` – the next call(s) of ``method``
  fail with that error (queued; each call consumes one).
* ``reject_urls = True`` – sendPhoto & co. with an http(s) URL answer 400 "wrong file
  identifier/HTTP URL specified".
* ``inject_message(..., file_size=N)`` / ``add_file(..., declared_size=N)`` – the file's
  ``file_size`` (in the message and in getFile) claims N bytes whatever its real length;
  ``None`` leaves the field out.
* ``chunked_downloads = True`` – file downloads are streamed without a Content-Length header,
  so a client can only learn the size by counting.
* ``clear_failures(method=None)`` – drop queued failures (ends an outage made with
  ``fail_next(..., times=many)``).
* ``fail_chat(chat_id, status=502, times=1)`` – the next sendMessage calls to that chat only
  fail (403 defaults to "Forbidden: bot was blocked by the user").
* ``send_delay = seconds`` – sendMessage records the message, then waits that long before
  answering (a send in flight: the user has it, the bot does not know yet).
* ``hold_sends(predicate)`` / ``refuse_held()`` – sendMessage calls whose params match
  ``predicate`` wait, unrecorded, until ``refuse_held()``; then they are refused (502): a
  send in flight that never reached the user (a process killed while it waits).
* ``stall_next_poll(seconds)`` – the next getUpdates hangs that long without answering (then
  answers ``[]``), like a dead TCP connection.
* ``validate_html = True`` (default) – ``parse_mode=HTML`` text is checked like Telegram does
  (supported tags, balanced nesting, no bare ``<``); errors are 400 "Bad Request: can't parse
  entities: ...".  Texts longer than 4096 characters (after entity parsing) or empty texts are
  refused as the real server does.

Several bots on one server (several accounts of the channel): ``work = fake.add_bot("9:W",
"work_bot")`` after ``start()`` returns a second bot with its own updates queue, ``sent``,
``calls`` and files, answered at the same ``api_base``; each request reaches the bot of its token.

Wrong token → 401 ``{"ok": false, "error_code": 401, "description": "Unauthorized"}``.
Message ids increase per chat and are shared between injected user messages and bot messages.
"""

from __future__ import annotations

import asyncio
import html as html_lib
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

from aiohttp import web
import contextlib

__all__ = ["FakeTelegram", "SentMessage", "Upload"]

# Fields that arrive as strings in form/multipart bodies and must be coerced.
_INT_FIELDS = {
    "chat_id",
    "message_id",
    "offset",
    "limit",
    "timeout",
    "message_thread_id",
    "reply_to_message_id",
    "from_chat_id",
    "user_id",
    "duration",
    "width",
    "height",
    "max_connections",
    "cache_time",
}
_JSON_FIELDS = {
    "reply_parameters",
    "allowed_updates",
    "reaction",
    "reply_markup",
    "entities",
    "caption_entities",
    "link_preview_options",
    "media",
}
_BOOL_FIELDS = {
    "drop_pending_updates",
    "disable_notification",
    "allow_sending_without_reply",
    "is_big",
    "protect_content",
    "disable_web_page_preview",
    "show_caption_above_media",
    "has_spoiler",
    "supports_streaming",
    "disable_content_type_detection",
    "show_alert",
}
# sendX method -> (parameter holding the file, message field / kind)
_MEDIA_METHODS = {
    "sendphoto": ("photo", "photo"),
    "senddocument": ("document", "document"),
    "sendvideo": ("video", "video"),
    "sendaudio": ("audio", "audio"),
    "sendvoice": ("voice", "voice"),
    "sendanimation": ("animation", "animation"),
}
_DEFAULT_MIME = {
    "photo": "image/jpeg",
    "document": "application/octet-stream",
    "video": "video/mp4",
    "audio": "audio/mpeg",
    "voice": "audio/ogg",
    "animation": "video/mp4",
}
# Telegram's HTML subset.
_HTML_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "span",
    "tg-spoiler",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-emoji",
    "tg-time",
}
_TAG_RE = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)([^<>]*)>")
_ENTITY_RE = re.compile(r"&(#[0-9]+|#x[0-9a-fA-F]+|[a-zA-Z]+);")


@dataclass
class Upload:
    """A file that arrived in a multipart body."""

    filename: str
    data: bytes
    content_type: str = ""

    def __repr__(self) -> str:  # keep .calls readable
        return f"Upload({self.filename!r}, {len(self.data)} bytes)"


@dataclass
class SentMessage:
    """A message the bot created through sendMessage / sendPhoto / …"""

    method: str  # "sendMessage", "sendPhoto", …
    kind: str  # "text", "photo", "document", "video", "audio", "voice", "animation"
    chat_id: int | str
    message_id: int
    text: str | None = None  # as sent (HTML source when parse_mode is HTML)
    caption: str | None = None
    parse_mode: str | None = None
    reply_to_message_id: int | None = None  # from reply_parameters or the legacy parameter
    reply_parameters: dict | None = None
    message_thread_id: int | None = None
    filename: str | None = None  # uploads
    data: bytes | None = None  # uploaded bytes (or the bytes of a known file_id)
    url: str | None = None  # when the media was given as an http(s) URL
    file_id: str | None = None  # file_id given, or assigned to the upload
    params: dict = field(default_factory=dict)
    edits: list[str] = field(default_factory=list)  # editMessageText history (new texts)

    @property
    def visible_text(self) -> str:
        """Text (or caption) as a user would see it: HTML tags removed, entities decoded."""
        value = self.text if self.text is not None else (self.caption or "")
        if (self.parse_mode or "").upper() == "HTML":
            return _strip_html(value)
        return value


class _ApiError(Exception):
    def __init__(self, status: int, description: str, parameters: dict | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


def _strip_html(value: str) -> str:
    return html_lib.unescape(_TAG_RE.sub("", value))


def _utf16_len(value: str) -> int:
    return len(value.encode("utf-16-le")) // 2


def _check_html(value: str) -> None:
    """Raise _ApiError 400 the way Telegram does for malformed HTML."""
    stack: list[str] = []
    pos = 0
    while True:
        lt = value.find("<", pos)
        if lt < 0:
            break
        m = _TAG_RE.match(value, lt)
        offset = len(value[:lt].encode("utf-8"))
        if not m:
            raise _ApiError(
                400,
                f'Bad Request: can\'t parse entities: unsupported start tag "" at byte offset {offset}',
            )
        closing, name, _attrs = m.group(1), m.group(2).lower(), m.group(3)
        if name not in _HTML_TAGS:
            kind = "end" if closing else "start"
            raise _ApiError(
                400,
                f'Bad Request: can\'t parse entities: unsupported {kind} tag "{name}" at byte offset {offset}',
            )
        if closing:
            if not stack:
                raise _ApiError(
                    400,
                    f"Bad Request: can't parse entities: unexpected end tag at byte offset {offset}",
                )
            expected = stack.pop()
            if expected != name:
                raise _ApiError(
                    400,
                    f"Bad Request: can't parse entities: can't find end tag corresponding to start tag \"{expected}\"",
                )
        else:
            stack.append(name)
        pos = m.end()
    if stack:
        raise _ApiError(
            400,
            f"Bad Request: can't parse entities: can't find end tag corresponding to start tag \"{stack[-1]}\"",
        )
    for m in _ENTITY_RE.finditer(value):
        ent = m.group(1)
        if not ent.startswith("#") and ent.lower() not in ("lt", "gt", "amp", "quot"):
            raise _ApiError(
                400, f'Bad Request: can\'t parse entities: unsupported HTML entity "&{ent};"'
            )


_REAL_SIZE: Any = object()  # add_file / inject_message default: declare the real length


class FakeTelegram:
    """The fake Bot API server.  See the module docstring for a tour."""

    def __init__(
        self,
        token: str = "123:ABC",
        bot_username: str = "chela_bot",
        bot_id: int | None = None,
        *,
        bot_first_name: str = "Chela",
        host: str = "127.0.0.1",
        port: int = 0,
        validate_html: bool = True,
        reject_urls: bool = False,
        first_update_id: int = 100_000,
    ) -> None:
        self.token = token
        self.bot_username = bot_username
        if bot_id is None:
            head = token.split(":", 1)[0]
            bot_id = int(head) if head.isdigit() else 123
        self.bot_id = bot_id
        self.bot_first_name = bot_first_name
        self.host = host
        self.port = port
        self.validate_html = validate_html
        self.reject_urls = reject_urls

        self.calls: list[tuple[str, dict]] = []
        self.sent: list[SentMessage] = []
        self.commands: list[dict] = []  # the last setMyCommands list
        self.reactions: list[tuple[int | str, int, list]] = []
        self.chat_actions: list[tuple[int | str, str, int | None]] = []
        self.messages: dict[tuple[int | str, int], dict] = {}
        self.webhook_deleted = 0
        self.downloads: list[str] = []
        self.chunked_downloads = False
        self.send_delay = 0.0  # seconds sendMessage waits, after recording, before answering
        self._hold: Callable[[dict], bool] | None = None  # hold_sends()
        self._held = asyncio.Event()  # set by refuse_held()
        # seconds each of the next editMessageText calls waits before it is applied, in
        # order (a slow request in flight: one sent earlier may land after one sent later)
        self.edit_delays: list[float] = []
        self._chat_failures: dict[str, list[_ApiError]] = {}

        self._updates: list[dict] = []  # pending (not yet confirmed) updates
        self._update_ids = itertools.count(first_update_id)
        self._confirmed_offset: int | None = None
        self._failures: dict[str, list[_ApiError]] = {}
        self._stalls: list[float] = []
        self._poll_seq = 0
        self._msg_ids: dict[int | str, int] = {}
        self._chats: dict[int | str, dict] = {}
        self._files: dict[str, tuple[bytes, str]] = {}  # file_id -> (bytes, file_path)
        self._declared: dict[str, int | None] = {}  # file_id -> file_size it claims (None: absent)
        self._file_seq = itertools.count(1)
        self._sent_by_key: dict[tuple[int | str, int], SentMessage] = {}
        self._changed: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        # every bot this server answers for, by token (add_bot); each has its own updates,
        # sent messages, calls and files
        self._bots: dict[str, FakeTelegram] = {token: self}
        self._server: FakeTelegram = self  # the bot whose server this one's requests reach

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> FakeTelegram:
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    def add_bot(self, token: str, bot_username: str, bot_id: int | None = None) -> FakeTelegram:
        """One more bot on this server (a second Bot API token: another account of the
        channel).  Call after :meth:`start`; the bot returned has its own updates queue,
        ``sent`` list and calls, and shares the server's ``api_base``."""
        if token in self._bots:
            raise ValueError(f"a bot with token {token!r} is already served")
        bot = FakeTelegram(
            token,
            bot_username,
            bot_id,
            host=self.host,
            port=self.port,
            validate_html=self.validate_html,
            reject_urls=self.reject_urls,
        )
        bot._server = self
        bot._changed = asyncio.Event()
        bot._closing = self._closing
        self._bots[token] = bot
        return bot

    async def stop(self) -> None:
        if self._closing is not None:
            self._closing.set()
        for bot in self._bots.values():
            bot._notify()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeTelegram:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def api_base(self) -> str:
        """Root URL, for clients that take an ``api_base`` (``TelegramChannel(api_base=...)``)."""
        return f"http://{self._server.host}:{self._server.port}"

    @property
    def base_url(self) -> str:
        """For ``telegram.Bot(base_url=...)``; the token is appended by the client."""
        return f"{self.api_base}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.api_base}/file/bot"

    # ------------------------------------------------------------------ test helpers
    @property
    def confirmed_offset(self) -> int | None:
        """The highest ``offset`` a getUpdates call has confirmed (None before any)."""
        return self._confirmed_offset

    @property
    def pending_updates(self) -> list[dict]:
        """Updates injected but not yet confirmed by an offset."""
        return list(self._updates)

    def inject_raw_update(self, update: dict) -> int:
        """Queue an update dict as is (assigning ``update_id`` if it has none); returns its id."""
        update = dict(update)
        if "update_id" not in update:
            update["update_id"] = next(self._update_ids)
        self._updates.append(update)
        self._notify()
        return update["update_id"]

    def inject_message(
        self,
        chat_id: int,
        text: str = "",
        *,
        from_id: int | None = None,
        username: str | None = None,
        first_name: str = "User",
        last_name: str | None = None,
        is_bot: bool = False,
        chat_type: str = "private",
        title: str | None = None,
        reply_to_message: dict | int | None = None,
        entities: list[dict] | None = None,
        message_thread_id: int | None = None,
        is_topic_message: bool | None = None,
        photo: bytes | None = None,
        document: bytes | None = None,
        document_name: str = "file.bin",
        mime_type: str | None = None,
        video: bytes | None = None,
        audio: bytes | None = None,
        voice: bytes | None = None,
        caption: str | None = None,
        date: int | None = None,
        edited: bool = False,
        file_size: Any = _REAL_SIZE,
        media_group_id: str | None = None,
        sticker: bytes | None = None,
        duration: int = 1,
        photo_size: tuple[int, int] = (1280, 960),
    ) -> int:
        """Queue a user message as an update; returns the update id.

        ``reply_to_message`` is a message dict or the id of a message already known in the chat
        (e.g. one the bot sent: ``fake.sent[0].message_id``).  With any media, ``text`` becomes
        the caption (or pass ``caption=``).  ``entities`` use Bot API shape
        (``{"type": "mention", "offset": 0, "length": 10}``).  ``edited=True`` delivers it as
        ``edited_message``.  ``file_size`` makes the media (all of it) claim that size (``None``:
        no ``file_size`` field), for testing clients that must not trust it.
        ``media_group_id`` makes the message part of an album (see ``inject_album``);
        ``sticker`` sends a still WebP sticker; ``duration`` is the voice/audio length the
        message claims; ``photo_size`` the (width, height) the largest photo size claims.
        """
        from_id = chat_id if from_id is None else from_id
        chat = self._chat(
            chat_id,
            chat_type,
            title,
            username if chat_type == "private" else None,
            first_name if chat_type == "private" else None,
        )
        user: dict[str, Any] = {"id": from_id, "is_bot": is_bot, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "from": user,
            "chat": chat,
            "date": int(time.time()) if date is None else date,
        }
        if message_thread_id is not None:
            msg["message_thread_id"] = message_thread_id
        if is_topic_message is not None:
            msg["is_topic_message"] = is_topic_message
        if reply_to_message is not None:
            if isinstance(reply_to_message, int):
                known = self.messages.get((chat_id, reply_to_message))
                reply_to_message = (
                    dict(known)
                    if known
                    else {"message_id": reply_to_message, "chat": chat, "date": msg["date"]}
                )
            msg["reply_to_message"] = {
                k: v for k, v in reply_to_message.items() if k != "reply_to_message"
            }
        has_media = any(x is not None for x in (photo, document, video, audio, voice, sticker))
        if media_group_id is not None:
            msg["media_group_id"] = media_group_id
        if sticker is not None:
            info = self.add_file(
                f"sticker-{next(self._file_seq)}", sticker, None, ".webp", declared_size=file_size
            )
            msg["sticker"] = {
                **info,
                "width": 512,
                "height": 512,
                "is_animated": False,
                "is_video": False,
                "type": "regular",
            }
        if photo is not None:
            small = self.add_file(
                f"photo-small-{next(self._file_seq)}", photo[:64], "photos/small.jpg"
            )
            big = self.add_file(
                f"photo-{next(self._file_seq)}", photo, None, declared_size=file_size
            )
            msg["photo"] = [
                {**small, "width": 90, "height": 90},
                {**big, "width": photo_size[0], "height": photo_size[1]},
            ]
        if document is not None:
            seq = next(self._file_seq)  # Telegram's own path, never the sender's file name
            info = self.add_file(
                f"doc-{seq}",
                document,
                f"documents/file_{seq}{Path(document_name).suffix}",
                declared_size=file_size,
            )
            msg["document"] = {
                **info,
                "file_name": document_name,
                "mime_type": mime_type or "application/octet-stream",
            }
        if video is not None:
            info = self.add_file(
                f"video-{next(self._file_seq)}", video, None, ".mp4", declared_size=file_size
            )
            msg["video"] = {
                **info,
                "width": 640,
                "height": 480,
                "duration": 1,
                "mime_type": "video/mp4",
            }
        if audio is not None:
            info = self.add_file(
                f"audio-{next(self._file_seq)}", audio, None, ".mp3", declared_size=file_size
            )
            msg["audio"] = {**info, "duration": duration, "mime_type": mime_type or "audio/mpeg"}
        if voice is not None:
            info = self.add_file(
                f"voice-{next(self._file_seq)}", voice, None, ".oga", declared_size=file_size
            )
            msg["voice"] = {**info, "duration": duration, "mime_type": "audio/ogg"}
        body = caption if caption is not None else text
        if has_media:
            if body:
                msg["caption"] = body
                if entities:
                    msg["caption_entities"] = entities
        else:
            msg["text"] = body
            if entities:
                msg["entities"] = entities
        self.messages[(chat_id, msg["message_id"])] = msg
        return self.inject_raw_update({"edited_message" if edited else "message": msg})

    def inject_album(
        self,
        chat_id: int,
        photos: list[bytes],
        caption: str = "",
        *,
        media_group_id: str = "album-1",
        **kw: Any,
    ) -> list[int]:
        """An album: one update per photo sharing ``media_group_id``, the caption on the
        first (as Telegram sends it).  Returns the update ids."""
        return [
            self.inject_message(
                chat_id,
                caption if i == 0 else "",
                photo=data,
                media_group_id=media_group_id,
                **kw,
            )
            for i, data in enumerate(photos)
        ]

    def add_file(
        self,
        file_id: str,
        data: bytes,
        file_path: str | None = None,
        ext: str = ".jpg",
        *,
        declared_size: Any = _REAL_SIZE,
    ) -> dict:
        """Make ``file_id`` downloadable through getFile; returns the Bot API File fields.
        ``declared_size`` overrides the ``file_size`` it reports (``None``: left out)."""
        path = file_path or f"files/{file_id}{ext}"
        self._files[file_id] = (bytes(data), path)
        self._declared[file_id] = len(data) if declared_size is _REAL_SIZE else declared_size
        return self._file_fields(file_id)

    def _file_fields(self, file_id: str) -> dict:
        info: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u-{file_id}"}
        size = self._declared.get(file_id, len(self._files[file_id][0]))
        if size is not None:
            info["file_size"] = size
        return info

    def fail_next(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: int | None = None,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``status``.

        429 defaults to ``retry_after=1``; 400 defaults to "Bad Request".  Failures queue up
        per method (case-insensitive) and each call consumes one.
        """
        params = None
        if status == 429:
            retry_after = 1 if retry_after is None else retry_after
            description = description or f"Too Many Requests: retry after {retry_after}"
        if retry_after is not None:
            params = {"retry_after": retry_after}
        if description is None:
            description = {
                400: "Bad Request",
                401: "Unauthorized",
                403: "Forbidden: bot was blocked by the user",
                409: "Conflict",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(status, "Error")
        for _ in range(times):
            self._failures.setdefault(method.lower(), []).append(
                _ApiError(status, description, params)
            )

    def clear_failures(self, method: str | None = None) -> None:
        """Drop the queued failures (of ``method``, or all): the end of an outage."""
        if method is None:
            self._failures.clear()
            self._chat_failures.clear()
        else:
            self._failures.pop(method.lower(), None)

    def fail_chat(
        self, chat_id: int | str, status: int = 502, *, description: str = "", times: int = 1
    ) -> None:
        """The next ``times`` sendMessage calls to ``chat_id`` (only) fail with ``status``."""
        desc = description or {403: "Forbidden: bot was blocked by the user"}.get(
            status, "Bad Gateway"
        )
        self._chat_failures.setdefault(str(chat_id), []).extend(
            _ApiError(status, desc) for _ in range(times)
        )

    def hold_sends(self, predicate: Callable[[dict], bool]) -> None:
        """Hold the sendMessage calls matching ``predicate`` (unrecorded) until refuse_held()."""
        self._hold = predicate
        self._held.clear()

    def refuse_held(self) -> None:
        """Refuse (502) the held sendMessage calls and hold no more."""
        self._hold = None
        self._held.set()

    def stall_next_poll(self, seconds: float) -> None:
        """The next getUpdates hangs ``seconds`` without answering (then answers ``[]``)."""
        self._stalls.append(seconds)

    def calls_of(self, method: str) -> list[dict]:
        """Params of every call to ``method`` (case-insensitive)."""
        return [p for m, p in self.calls if m.lower() == method.lower()]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every API event); returns it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"FakeTelegram.wait_for timed out after {timeout}s")
            assert self._changed is not None, "FakeTelegram not started"
            event = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(remaining, 0.25))

    async def wait_for_sent(self, n: int = 1, timeout: float = 5.0) -> list[SentMessage]:
        """Wait until at least ``n`` messages were sent; returns ``sent``."""
        await self.wait_for(lambda: len(self.sent) >= n, timeout)
        return self.sent

    async def wait_for_call(self, method: str, n: int = 1, timeout: float = 5.0) -> list[dict]:
        """Wait until ``method`` was called at least ``n`` times; returns their params."""
        await self.wait_for(lambda: len(self.calls_of(method)) >= n, timeout)
        return self.calls_of(method)

    async def wait_for_offset(self, offset: int, timeout: float = 5.0) -> None:
        """Wait until a getUpdates confirmed at least ``offset``."""
        await self.wait_for(lambda: (self._confirmed_offset or 0) >= offset, timeout)

    # ------------------------------------------------------------------ internals
    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    def _bot_user(self) -> dict:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": self.bot_first_name,
            "username": self.bot_username,
        }

    def _chat(
        self,
        chat_id: int | str,
        chat_type: str | None = None,
        title: str | None = None,
        username: str | None = None,
        first_name: str | None = None,
    ) -> dict:
        chat = self._chats.get(chat_id)
        if chat is None or chat_type is not None:
            if chat_type is None:
                chat_type = "supergroup" if isinstance(chat_id, int) and chat_id < 0 else "private"
            chat = {"id": chat_id, "type": chat_type}
            if chat_type == "private":
                if first_name:
                    chat["first_name"] = first_name
                if username:
                    chat["username"] = username
            else:
                chat["title"] = title or f"Group {chat_id}"
            self._chats[chat_id] = chat
        return dict(chat)

    def _next_message_id(self, chat_id: int | str) -> int:
        self._msg_ids[chat_id] = self._msg_ids.get(chat_id, 0) + 1
        return self._msg_ids[chat_id]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["tail"]
        if request.method == "GET" and path.startswith("file/bot"):
            return await self._download(request, path[len("file/bot") :])
        if not path.startswith("bot") or "/" not in path:
            return self._error(_ApiError(404, "Not Found"))
        token, method = path[3:].split("/", 1)
        bot = self._bots.get(token)
        if bot is None:
            return self._error(_ApiError(401, "Unauthorized"))
        return await bot._answer(request, method)

    async def _answer(self, request: web.Request, method: str) -> web.StreamResponse:
        """One Bot API call to this bot (its token already checked by the server)."""
        try:
            params = await self._params(request)
        except Exception as exc:
            return self._error(_ApiError(400, f"Bad Request: can't parse request: {exc}"))
        self.calls.append((method, params))
        self._notify()
        key = method.lower()
        handler = getattr(self, f"_m_{key}", None)
        if handler is None and key in _MEDIA_METHODS:
            handler = self._send_media
        if handler is None:
            return self._error(_ApiError(404, "Not Found"))
        failures = self._failures.get(key)
        if failures:
            return self._error(failures.pop(0))
        per_chat = self._chat_failures.get(str(params.get("chat_id")))
        if per_chat and key == "sendmessage":
            return self._error(per_chat.pop(0))
        if key == "sendmessage" and self._hold is not None and self._hold(params):
            await self._held.wait()  # never recorded: the user does not get it
            return self._error(_ApiError(502, "Bad Gateway"))
        if self.edit_delays and key == "editmessagetext":
            await asyncio.sleep(self.edit_delays.pop(0))
        try:
            result = await handler(key, params)
        except _ApiError as exc:
            return self._error(exc)
        self._notify()
        if self.send_delay and key == "sendmessage":
            # the message exists (the user sees it) before the answer reaches the bot
            await asyncio.sleep(self.send_delay)
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(exc: _ApiError) -> web.Response:
        body: dict[str, Any] = {
            "ok": False,
            "error_code": exc.status,
            "description": exc.description,
        }
        if exc.parameters:
            body["parameters"] = exc.parameters
        return web.json_response(body, status=exc.status)

    async def _params(self, request: web.Request) -> dict:
        raw: dict[str, Any] = dict(request.query)
        ctype = request.content_type
        if request.body_exists:
            if ctype == "application/json":
                data = await request.json()
                if isinstance(data, dict):
                    raw.update(data)
            else:
                form = await request.post()
                for k, v in form.items():
                    if isinstance(v, web.FileField):
                        raw[k] = Upload(v.filename or k, v.file.read(), v.content_type or "")
                    else:
                        raw[k] = v
        out = {k: self._coerce(k, v) for k, v in raw.items()}
        # resolve attach://name references to the uploaded part
        for k, v in list(out.items()):
            if (
                isinstance(v, str)
                and v.startswith("attach://")
                and isinstance(raw.get(v[9:]), Upload)
            ):
                out[k] = raw[v[9:]]
        return out

    @staticmethod
    def _coerce(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if key in _INT_FIELDS and re.fullmatch(r"-?\d+", value):
            return int(value)
        if key in _BOOL_FIELDS and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if key in _JSON_FIELDS:
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    async def _download(self, request: web.Request, rest: str) -> web.StreamResponse:
        token, _, file_path = rest.partition("/")
        bot = self._bots.get(token)
        if bot is None:
            return self._error(_ApiError(401, "Unauthorized"))
        for data, path in bot._files.values():
            if path == file_path:
                bot.downloads.append(file_path)
                if not bot.chunked_downloads:
                    return web.Response(body=data, content_type="application/octet-stream")
                resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
                resp.enable_chunked_encoding()
                await resp.prepare(request)
                for i in range(0, len(data), 16 * 1024):
                    try:
                        await resp.write(data[i : i + 16 * 1024])
                    except (ConnectionError, RuntimeError):
                        return resp  # the client hung up (e.g. at its size cap)
                await resp.write_eof()
                return resp
        return self._error(_ApiError(404, "Not Found"))

    def _check_text(self, text: Any, parse_mode: Any, *, caption: bool = False) -> str:
        text = "" if text is None else str(text)
        visible = text
        if parse_mode and str(parse_mode).upper() == "HTML":
            if self.validate_html:
                _check_html(text)
            visible = _strip_html(text)
        limit = 1024 if caption else 4096
        if not caption and not visible.strip():
            raise _ApiError(400, "Bad Request: message text is empty")
        if _utf16_len(visible) > limit:
            raise _ApiError(
                400,
                "Bad Request: message caption is too long"
                if caption
                else "Bad Request: message is too long",
            )
        return visible

    def _reply_to(self, chat_id: int | str, params: dict) -> tuple[int | None, dict | None]:
        rp = params.get("reply_parameters")
        if isinstance(rp, dict):
            mid, allow = rp.get("message_id"), bool(rp.get("allow_sending_without_reply"))
        else:
            mid, allow = (
                params.get("reply_to_message_id"),
                bool(params.get("allow_sending_without_reply")),
            )
        if mid is None:
            return None, None
        target = self.messages.get((chat_id, int(mid)))
        if target is None and not allow:
            raise _ApiError(400, "Bad Request: message to be replied not found")
        return int(mid), target

    def _new_message(self, chat_id: int | str, params: dict) -> tuple[dict, int | None]:
        if chat_id is None or chat_id == "":
            raise _ApiError(400, "Bad Request: chat_id is empty")
        reply_id, target = self._reply_to(chat_id, params)
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "from": self._bot_user(),
            "chat": self._chat(chat_id),
            "date": int(time.time()),
        }
        thread = params.get("message_thread_id")
        if thread is not None:
            msg["message_thread_id"] = thread
            msg["is_topic_message"] = True
        if target is not None:
            msg["reply_to_message"] = {k: v for k, v in target.items() if k != "reply_to_message"}
        return msg, reply_id

    def _record(
        self, method: str, kind: str, msg: dict, params: dict, reply_id: int | None, **extra: Any
    ) -> None:
        rp = params.get("reply_parameters")
        sent = SentMessage(
            method=method,
            kind=kind,
            chat_id=msg["chat"]["id"],
            message_id=msg["message_id"],
            parse_mode=params.get("parse_mode"),
            reply_to_message_id=reply_id,
            reply_parameters=rp if isinstance(rp, dict) else None,
            message_thread_id=params.get("message_thread_id"),
            params=params,
            **extra,
        )
        self.sent.append(sent)
        self._sent_by_key[(sent.chat_id, sent.message_id)] = sent
        self.messages[(sent.chat_id, sent.message_id)] = msg

    # ------------------------------------------------------------------ API methods
    async def _m_getme(self, method: str, params: dict) -> dict:
        return {
            **self._bot_user(),
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_deletewebhook(self, method: str, params: dict) -> bool:
        self.webhook_deleted += 1
        if params.get("drop_pending_updates"):
            self._updates.clear()
        return True

    async def _m_setwebhook(self, method: str, params: dict) -> bool:
        return True

    async def _m_setmycommands(self, method: str, params: dict) -> bool:
        commands = params.get("commands")
        if isinstance(commands, str):
            commands = json.loads(commands)
        if not isinstance(commands, list) or not all(
            isinstance(c, dict)
            and re.fullmatch(r"[a-z0-9_]{1,32}", str(c.get("command", "")))
            and 1 <= len(str(c.get("description", ""))) <= 256
            for c in commands
        ):
            raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.commands = commands
        return True

    async def _m_getupdates(self, method: str, params: dict) -> list:
        assert self._closing is not None
        if self._stalls:
            seconds = self._stalls.pop(0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), seconds)
            return []
        self._poll_seq += 1
        me = self._poll_seq
        offset = params.get("offset")
        if isinstance(offset, int) and offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            if self._confirmed_offset is None or offset > self._confirmed_offset:
                self._confirmed_offset = offset
            self._notify()
        limit = params.get("limit") or 100
        limit = max(1, min(int(limit), 100))
        timeout = float(params.get("timeout") or 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, 50.0)
        while not self._updates and not self._closing.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            assert self._changed is not None
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                break
            if self._poll_seq != me:
                raise _ApiError(
                    409,
                    "Conflict: terminated by other getUpdates request; "
                    "make sure that only one bot instance is running",
                )
        # allowed_updates is recorded in .calls but not enforced: tests inject what they want.
        return self._updates[:limit]

    async def _m_sendmessage(self, method: str, params: dict) -> dict:
        visible = self._check_text(params.get("text"), params.get("parse_mode"))
        msg, reply_id = self._new_message(params.get("chat_id"), params)
        msg["text"] = visible
        self._record("sendMessage", "text", msg, params, reply_id, text=params.get("text"))
        return msg

    async def _m_editmessagetext(self, method: str, params: dict) -> dict:
        visible = self._check_text(params.get("text"), params.get("parse_mode"))
        key = (params.get("chat_id"), params.get("message_id"))
        msg = self.messages.get(key)  # type: ignore[arg-type]
        if msg is None or msg.get("from", {}).get("id") != self.bot_id:
            raise _ApiError(400, "Bad Request: message to edit not found")
        if msg.get("text") == visible:
            raise _ApiError(400, "Bad Request: message is not modified")
        msg["text"] = visible
        msg["edit_date"] = int(time.time())
        sent = self._sent_by_key.get(key)  # type: ignore[arg-type]
        if sent is not None:
            sent.edits.append(params.get("text"))
        return msg

    async def _m_deletemessage(self, method: str, params: dict) -> bool:
        if self.messages.pop((params.get("chat_id"), params.get("message_id")), None) is None:  # type: ignore[arg-type]
            raise _ApiError(400, "Bad Request: message to delete not found")
        return True

    async def _m_sendchataction(self, method: str, params: dict) -> bool:
        self.chat_actions.append(
            (params.get("chat_id"), params.get("action"), params.get("message_thread_id"))
        )
        return True

    async def _m_setmessagereaction(self, method: str, params: dict) -> bool:
        key = (params.get("chat_id"), params.get("message_id"))
        if key not in self.messages:
            raise _ApiError(400, "Bad Request: message to react not found")
        self.reactions.append((key[0], key[1], params.get("reaction") or []))  # type: ignore[arg-type]
        return True

    async def _m_answercallbackquery(self, method: str, params: dict) -> bool:
        return True

    async def _m_getfile(self, method: str, params: dict) -> dict:
        file_id = params.get("file_id")
        if file_id not in self._files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        return {**self._file_fields(file_id), "file_path": self._files[file_id][1]}

    async def _send_media(self, method: str, params: dict) -> dict:
        field_name, kind = _MEDIA_METHODS[method]
        value = params.get(field_name)
        extra: dict[str, Any] = {}
        if isinstance(value, Upload):
            file_id = f"{kind}-sent-{next(self._file_seq)}"
            self.add_file(file_id, value.data, f"{kind}s/{value.filename}")
            extra.update(filename=value.filename, data=value.data, file_id=file_id)
            data, mime = value.data, value.content_type or _DEFAULT_MIME[kind]
        elif isinstance(value, str) and value.startswith(("http://", "https://")):
            if self.reject_urls:
                raise _ApiError(400, "Bad Request: wrong file identifier/HTTP URL specified")
            file_id = f"{kind}-url-{next(self._file_seq)}"
            extra.update(url=value, file_id=file_id)
            data, mime = b"", _DEFAULT_MIME[kind]
        elif isinstance(value, str) and value in self._files:
            file_id = value
            data = self._files[value][0]
            extra.update(data=data, file_id=file_id)
            mime = _DEFAULT_MIME[kind]
        elif not value:
            raise _ApiError(400, f"Bad Request: there is no {field_name} in the request")
        else:
            raise _ApiError(
                400,
                "Bad Request: wrong remote file identifier specified: Wrong character in the string",
            )
        caption = params.get("caption")
        if caption:
            visible = self._check_text(caption, params.get("parse_mode"), caption=True)
        msg, reply_id = self._new_message(params.get("chat_id"), params)
        info = {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(data)}
        if kind == "photo":
            msg["photo"] = [{**info, "width": 800, "height": 600}]
        elif kind == "document":
            msg["document"] = {
                **info,
                "file_name": extra.get("filename") or "file",
                "mime_type": mime,
            }
        elif kind in ("video", "animation"):
            msg[kind] = {**info, "width": 640, "height": 480, "duration": 1, "mime_type": mime}
        else:
            msg[kind] = {**info, "duration": 1, "mime_type": mime}
        if caption:
            msg["caption"] = visible
        method_name = "send" + field_name[0].upper() + field_name[1:]
        self._record(method_name, kind, msg, params, reply_id, caption=caption, **extra)
        return msg
