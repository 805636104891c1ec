"""Telegram adapter (python-telegram-bot 22, own long-poll loop).

``TelegramChannel`` keeps the channel's state and lifecycle (connect, start, stop) and hands
the jobs to its sibling modules: ``polling.Poller`` turns Telegram updates into
``InboundMessage`` values for the core's sink, ``send.Sender`` turns ``OutboundMessage``
values into the Bot API calls ``translate.plan_send`` lists, ``media.fetch_media`` downloads
attachments.  We use PTB's ``Bot`` (typed API, request objects, errors) but not its
``Application``/``Updater``.  Bytes move through ``request.AiohttpRequest``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from telegram import Bot, BotCommand
from telegram.error import InvalidToken, NetworkError, TelegramError, TimedOut

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundSink,
    MediaItem,
    MediaTooLarge,
    OutboundMessage,
    wait_task_end,
)
from channels.redact import RedactSecrets
from channels.best_effort import best_effort
from channels.telegram import media, translate
from channels.telegram.polling import Poller
from channels.telegram.request import AiohttpRequest
from channels.telegram.send import Sender

log = logging.getLogger("chela.channels.telegram")

# PTB logs its API URLs, which contain the bot token, at DEBUG on this logger.
_PTB_LOGGER = "telegram.Bot"


class TelegramChannel(Channel):
    """Telegram Bot API channel.

    ``api_base`` points at the Bot API server (``https://api.telegram.org``, a self-hosted
    server, or ``FakeTelegram.api_base`` in tests).  Inbound media is not downloaded at
    intake: attachments carry their ``file_id`` as ``ref`` and the core calls
    ``fetch_media`` once the sender is admitted.  ``media_dir`` is accepted
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
        commands: list[tuple[str, str]] | Callable[[], list[tuple[str, str]]] | None = None,
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
        # (name, description) for the chat's command menu, or what gives them when the menu is
        # published (after the first poll: the core's command table is not needed to poll)
        self.commands = commands if callable(commands) else list(commands or [])
        self._menu: asyncio.Task[None] | None = None
        self.capabilities = dataclasses.replace(type(self).capabilities, max_text=self.chunk_limit)

        self._bot: Bot | None = None
        self._requests: list[AiohttpRequest] = []
        self._sink: InboundSink | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._me = translate.Me()  # who the bot is, from getMe
        self._redactor = RedactSecrets([token])
        self.album_wait = album_wait
        self._poller: Poller | None = None
        self._sender = Sender(
            lambda: self._bot,
            account=account,
            chunk_limit=self.chunk_limit,
            request_timeout=request_timeout,
            send_retries=self.send_retries,
            max_retry_after=max_retry_after,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
        )

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
        assert self._bot is not None and self._stopping is not None
        self._poller = Poller(
            self._bot,
            sink,
            self._stopping,
            me=self._me,
            account=self.account,
            poll_timeout=self.poll_timeout,
            stall_timeout=self.stall_timeout,
            allowed_updates=self.allowed_updates,
            backoff_initial=self.backoff_initial,
            backoff_max=self.backoff_max,
            album_wait=self.album_wait,
        )
        self._task = asyncio.create_task(self._poller.run(), name=f"telegram-poll-{self.account}")
        # the menu follows the first poll: it never delays the first message
        self._menu = asyncio.create_task(
            self._publish_commands(self._bot, self._poller.polled),
            name=f"telegram-menu-{self.account}",
        )

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

    async def _publish_commands(self, bot: Bot, polled: asyncio.Event) -> None:
        """setMyCommands, so the commands show in the client's menu; a failure only costs the
        menu.  It waits for the first getUpdates to come back (at most a second, by when it is
        on the wire), and a menu given as a callable is read in a thread: the first message
        never waits for the menu, nor for what building it imports."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(polled.wait(), 1.0)
        try:
            given = self.commands
            commands = await asyncio.to_thread(given) if callable(given) else given
            if not commands:
                return
            await asyncio.wait_for(
                bot.set_my_commands([BotCommand(n, d[:256]) for n, d in commands]),
                self.start_timeout,
            )
        except (TimeoutError, TelegramError) as exc:
            log.warning("telegram[%s]: could not set the command menu: %s", self.account, exc)
        except Exception:
            log.exception("telegram[%s]: could not set the command menu", self.account)

    async def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
        menu, self._menu = self._menu, None
        if menu is not None and not menu.done():
            menu.cancel()
            await asyncio.gather(menu, return_exceptions=True)
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
            poller, self._poller = self._poller, None
            if poller is not None:
                await poller.confirm_offset()
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
            with best_effort(log, "closing an HTTP session"):
                await request.shutdown()

    # ------------------------------------------------------------------ attachments
    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        """getFile, then the bytes into ``dest_dir`` under ``max_bytes`` (``media.py``)."""
        if not item.ref:
            return item
        if item.size and item.size > max_bytes:
            raise MediaTooLarge(
                f"telegram: {item.name or 'file'} is {item.size} bytes, over {max_bytes}"
            )
        bot = self._sender.require_bot()
        return await media.fetch_media(
            bot, self._requests[0], item, dest_dir, max_bytes, timeout=self.request_timeout
        )

    # ------------------------------------------------------------------ sending (send.py)
    async def send(self, msg: OutboundMessage) -> list[str]:
        return await self._sender.send(msg)

    async def send_preview(
        self,
        chat_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        reply_to_id: str | None = None,
    ) -> str:
        return await self._sender.send_preview(
            chat_id, text, thread_id=thread_id, reply_to_id=reply_to_id
        )

    async def edit_preview(
        self, chat_id: str, message_id: str, text: str, *, thread_id: str | None = None
    ) -> None:
        await self._sender.edit_preview(chat_id, message_id, text, thread_id=thread_id)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread_id: str | None = None
    ) -> None:
        await self._sender.delete_message(chat_id, message_id, thread_id=thread_id)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        await self._sender.typing(chat_id, thread_id)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        await self._sender.react(chat_id, message_id, emoji)
