"""Telegram adapter (python-telegram-bot 22, own long-poll loop).

Translation only: Telegram updates become ``InboundMessage`` values handed to the core's sink,
``OutboundMessage`` values become Bot API calls.  We use PTB's ``Bot`` (typed API, request
objects, errors) but not its ``Application``/``Updater``: our own poll loop advances the update
offset only after the sink has persisted a message (SPEC §4.5), skips updates it cannot parse
one at a time, restarts a stalled long poll, and backs off on network errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import mimetypes
import re
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from telegram import Bot, BotCommand, InputFile, Message, ReactionTypeEmoji, ReplyParameters, Update
from telegram.constants import ChatAction, MessageEntityType
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from channels.redact import RedactSecrets
from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaKind,
    MediaTooLarge,
    OutboundMessage,
    wait_task_end,
)
from channels.telegram_request import AiohttpRequest
from channels.util import capped_file
import contextlib

log = logging.getLogger("chela.channels.telegram")

# getUpdates goes through PTB's public raw call, Bot.do_api_request, so that one malformed update
# cannot fail Update.de_list for the whole batch (each update is parsed on its own).  PTB warns
# that Bot.get_updates exists; that is the parsing we avoid on purpose.
warnings.filterwarnings(
    "ignore", message=r"Please use 'Bot\.getUpdates' instead", module=r"channels\.telegram"
)

_MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # Bot API limit for uploads
_HARD_TEXT_LIMIT = 4096
_MEDIA_LABEL = {
    "image": "Image",
    "document": "Document",
    "video": "Video",
    "audio": "Audio",
    "voice": "Voice",
}


class _Stopped(Exception):
    """Internal: the channel is stopping."""


class _Stalled(Exception):
    """Internal: a getUpdates call exceeded the stall timeout."""


# PTB logs its API URLs, which contain the bot token, at DEBUG on this logger.
_PTB_LOGGER = "telegram.Bot"


def _retry_seconds(exc: RetryAfter) -> float:
    value = getattr(
        exc, "_retry_after", None
    )  # timedelta in PTB ≥ 22.2, avoids the deprecation warning
    if value is None:
        value = exc.retry_after
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return max(0.0, seconds)


def _to_chat_id(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except (TypeError, ValueError):
        return chat_id  # "@channelusername"


def _to_int(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _safe_name(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")
    return name[:80] or "file"


def _safe_suffix(*candidates: str | None) -> str:
    """The first candidate that is a plain short extension (".jpg"), else ""."""
    for suffix in candidates:
        if suffix and re.fullmatch(r"\.[A-Za-z0-9]{1,10}", suffix):
            return suffix
    return ""


class TelegramChannel(Channel):
    """Telegram Bot API channel.

    ``api_base`` points at the Bot API server (``https://api.telegram.org``, a self-hosted
    server, or ``FakeTelegram.api_base`` in tests).  Inbound media is not downloaded at
    intake: attachments carry their ``file_id`` as ``ref`` and the core calls
    ``fetch_media`` once the sender is admitted (SPEC §9.4).  ``media_dir`` is accepted
    for symmetry with the other adapters and unused.  A getUpdates taking longer than
    ``stall_timeout`` (default ``poll_timeout + 15``) is cancelled and restarted.
    """

    name = "telegram"
    capabilities = Capabilities(
        reactions=True,
        inline_buttons=True,
        media=True,
        threads=True,
        typing=True,
        max_text=4000,
        edit=True,
    )

    def __init__(
        self,
        *,
        token: str,
        api_base: str = "https://api.telegram.org",
        account: str = "default",
        media_dir: Path | str | None = None,
        poll_timeout: int = 30,
        stall_timeout: float | None = None,
        chunk_limit: int = 4000,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        start_timeout: float = 30.0,
        send_retries: int = 3,
        max_retry_after: float = 120.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 30.0,
        allowed_updates: tuple[str, ...] = ("message",),
        commands: list[tuple[str, str]] | None = None,
        album_wait: float = 1.0,
    ) -> None:
        if not token:
            raise ValueError("telegram: a bot token is required")
        self.token = token
        self.api_base = api_base.rstrip("/")
        self.account = account
        self.media_dir = (
            Path(media_dir) if media_dir else Path(tempfile.gettempdir()) / "chela-telegram-media"
        )
        self.poll_timeout = int(poll_timeout)
        self.stall_timeout = (
            float(stall_timeout) if stall_timeout is not None else self.poll_timeout + 15.0
        )
        if self.stall_timeout <= self.poll_timeout:
            log.warning(
                "telegram: stall_timeout %.1fs <= poll_timeout %ss; idle polls will be treated as stalls",
                self.stall_timeout,
                self.poll_timeout,
            )
        self.chunk_limit = min(int(chunk_limit), _HARD_TEXT_LIMIT)
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.start_timeout = start_timeout
        self.send_retries = max(1, send_retries)
        self.max_retry_after = max_retry_after
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.allowed_updates = list(allowed_updates)
        self.commands = list(commands or [])  # (name, description) for the chat's command menu
        self.capabilities = dataclasses.replace(type(self).capabilities, max_text=self.chunk_limit)

        self._bot: Bot | None = None
        self._requests: list[AiohttpRequest] = []
        self._sink: InboundSink | None = None
        self._task: asyncio.Task | None = None
        self._stopping: asyncio.Event | None = None
        self._offset: int | None = None  # next offset to confirm (last handled update_id + 1)
        self._confirmed: int | None = None  # offset the server has last been told
        self._identity: dict = {}
        self._redactor = RedactSecrets([token])
        # an album being collected: (chat:media_group_id, {update_id: message})
        self._album: tuple[str, dict[int, InboundMessage]] | None = None
        self._album_grew = False
        self.album_wait = album_wait

    # ------------------------------------------------------------------ lifecycle
    @property
    def bot_identity(self) -> dict:
        """``{"id": "<bot user id>", "username": "<bot username>"}`` after start."""
        return dict(self._identity)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def _make_bot(self) -> Bot:
        general = AiohttpRequest(
            connection_pool_size=8,
            read_timeout=self.request_timeout,
            write_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            pool_timeout=self.request_timeout,
        )
        polling = AiohttpRequest(
            connection_pool_size=2,
            read_timeout=self.poll_timeout + 10.0,
            write_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            pool_timeout=self.request_timeout,
        )
        self._requests = [general, polling]
        return Bot(
            self.token,
            base_url=f"{self.api_base}/bot",
            base_file_url=f"{self.api_base}/file/bot",
            request=general,
            get_updates_request=polling,
        )

    async def start(self, sink: InboundSink) -> None:
        if self.running:
            return
        self._sink = sink
        await self._connect(receive=True)
        self._offset = None
        self._confirmed = None
        self._album, self._album_grew = None, False
        self._task = asyncio.create_task(self._poll_loop(), name=f"telegram-poll-{self.account}")

    async def open_for_sending(self) -> None:
        if self._bot is None:
            await self._connect(receive=False)

    async def _connect(self, *, receive: bool) -> None:
        """getMe (and, to receive, deleteWebhook); errors become ChannelError."""
        self._stopping = asyncio.Event()
        logging.getLogger(_PTB_LOGGER).addFilter(self._redactor)  # before Bot() logs its URL
        bot = self._make_bot()
        try:
            await asyncio.wait_for(bot.initialize(), self.start_timeout)
            if receive:
                await asyncio.wait_for(bot.delete_webhook(), self.start_timeout)
                await self._publish_commands(bot)
        except BaseException as exc:
            await self._close_requests(bot)
            logging.getLogger(_PTB_LOGGER).removeFilter(self._redactor)
            if isinstance(exc, InvalidToken):
                raise ChannelError(
                    "telegram: the bot token was rejected (401 Unauthorized)"
                ) from None
            if isinstance(exc, (asyncio.TimeoutError, TimedOut)):
                raise ChannelError(
                    f"telegram: no answer from {self.api_base} within {self.start_timeout:.0f}s"
                ) from None
            if isinstance(exc, NetworkError):
                raise ChannelError(f"telegram: cannot reach {self.api_base}: {exc}") from None
            if isinstance(exc, TelegramError):
                raise ChannelError(f"telegram: start failed: {exc}") from None
            if isinstance(exc, Exception):
                raise ChannelError(f"telegram: start failed: {exc!r}") from exc
            raise
        self._bot = bot
        self._identity = {"id": str(bot.id), "username": bot.username or ""}
        log.info(
            "telegram[%s]: connected as @%s (id %s)%s",
            self.account,
            bot.username,
            bot.id,
            "" if receive else ", for sending only",
        )

    async def _publish_commands(self, bot: Bot) -> None:
        """setMyCommands, so the commands show in the client's menu; a failure only costs the menu."""
        if not self.commands:
            return
        try:
            await asyncio.wait_for(
                bot.set_my_commands([BotCommand(n, d[:256]) for n, d in self.commands]),
                self.start_timeout,
            )
        except (TimeoutError, TelegramError) as exc:
            log.warning("telegram[%s]: could not set the command menu: %s", self.account, exc)

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                # the loop notices the stop event; an in-flight sink call may finish (bounded)
                await asyncio.wait_for(asyncio.shield(task), 10.0)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            except Exception:
                log.exception("telegram: poll loop ended with an error")
        bot, self._bot = self._bot, None
        if bot is not None:
            await self._confirm_offset(bot)
            try:
                await bot.shutdown()
            except Exception:
                log.debug("telegram: shutdown error", exc_info=True)
            await self._close_requests(bot)
        logging.getLogger(_PTB_LOGGER).removeFilter(self._redactor)

    async def wait_closed(self) -> BaseException | None:
        return await wait_task_end(self._task)

    async def _close_requests(self, bot: Bot) -> None:
        for request in self._requests:
            with contextlib.suppress(Exception):
                await request.shutdown()

    async def _confirm_offset(self, bot: Bot) -> None:
        """Tell the server about updates handled since the last poll, so a restart won't replay them."""
        if self._offset is None or self._offset == self._confirmed:
            return
        try:
            await asyncio.wait_for(
                bot.do_api_request(
                    "getUpdates",
                    {"offset": self._offset, "timeout": 0, "limit": 1},
                    read_timeout=5.0,
                ),
                5.0,
            )
            self._confirmed = self._offset
        except Exception:
            log.debug("telegram: could not confirm offset on stop", exc_info=True)

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake up (raising _Stopped) as soon as the channel stops."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), max(0.0, seconds))
        except TimeoutError:
            return
        raise _Stopped

    # ------------------------------------------------------------------ polling
    async def _fetch(self) -> list:
        """One getUpdates call, raw JSON (so one bad update cannot poison the batch)."""
        assert self._bot is not None and self._stopping is not None
        data: dict[str, Any] = {
            "timeout": self.poll_timeout,
            "allowed_updates": self.allowed_updates,
        }
        if self._offset is not None:
            data["offset"] = self._offset
        offset_sent = self._offset
        # the raw call (PTB's defaults, errors and request object) without Update.de_list
        fetch = asyncio.ensure_future(
            self._bot.do_api_request("getUpdates", data, read_timeout=self.poll_timeout + 10.0)
        )
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {fetch, stop}, timeout=self.stall_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
        if fetch not in done:
            fetch.cancel()
            await asyncio.gather(fetch, return_exceptions=True)
            if self._stopping.is_set():
                raise _Stopped
            raise _Stalled
        result = fetch.result()
        if offset_sent is not None:
            self._confirmed = offset_sent
        return result if isinstance(result, list) else []

    async def _poll_loop(self) -> None:
        delay = self.backoff_initial
        try:
            while not self._stopping.is_set():  # type: ignore[union-attr]
                try:
                    updates = await self._fetch()
                except _Stalled:
                    log.warning(
                        "telegram[%s]: getUpdates stalled for %.0fs; restarting the poll",
                        self.account,
                        self.stall_timeout,
                    )
                    continue
                except RetryAfter as exc:
                    log.warning(
                        "telegram[%s]: getUpdates rate limited; waiting %.0fs",
                        self.account,
                        _retry_seconds(exc),
                    )
                    await self._sleep(_retry_seconds(exc))
                    continue
                except (InvalidToken, Conflict, NetworkError, TelegramError) as exc:
                    log.warning(
                        "telegram[%s]: getUpdates failed (%s: %s); retrying in %.1fs",
                        self.account,
                        type(exc).__name__,
                        exc,
                        delay,
                    )
                    await self._sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                    continue
                except _Stopped:
                    raise
                except Exception:
                    log.exception(
                        "telegram[%s]: unexpected getUpdates error; retrying in %.1fs",
                        self.account,
                        delay,
                    )
                    await self._sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                    continue
                delay = self.backoff_initial
                for raw in updates:
                    await self._handle_raw(raw)
                    if self._stopping.is_set():  # type: ignore[union-attr]
                        break
                if self._album is not None:
                    if self._album_grew:
                        # an album's parts may still be coming: poll again shortly (its
                        # updates are not confirmed yet, so the server answers at once
                        # with them and anything new)
                        self._album_grew = False
                        await self._sleep(self.album_wait)
                    else:
                        await self._flush_album()
        except _Stopped:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("telegram[%s]: poll loop crashed", self.account)

    async def _handle_raw(self, raw: Any) -> None:
        update_id = raw.get("update_id") if isinstance(raw, dict) else None
        if not isinstance(update_id, int):
            log.warning(
                "telegram[%s]: skipping an update without a valid update_id: %.200r",
                self.account,
                raw,
            )
            return
        if self._offset is not None and update_id < self._offset:
            return  # already handled (replayed batch)
        inbound: InboundMessage | None = None
        try:
            update = Update.de_json(raw, self._bot)
            if update is not None and update.message is not None:
                inbound = await self._translate(update.message, update_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "telegram[%s]: skipping update %s that could not be translated: %r",
                self.account,
                update_id,
                exc,
            )
            inbound = None
        group = (
            f"{inbound.chat_id}:{update.message.media_group_id}"  # type: ignore[union-attr]
            if inbound is not None and update.message.media_group_id  # type: ignore[union-attr]
            else None
        )
        if self._album is not None and (group is None or group != self._album[0]):
            await self._flush_album()  # the album ended: one turn, before anything after it
        if inbound is None:
            log.debug(
                "telegram[%s]: update %s has nothing to deliver; skipped", self.account, update_id
            )
            self._offset = update_id + 1
            return
        if group is not None:
            # an album arrives as one update per photo with the same media_group_id: they
            # are held (unconfirmed) and handed on as one message
            if self._album is None:
                self._album = (group, {})
            if update_id not in self._album[1]:
                self._album[1][update_id] = inbound
                self._album_grew = True
            return
        await self._deliver(inbound, update_id)

    async def _flush_album(self) -> None:
        """Hand the held album to the sink as one message (captions joined, attachments
        in order) and confirm all its updates."""
        if self._album is None:
            return
        parts = [m for _, m in sorted(self._album[1].items())]
        last = max(self._album[1])
        first = parts[0]
        merged = dataclasses.replace(
            first,
            text="\n".join(p.text for p in parts if p.text),
            attachments=[a for p in parts for a in p.attachments],
            mentioned=any(p.mentioned for p in parts),
        )
        await self._deliver(merged, last)
        self._album = None
        self._album_grew = False

    async def _deliver(self, inbound: InboundMessage, update_id: int) -> None:
        """The sink, retried until it persists the message; then the offset moves past it."""
        delay = self.backoff_initial
        while True:
            try:
                await self._sink(inbound)  # type: ignore[misc]
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "telegram[%s]: sink failed for update %s; retrying in %.1fs",
                    self.account,
                    update_id,
                    delay,
                )
                await self._sleep(delay)  # raises _Stopped on stop: offset not advanced
                delay = min(delay * 2, self.backoff_max)
        self._offset = update_id + 1

    # ------------------------------------------------------------------ translation
    def _is_mentioned(self, msg: Message, text: str) -> bool:
        username = (self._identity.get("username") or "").lower()
        bot_id = self._identity.get("id")
        if username and re.search(rf"(?<![\w@])@{re.escape(username)}(?!\w)", text, re.IGNORECASE):
            return True
        entities = msg.parse_entities() if msg.text is not None else msg.parse_caption_entities()
        for entity, value in entities.items():
            if (
                entity.type == MessageEntityType.TEXT_MENTION
                and entity.user
                and str(entity.user.id) == bot_id
            ):
                return True
            if (
                entity.type == MessageEntityType.MENTION
                and username
                and value.lower() == f"@{username}"
            ):
                return True
            if (
                entity.type == MessageEntityType.BOT_COMMAND
                and username
                and value.lower().endswith(f"@{username}")
            ):
                return True
        return False

    async def _translate(self, msg: Message, update_id: int) -> InboundMessage | None:
        text = msg.text if msg.text is not None else (msg.caption or "")
        chat = msg.chat
        sender = msg.from_user
        if msg.sender_chat is not None:
            # anonymous group admin or a linked channel: `from` is a placeholder bot
            # (GroupAnonymousBot / Channel_Bot), the real sender is the chat
            sender_id, sender_name = str(msg.sender_chat.id), msg.sender_chat.title or ""
            sender_username, sender_is_bot = msg.sender_chat.username or "", False
        elif sender is not None:
            sender_id, sender_name = str(sender.id), sender.full_name
            sender_username, sender_is_bot = sender.username or "", bool(sender.is_bot)
        else:
            sender_id, sender_name, sender_username, sender_is_bot = str(chat.id), "", "", False

        thread_id = (
            str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else None
        )
        reply = msg.reply_to_message
        if reply is not None and msg.is_topic_message and reply.forum_topic_created is not None:
            reply = None  # in a forum topic every message "replies" to the topic's first message
        reply_to_bot = bool(
            reply is not None
            and reply.from_user is not None
            and str(reply.from_user.id) == self._identity.get("id")
        )

        # Not downloaded here: the sender has not been admitted yet (SPEC §9.4).
        attachments = [
            MediaItem(
                kind=kind,
                target="",
                name=name,
                mime=mime or (mimetypes.guess_type(name)[0] or ""),
                ref=file_obj.file_id,
                size=int(file_obj.file_size or 0),
            )
            for kind, file_obj, name, mime in self._media_of(msg)
        ]
        if not text and not attachments:
            return None  # service messages, stickers, polls, …: nothing for the core

        return InboundMessage(
            channel="telegram",
            chat_id=str(chat.id),
            sender_id=sender_id,
            text=text,
            message_id=str(msg.message_id),
            chat_type="direct" if chat.type == "private" else "group",
            account=self.account,
            thread_id=thread_id,
            sender_name=sender_name,
            sender_username=sender_username,
            chat_title=chat.title or "",
            reply_to_id=str(reply.message_id) if reply is not None else None,
            reply_to_bot=reply_to_bot,
            mentioned=self._is_mentioned(msg, text),
            sender_is_bot=sender_is_bot,
            attachments=attachments,
            timestamp=msg.date.timestamp() if msg.date else 0.0,
            group_kind="group",
            raw_id=str(update_id),
        )

    @staticmethod
    def _media_of(msg: Message) -> list[tuple[MediaKind, Any, str, str]]:
        """(kind, file object, suggested name, mime) for each attachment of ``msg``."""
        out: list[tuple[MediaKind, Any, str, str]] = []
        mid = msg.message_id
        if msg.photo:
            largest = max(msg.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
            out.append(("image", largest, f"photo_{mid}.jpg", "image/jpeg"))
        if msg.animation is not None:
            anim = msg.animation
            out.append(
                (
                    "video",
                    anim,
                    anim.file_name or f"animation_{mid}.mp4",
                    anim.mime_type or "video/mp4",
                )
            )
        elif msg.document is not None:
            d = msg.document
            out.append(("document", d, d.file_name or f"document_{mid}", d.mime_type or ""))
        if msg.video is not None:
            v = msg.video
            out.append(("video", v, v.file_name or f"video_{mid}.mp4", v.mime_type or "video/mp4"))
        if msg.video_note is not None:
            out.append(("video", msg.video_note, f"video_note_{mid}.mp4", "video/mp4"))
        if msg.audio is not None:
            a = msg.audio
            out.append(("audio", a, a.file_name or f"audio_{mid}.mp3", a.mime_type or "audio/mpeg"))
        if msg.voice is not None:
            vn = msg.voice
            out.append(("voice", vn, f"voice_{mid}.ogg", vn.mime_type or "audio/ogg"))
        st = msg.sticker
        if st is not None and not st.is_animated and not st.is_video:
            out.append(("image", st, f"sticker_{mid}.webp", "image/webp"))  # a still sticker
        return out

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """getFile, then stream the file into ``dest_dir`` with the size cap.

        The declared sizes (from the update, then from getFile) are checked before any
        byte is fetched; the bytes actually received are counted as they arrive, so a
        wrong or missing ``file_size`` cannot get past the cap either."""
        if not item.ref:
            return item
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(
                f"telegram: {item.name or 'file'} is {item.size} bytes, over {max_bytes}"
            )
        bot = self._require_bot()
        try:
            tg_file = await asyncio.wait_for(bot.get_file(item.ref), self.request_timeout)
        except asyncio.CancelledError:
            raise
        except BadRequest as exc:
            if "too big" in str(exc).lower():  # over the Bot API's own download limit
                raise MediaTooLarge(f"telegram: {item.name or 'file'}: {exc}") from None
            raise ChannelError(
                f"telegram: getFile failed for {item.name or 'file'}: {exc}"
            ) from None
        except Exception as exc:
            raise ChannelError(
                f"telegram: getFile failed for {item.name or 'file'}: {exc!r}"
            ) from None
        if tg_file.file_size and tg_file.file_size > max_bytes:
            raise MediaTooLarge(
                f"telegram: {item.name or 'file'} is {tg_file.file_size} bytes, over {max_bytes}"
            )
        url = tg_file.file_path or ""
        if not url.startswith(("http://", "https://")):
            raise ChannelError(f"telegram: no download URL for {item.name or 'file'}")

        name = item.name or "file"
        suffix = _safe_suffix(
            Path(name).suffix,
            Path(urlsplit(url).path).suffix,
            mimetypes.guess_extension(item.mime) if item.mime else "",
        )
        stem = _safe_name(Path(name).stem)
        dest = Path(dest_dir).absolute() / f"tg_{uuid.uuid4().hex[:12]}_{stem}{suffix}"
        with capped_file(dest, max_bytes, f"telegram: downloading {name}") as out:
            await self._requests[0].download_capped(url, out, max_bytes, self.request_timeout * 4)
        return dataclasses.replace(item, target=str(dest))

    # ------------------------------------------------------------------ sending
    def _require_bot(self) -> Bot:
        if self._bot is None:
            raise ChannelError("telegram: channel is not started")
        return self._bot

    async def _call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run one API call, honouring 429 retry_after and retrying connection failures (bounded)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await fn()
            except RetryAfter as exc:
                wait = _retry_seconds(exc)
                if attempt >= self.send_retries or wait > self.max_retry_after:
                    raise
                log.info(
                    "telegram[%s]: %s rate limited; retrying in %.1fs", self.account, what, wait
                )
                await asyncio.sleep(wait)
            except TimedOut:
                raise  # may have been delivered: never risk a duplicate
            except (BadRequest, Forbidden, InvalidToken):
                raise
            except NetworkError as exc:
                if attempt >= self.send_retries:
                    raise
                wait = min(self.backoff_initial * (2 ** (attempt - 1)), self.backoff_max)
                log.info(
                    "telegram[%s]: %s failed (%s); retrying in %.1fs", self.account, what, exc, wait
                )
                await asyncio.sleep(wait)

    async def _send_text(
        self,
        chat_id: int | str,
        text: str,
        parse_mode: str | None,
        reply_to: int | None,
        thread_id: int | None,
    ) -> Message:
        bot = self._require_bot()
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to
            else None
        )
        return await self._call(
            "sendMessage",
            lambda: bot.send_message(
                chat_id=chat_id,
                text=text,
                parse_mode=parse_mode,
                reply_parameters=reply,
                message_thread_id=thread_id,
            ),
        )

    async def _send_plain(
        self, chat_id: int | str, text: str, reply_to: int | None, thread_id: int | None
    ) -> list[Message]:
        """Plain text, hard-split at the Telegram limit if needed."""
        out: list[Message] = []
        for i in range(0, len(text), self.chunk_limit):
            piece = text[i : i + self.chunk_limit]
            if piece.strip():
                out.append(
                    await self._send_text(
                        chat_id, piece, None, reply_to if not out else None, thread_id
                    )
                )
        return out

    async def _send_chunk(
        self, chat_id: int | str, chunk: str, reply_to: int | None, thread_id: int | None
    ) -> list[Message]:
        from channels.formatting import markdown_to_telegram_html

        try:
            rendered = markdown_to_telegram_html(chunk)
        except Exception:
            log.exception("telegram: Markdown rendering failed; sending plain text")
            rendered = ""
        if not rendered.strip():
            return await self._send_plain(chat_id, chunk, reply_to, thread_id)
        try:
            return [await self._send_text(chat_id, rendered, "HTML", reply_to, thread_id)]
        except BadRequest as exc:
            reason = str(exc).lower()
            if (
                "can't parse entities" in reason
                or "can't find end tag" in reason
                or "unsupported start tag" in reason
            ):
                log.info(
                    "telegram[%s]: HTML refused (%s); resending the chunk as plain text",
                    self.account,
                    exc,
                )
            elif "too long" in reason:
                log.info(
                    "telegram[%s]: rendered chunk too long; resending as plain text", self.account
                )
            else:
                raise
            return await self._send_plain(chat_id, chunk, reply_to, thread_id)

    async def send(self, msg: OutboundMessage) -> list[str]:
        from channels.chunking import chunk_markdown

        self._require_bot()
        chat_id = _to_chat_id(msg.chat_id)
        thread_id = _to_int(msg.thread_id)
        reply_to = _to_int(msg.reply_to_id)
        reply_all = msg.reply_mode == "all"
        ids: list[str] = []
        attempted = 0
        last_error: Exception | None = None

        def reply_for_next() -> int | None:
            if reply_to is None:
                return None
            return reply_to if (reply_all or not ids) else None

        text = msg.text or ""
        chunks = (
            [c for c in chunk_markdown(text, self.chunk_limit) if c.strip()] if text.strip() else []
        )
        preview = _to_int(msg.edit_id)  # a live preview the first chunk replaces (SPEC §12)
        for chunk in chunks:
            attempted += 1
            try:
                if preview is not None:
                    target, preview = preview, None
                    ids.extend(
                        await self._replace_preview(
                            chat_id, target, chunk, reply_for_next(), thread_id
                        )
                    )
                    continue
                sent = await self._send_chunk(chat_id, chunk, reply_for_next(), thread_id)
                ids.extend(str(m.message_id) for m in sent)
            except Exception as exc:
                last_error = exc
                log.warning(
                    "telegram[%s]: sending a text chunk to %s failed: %r",
                    self.account,
                    msg.chat_id,
                    exc,
                )
                if (
                    isinstance(exc, (Forbidden, InvalidToken))
                    or "chat not found" in str(exc).lower()
                ):
                    break

        for item in msg.media:
            if isinstance(last_error, (Forbidden, InvalidToken)):
                break
            attempted += 1
            try:
                sent_msg = await self._send_media(
                    chat_id, item, msg.audio_as_voice, reply_for_next(), thread_id
                )
                ids.append(str(sent_msg.message_id))
            except Exception as exc:
                last_error = exc
                log.warning(
                    "telegram[%s]: sending %s to %s failed: %r",
                    self.account,
                    item.kind,
                    msg.chat_id,
                    exc,
                )

        if attempted and not ids:
            raise ChannelError(
                f"telegram: nothing could be delivered to {msg.chat_id}: {last_error}"
            ) from last_error
        return ids

    # ------------------------------------------------------------------ live previews
    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        bot = self._require_bot()
        reply_to = _to_int(reply_to_id)
        # one plain call, no retries: a preview that cannot be shown now is skipped
        sent = await bot.send_message(
            chat_id=_to_chat_id(chat_id),
            text=text[: self.chunk_limit],
            reply_parameters=ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to
            else None,
            message_thread_id=_to_int(thread_id),
        )
        return str(sent.message_id)

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        await self._edit_text(_to_chat_id(chat_id), int(message_id), text[: self.chunk_limit], None)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        bot = self._require_bot()
        await self._call(
            "deleteMessage",
            lambda: bot.delete_message(chat_id=_to_chat_id(chat_id), message_id=int(message_id)),
        )

    async def _edit_text(
        self, chat_id: int | str, message_id: int, text: str, parse_mode: str | None
    ) -> None:
        bot = self._require_bot()
        try:
            await bot.edit_message_text(
                text=text, chat_id=chat_id, message_id=message_id, parse_mode=parse_mode
            )
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():  # already shows exactly this
                raise

    async def _replace_preview(
        self,
        chat_id: int | str,
        message_id: int,
        chunk: str,
        reply_to: int | None,
        thread_id: int | None,
    ) -> list[str]:
        """Edit a live preview into the reply's first chunk (formatted like ``_send_chunk``).
        When Telegram refuses the edit (the message is gone, too old), the preview is
        deleted and the chunk sent as a new message: one reply either way."""
        from channels.formatting import markdown_to_telegram_html

        try:
            rendered = markdown_to_telegram_html(chunk)
        except Exception:
            log.exception("telegram: Markdown rendering failed; editing in plain text")
            rendered = ""
        try:
            try:
                if not rendered.strip():
                    raise BadRequest("can't parse entities: nothing rendered")
                await self._call(
                    "editMessageText",
                    lambda: self._edit_text(chat_id, message_id, rendered, "HTML"),
                )
            except BadRequest as exc:
                reason = str(exc).lower()
                if not any(
                    s in reason
                    for s in ("can't parse entities", "can't find end tag", "start tag", "too long")
                ):
                    raise
                await self._call(
                    "editMessageText",
                    lambda: self._edit_text(chat_id, message_id, chunk[: self.chunk_limit], None),
                )
            return [str(message_id)]
        except BadRequest as exc:
            log.info(
                "telegram[%s]: the preview %s could not be edited (%s); sending the reply anew",
                self.account,
                message_id,
                exc,
            )
            with contextlib.suppress(Exception):
                await self.delete_message(str(chat_id), str(message_id))
            sent = await self._send_chunk(chat_id, chunk, reply_to, thread_id)
            return [str(m.message_id) for m in sent]

    async def _send_media(
        self,
        chat_id: int | str,
        item: MediaItem,
        as_voice: bool,
        reply_to: int | None,
        thread_id: int | None,
    ) -> Message:
        bot = self._require_bot()
        kind = item.kind
        if kind == "audio" and as_voice:
            kind = "voice"
        senders: dict[str, tuple[Callable[..., Awaitable[Message]], str]] = {
            "image": (bot.send_photo, "photo"),
            "document": (bot.send_document, "document"),
            "video": (bot.send_video, "video"),
            "audio": (bot.send_audio, "audio"),
            "voice": (bot.send_voice, "voice"),
        }
        sender, field = senders.get(kind, (bot.send_document, "document"))
        reply = (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True)
            if reply_to
            else None
        )
        label = _MEDIA_LABEL.get(kind, "File")

        async def send_note(note: str) -> Message:
            return (await self._send_plain(chat_id, note, reply_to, thread_id))[0]

        if item.is_url:
            try:
                return await self._call(
                    f"send {kind}",
                    lambda: sender(
                        chat_id=chat_id,
                        **{field: item.target},
                        reply_parameters=reply,
                        message_thread_id=thread_id,
                    ),
                )
            except BadRequest as exc:
                log.info(
                    "telegram[%s]: %s URL refused (%s); sending a link", self.account, kind, exc
                )
                return await send_note(f"{label}: {item.target}")

        path = Path(item.target)
        name = item.name or path.name or "file"
        try:
            if not path.is_file():
                raise FileNotFoundError(str(path))
            if path.stat().st_size > _MAX_UPLOAD_BYTES:
                raise ValueError("file larger than the 50 MB upload limit")
            data = await asyncio.to_thread(path.read_bytes)
            upload_name = item.name or path.name
            return await self._call(
                f"send {kind}",
                lambda: sender(
                    chat_id=chat_id,
                    **{field: InputFile(data, filename=upload_name)},
                    reply_parameters=reply,
                    message_thread_id=thread_id,
                    write_timeout=max(self.request_timeout, 120.0),
                ),
            )
        except (Forbidden, InvalidToken):
            raise
        except Exception as exc:
            log.warning("telegram[%s]: upload of %s failed: %r", self.account, name, exc)
            return await send_note(f"[attachment unavailable: {name}]")

    # ------------------------------------------------------------------ typing / reactions
    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        bot = self._bot
        if bot is None:
            return
        try:
            await bot.send_chat_action(
                chat_id=_to_chat_id(chat_id),
                action=ChatAction.TYPING,
                message_thread_id=_to_int(thread_id),
            )
        except Exception as exc:
            log.debug("telegram[%s]: typing failed in %s: %r", self.account, chat_id, exc)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        bot = self._bot
        mid = _to_int(message_id)
        if bot is None or mid is None:
            return
        try:
            await bot.set_message_reaction(
                chat_id=_to_chat_id(chat_id),
                message_id=mid,
                reaction=[ReactionTypeEmoji(emoji)] if emoji else [],
            )
        except Exception as exc:
            log.info(
                "telegram[%s]: reaction %r on %s/%s failed: %r",
                self.account,
                emoji,
                chat_id,
                message_id,
                exc,
            )
