"""Telegram adapter (python-telegram-bot 22, own long-poll loop).

The adapter wires the transport to the pure translators (``translate.py``) and keeps the
channel's state: Telegram updates become ``InboundMessage`` values handed to the core's sink,
``OutboundMessage`` values become the Bot API calls ``translate.plan_send`` lists.  We use
PTB's ``Bot`` (typed API, request objects, errors) but not its ``Application``/``Updater``:
our own poll loop advances the update offset only after the sink has persisted a message
(SPEC §4.5), skips updates it cannot parse one at a time, restarts a stalled long poll, and
backs off on network errors.  Bytes move through ``request.AiohttpRequest``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import mimetypes
import re
import tempfile
import uuid
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from telegram import Bot, BotCommand, InputFile, Message, ReactionTypeEmoji, ReplyParameters
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
from telegram.warnings import PTBDeprecationWarning

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
    wait_task_end,
)
from channels.redact import RedactSecrets
from channels.telegram import translate
from channels.telegram.request import AiohttpRequest
from channels.telegram.translate import ApiCall, LocalFile, MediaSend, PreviewEdit, TextSend
from channels.util import capped_file

log = logging.getLogger("chela.channels.telegram")

# getUpdates goes through PTB's public raw call, Bot.do_api_request, so that one malformed update
# cannot fail Update.de_list for the whole batch (each update is translated on its own).  PTB
# warns that Bot.get_updates exists; that is the parsing we avoid on purpose.
# (PTB attributes the warning to the event loop's frame, so the filter matches the message only)
warnings.filterwarnings("ignore", message=r"Please use 'Bot\.getUpdates' instead")

# Bot API method → the PTB ``Bot`` method that makes it (typed, with PTB's encoding and errors)
_PTB_METHOD = {
    "sendMessage": "send_message",
    "editMessageText": "edit_message_text",
    "deleteMessage": "delete_message",
    "sendPhoto": "send_photo",
    "sendDocument": "send_document",
    "sendVideo": "send_video",
    "sendAudio": "send_audio",
    "sendVoice": "send_voice",
    "sendChatAction": "send_chat_action",
    "setMessageReaction": "set_message_reaction",
}


class _Stopped(Exception):
    """Internal: the channel is stopping."""


class _Stalled(Exception):
    """Internal: a getUpdates call exceeded the stall timeout."""


# PTB logs its API URLs, which contain the bot token, at DEBUG on this logger.
_PTB_LOGGER = "telegram.Bot"


def _retry_seconds(exc: RetryAfter) -> float:
    # PTB ≥ 22.2 warns that ``retry_after`` will become a timedelta; either form is read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return max(0.0, seconds)


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
        self.chunk_limit = min(int(chunk_limit), translate.HARD_TEXT_LIMIT)
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
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._offset: int | None = None  # next offset to confirm (last handled update_id + 1)
        self._confirmed: int | None = None  # offset the server has last been told
        self._me = translate.Me()  # who the bot is, from getMe
        self._redactor = RedactSecrets([token])
        # an album being collected: (chat:media_group_id, {update_id: message})
        self._album: tuple[str, dict[int, InboundMessage]] | None = None
        self._album_grew = False
        self.album_wait = album_wait

    # ------------------------------------------------------------------ lifecycle
    @property
    def bot_identity(self) -> dict[str, str]:
        """``{"id": "<bot user id>", "username": "<bot username>"}`` after start."""
        return {"id": self._me.id, "username": self._me.username} if self._me.id else {}

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
        self._me = translate.Me(id=str(bot.id), username=bot.username or "")
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
    async def _fetch(self) -> list[Any]:
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
        stopping = self._stopping
        if stopping is None:
            return
        try:
            while not stopping.is_set():
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
                    if stopping.is_set():
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
        update_id = translate.update_id(raw)
        if update_id is None:
            log.warning(
                "telegram[%s]: skipping an update without a valid update_id: %.200r",
                self.account,
                raw,
            )
            return
        if self._offset is not None and update_id < self._offset:
            return  # already handled (replayed batch)
        try:
            inbound = translate.inbound_message(raw, me=self._me, account=self.account)
            group = translate.album_key(raw) if inbound is not None else None
        except Exception as exc:  # the translator never raises; a bug must not stop the poll
            log.warning(
                "telegram[%s]: skipping update %s that could not be translated: %r",
                self.account,
                update_id,
                exc,
            )
            inbound, group = None, None
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
        await self._deliver(translate.merge_album(parts), last)
        self._album = None
        self._album_grew = False

    async def _deliver(self, inbound: InboundMessage, update_id: int) -> None:
        """The sink, retried until it persists the message; then the offset moves past it."""
        sink = self._sink
        if sink is None:
            return
        delay = self.backoff_initial
        while True:
            try:
                await sink(inbound)
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

    # ------------------------------------------------------------------ attachments
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

    async def _invoke(self, call: ApiCall, upload: bytes | None = None, **options: Any) -> Any:
        """Make one planned call, once, through PTB's typed method for it; ``upload`` is the
        content of the call's ``LocalFile``, ``options`` PTB's per-call request options."""
        bot = self._require_bot()
        kwargs = dict(call.params)
        reply = kwargs.get("reply_parameters")
        if isinstance(reply, dict):
            kwargs["reply_parameters"] = ReplyParameters(**reply)
        if call.method == "setMessageReaction":
            kwargs["reaction"] = [ReactionTypeEmoji(r["emoji"]) for r in kwargs["reaction"]]
        for key, value in call.params.items():
            if isinstance(value, LocalFile):
                kwargs[key] = InputFile(upload or b"", filename=value.filename)
        return await getattr(bot, _PTB_METHOD[call.method])(**kwargs, **options)

    async def _send(self, call: ApiCall, what: str = "") -> Message:
        """One planned call with ``_call``'s retries."""
        sent: Message = await self._call(what or call.method, lambda: self._invoke(call))
        return sent

    async def _send_plain(self, calls: tuple[ApiCall, ...]) -> list[Message]:
        return [await self._send(call) for call in calls]

    async def _send_text(self, step: TextSend) -> list[Message]:
        """A chunk as HTML; as plain text when nothing renders or Telegram refuses the HTML."""
        if step.render_error:
            log.error(
                "telegram: Markdown rendering failed (%s); sending plain text", step.render_error
            )
        if step.html is None:
            return await self._send_plain(step.plain)
        try:
            return [await self._send(step.html)]
        except BadRequest as exc:
            if not translate.html_refused(str(exc)):
                raise
            log.info(
                "telegram[%s]: HTML refused (%s); resending the chunk as plain text",
                self.account,
                exc,
            )
            return await self._send_plain(step.plain)

    async def send(self, msg: OutboundMessage) -> list[str]:
        self._require_bot()
        plan = translate.plan_send(msg, limit=self.chunk_limit)
        ids: list[str] = []
        attempted = 0
        last_error: Exception | None = None

        for i in range(len(plan.chunks)):
            attempted += 1
            step = plan.text_step(i, delivered=bool(ids))
            try:
                if isinstance(step, PreviewEdit):
                    ids.extend(await self._replace_preview(step))
                else:
                    ids.extend(str(m.message_id) for m in await self._send_text(step))
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

        for i in range(len(plan.media)):
            if isinstance(last_error, (Forbidden, InvalidToken)):
                break
            attempted += 1
            media = plan.media_step(i, delivered=bool(ids))
            try:
                sent_msg = await self._send_media(media)
                ids.append(str(sent_msg.message_id))
            except Exception as exc:
                last_error = exc
                log.warning(
                    "telegram[%s]: sending %s to %s failed: %r",
                    self.account,
                    media.kind,
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
        call = translate.preview_call(
            chat_id, text, limit=self.chunk_limit, thread_id=thread_id, reply_to_id=reply_to_id
        )
        # one plain call, no retries: a preview that cannot be shown now is skipped
        sent = await self._invoke(call)
        return str(sent.message_id)

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        call = translate.edit_call(
            translate.to_chat_id(chat_id), int(message_id), text[: self.chunk_limit]
        )
        await self._edit(call)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        self._require_bot()
        await self._send(translate.delete_call(translate.to_chat_id(chat_id), int(message_id)))

    async def _edit(self, call: ApiCall) -> None:
        """editMessageText, once; "message is not modified" (it already shows exactly
        this) counts as done."""
        try:
            await self._invoke(call)
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                raise

    async def _replace_preview(self, step: PreviewEdit) -> list[str]:
        """Edit a live preview into the reply's first chunk (formatted like ``_send_text``).
        When Telegram refuses the edit (the message is gone, too old), the preview is
        deleted and the chunk sent as a new message: one reply either way."""
        if step.fallback.render_error:
            log.error(
                "telegram: Markdown rendering failed (%s); editing in plain text",
                step.fallback.render_error,
            )
        try:
            try:
                if step.html is None:
                    raise BadRequest("can't parse entities: nothing rendered")
                html = step.html
                await self._call(html.method, lambda: self._edit(html))
            except BadRequest as exc:
                if not translate.html_refused(str(exc), edit=True):
                    raise
                await self._call(step.plain.method, lambda: self._edit(step.plain))
            return [str(step.message_id)]
        except BadRequest as exc:
            log.info(
                "telegram[%s]: the preview %s could not be edited (%s); sending the reply anew",
                self.account,
                step.message_id,
                exc,
            )
            with contextlib.suppress(Exception):
                await self.delete_message(str(step.delete.params["chat_id"]), str(step.message_id))
            sent = await self._send_text(step.fallback)
            return [str(m.message_id) for m in sent]

    async def _send_media(self, step: MediaSend) -> Message:
        """The attachment by URL or upload; if Telegram refuses the URL, or the file cannot
        be read or sent, a line of text saying so instead."""
        what = f"send {step.kind}"
        upload = step.call.upload
        if upload is None:
            try:
                return await self._send(step.call, what)
            except BadRequest as exc:
                log.info(
                    "telegram[%s]: %s URL refused (%s); sending a link",
                    self.account,
                    step.kind,
                    exc,
                )
                return (await self._send_plain(step.note))[0]

        path = Path(upload.path)
        try:
            if not path.is_file():
                raise FileNotFoundError(str(path))
            if path.stat().st_size > translate.MAX_UPLOAD_BYTES:
                raise ValueError("file larger than the 50 MB upload limit")
            data = await asyncio.to_thread(path.read_bytes)
            write_timeout = max(self.request_timeout, 120.0)
            sent: Message = await self._call(
                what, lambda: self._invoke(step.call, data, write_timeout=write_timeout)
            )
            return sent
        except (Forbidden, InvalidToken):
            raise
        except Exception as exc:
            log.warning("telegram[%s]: upload of %s failed: %r", self.account, step.name, exc)
            return (await self._send_plain(step.note))[0]

    # ------------------------------------------------------------------ typing / reactions
    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if self._bot is None:
            return
        try:
            await self._invoke(translate.typing_call(chat_id, thread_id))
        except Exception as exc:
            log.debug("telegram[%s]: typing failed in %s: %r", self.account, chat_id, exc)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        call = translate.reaction_call(chat_id, message_id, emoji)
        if self._bot is None or call is None:
            return
        try:
            await self._invoke(call)
        except Exception as exc:
            log.info(
                "telegram[%s]: reaction %r on %s/%s failed: %r",
                self.account,
                emoji,
                chat_id,
                message_id,
                exc,
            )
