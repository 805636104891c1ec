"""Outbound: ``Sender`` makes the Bot API calls ``translate.plan_send`` lists for an
``OutboundMessage`` (HTML with a plain-text fallback, uploads, a live preview edited into the
reply), live previews, typing and reactions, through PTB's typed ``Bot`` methods, with
bounded retries on 429 and connection failures (never on a timeout: it may have landed)."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from telegram import Bot, InputFile, Message, ReactionTypeEmoji, ReplyParameters
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from channels.base import ChannelError, OutboundMessage
from channels.best_effort import best_effort
from channels.retry import Backoff
from channels.telegram import translate
from channels.telegram.translate import ApiCall, LocalFile, MediaSend, PreviewEdit, TextSend

log = logging.getLogger("chela.channels.telegram")

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


def message_id(answer: Message) -> str:
    """The id of the message a Bot API call made."""
    return str(answer.message_id)


def retry_seconds(exc: RetryAfter) -> float:
    # PTB ≥ 22.2 warns that ``retry_after`` will become a timedelta; either form is read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else float(value)
    return max(0.0, seconds)


class Sender:
    """The sending half of ``TelegramChannel``; ``bot`` gives the connected ``Bot`` (None
    before start and after stop)."""

    def __init__(
        self,
        bot: Callable[[], Bot | None],
        *,
        account: str,
        chunk_limit: int,
        request_timeout: float,
        send_retries: int,
        max_retry_after: float,
        backoff_initial: float,
        backoff_max: float,
    ) -> None:
        self.bot = bot
        self.account = account
        self.chunk_limit = chunk_limit
        self.request_timeout = request_timeout
        self.send_retries = send_retries
        self.max_retry_after = max_retry_after
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max

    def require_bot(self) -> Bot:
        bot = self.bot()
        if bot is None:
            raise ChannelError("telegram: channel is not started")
        return bot

    async def _call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        """Run one API call, honouring 429 retry_after and retrying connection failures (bounded)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await fn()
            except RetryAfter as exc:
                wait = retry_seconds(exc)
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
                wait = Backoff(self.backoff_initial, self.backoff_max).delay(attempt - 1)
                log.info(
                    "telegram[%s]: %s failed (%s); retrying in %.1fs", self.account, what, exc, wait
                )
                await asyncio.sleep(wait)

    async def _invoke(self, call: ApiCall, upload: bytes | None = None, **options: Any) -> Any:
        """Make one planned call, once, through PTB's typed method for it; ``upload`` is the
        content of the call's ``LocalFile``, ``options`` PTB's per-call request options.
        Returns what PTB's method returns (a ``Message``, or True)."""
        bot = self.require_bot()
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

    async def _send(self, call: ApiCall, what: str = "") -> Any:
        """One planned call with ``_call``'s retries: its answer."""
        return await self._call(what or call.method, lambda: self._invoke(call))

    async def _send_plain(self, calls: tuple[ApiCall, ...]) -> list[Any]:
        return [await self._send(call) for call in calls]

    async def _send_text(self, step: TextSend) -> list[Any]:
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
        self.require_bot()
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
                    ids.extend(message_id(m) for m in await self._send_text(step))
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
                ids.append(message_id(sent_msg))
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
        return message_id(await self._invoke(call))

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
        self.require_bot()
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
            with best_effort(log, "deleting the preview"):
                await self.delete_message(str(step.delete.params["chat_id"]), str(step.message_id))
            sent = await self._send_text(step.fallback)
            return [message_id(m) for m in sent]

    async def _send_media(self, step: MediaSend) -> Any:
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
            return await self._call(
                what, lambda: self._invoke(step.call, data, write_timeout=write_timeout)
            )
        except (Forbidden, InvalidToken):
            raise
        except Exception as exc:
            log.warning("telegram[%s]: upload of %s failed: %r", self.account, step.name, exc)
            return (await self._send_plain(step.note))[0]

    # ------------------------------------------------------------------ typing / reactions
    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        if self.bot() is None:
            return
        try:
            await self._invoke(translate.typing_call(chat_id, thread_id))
        except Exception as exc:
            log.debug("telegram[%s]: typing failed in %s: %r", self.account, chat_id, exc)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        call = translate.reaction_call(chat_id, message_id, emoji)
        if self.bot() is None or call is None:
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
