"""``WhatsAppChannel``: one WhatsApp account (one Agent Platform key, one agent, one creator).

The adapter keeps the account's lifecycle and state, hands sends to its transport one at a
time (the platform does not order overlapping sends), keeps the typing indicator within the
platform's budget (one call shows it for 25 s, so the core's frequent refreshes are thinned
out), and marks each message read once it is stored."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import mimetypes
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from channels.base import (
    Capabilities,
    Channel,
    ChannelError,
    InboundMessage,
    InboundSink,
    MediaItem,
    OutboundMessage,
    wait_task_end,
)
from channels.retry import Backoff
from channels.whatsapp import translate
from channels.whatsapp.polling import Cursor, Poller
from channels.whatsapp.transport import ApiError, Transport

log = logging.getLogger("chela.channels.whatsapp")

STALE_QUOTE = 131009
# states the platform's answers or a linked device's events show, reported instead of connected
OWN_STATES = (
    *("conflict", "connecting", "pairing", "reconnecting", "disconnected"),
    *("logged_out", "banned", "outdated"),
)
# after these the account stays down until the owner acts (links it again, restarts Chela)
STOPPED = ("logged_out", "banned", "outdated")


class WhatsAppChannel(Channel):
    name = "whatsapp"

    def __init__(
        self,
        *,
        transport: Transport,
        cursor: Cursor,
        account: str = "default",
        poll_timeout: int = 20,
        chunk_limit: int = translate.HARD_LIMIT,
        typing_every: float = 20.0,
        backoff_initial: float = 1.0,
        backoff_max: float = 60.0,
        inbound: Callable[..., Any] | None = None,
    ) -> None:
        """``inbound`` builds what brings messages in (the Agent Platform's ``Poller`` by
        default; a linked device's queue reader), given the adapter's callbacks."""
        self.transport = transport
        self.account = account
        self.capabilities = Capabilities(
            media=True, typing=True, max_text=min(chunk_limit, translate.HARD_LIMIT)
        )
        self.typing_every = typing_every
        self.state = "starting"
        make = inbound or functools.partial(Poller, transport, cursor)
        self.poller = make(
            account=account,
            poll_timeout=poll_timeout,
            on_state=self._set_state,
            on_taken=self._taken,
            backoff=Backoff(backoff_initial, backoff_max, jitter=0.1),
        )
        self._task: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        self._last_in: dict[str, str] = {}  # chat → the newest inbound message id
        self._typed: dict[str, float] = {}  # chat → when typing was last shown
        self._side: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle
    def _set_state(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        head = state.split(":", maxsplit=1)[0]
        if head in OWN_STATES or head == "connected":
            stopped = head in STOPPED or state.startswith("conflict: stopped")
            self.tell_state(self.own_state(), owner_must_act=stopped)

    def own_state(self) -> str:
        """``conflict`` (another client polls this key), with why when polling stopped; a
        linked device's ``pairing``, ``reconnecting``, ``logged_out`` … with why."""
        return self.state if self.state.split(":")[0] in OWN_STATES else ""

    def pairing_qr(self) -> str | None:
        """The QR code's payload while a linked device waits to be paired (refreshed as
        WhatsApp rotates it); None once paired, and always on the Agent Platform."""
        return self.transport.pairing_qr()

    @property
    def bot_identity(self) -> dict[str, Any]:
        return {"id": self.poller.agent_id} if self.poller.agent_id else {}

    async def start(self, sink: InboundSink) -> None:
        await self.transport.open()
        try:
            await self.poller.skip_backlog()
        except ApiError as e:
            await self.transport.close()
            raise ChannelError(f"whatsapp[{self.account}]: {e}") from None
        self.state = "connected"
        self._task = asyncio.create_task(self.poller.run(sink), name=f"whatsapp-{self.account}")

    async def open_for_sending(self) -> None:
        await self.transport.open()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for side in list(self._side):
            side.cancel()
        await asyncio.gather(*self._side, return_exceptions=True)
        await self.transport.close()
        self.state = "stopped"

    async def wait_closed(self) -> BaseException | None:
        err = await wait_task_end(self._task)
        if err is None:  # polling stopped on purpose (conflicts): stay down until restart
            await asyncio.get_running_loop().create_future()
        return err

    # ------------------------------------------------------------------ inbound
    async def _taken(self, msg: InboundMessage) -> None:
        """A message is stored: remember it for typing, mark it read (in the background:
        the poll does not wait for the status budget)."""
        self._last_in[msg.chat_id] = msg.message_id
        task = asyncio.create_task(self._mark(msg.message_id, typing=False))
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    async def _mark(self, message_id: str, *, typing: bool) -> None:
        try:
            await self.transport.mark_read(translate.status_payload(message_id, typing))
        except (ChannelError, OSError, TimeoutError) as e:
            log.info("whatsapp[%s]: status call failed: %s", self.account, e)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        message_id = self._last_in.get(chat_id)
        now = time.monotonic()
        if not message_id or now - self._typed.get(chat_id, -1e9) < self.typing_every:
            return
        self._typed[chat_id] = now
        await self._mark(message_id, typing=True)

    async def fetch_media(self, item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
        suffix = mimetypes.guess_extension(item.mime) or ""
        if suffix == ".oga":
            suffix = ".ogg"
        safe = re.sub(r"[^A-Za-z0-9-]", "", item.ref)[:64] or "media"
        dest = dest_dir / f"whatsapp-{safe}{suffix}"
        try:
            mime, size = await self.transport.download(item.ref, dest, max_bytes)
        except ChannelError as e:
            log.warning("whatsapp[%s]: file %s not fetched: %s", self.account, item.name, e)
            raise
        mime = mime.split(";")[0].strip() or item.mime
        return dataclasses.replace(item, target=str(dest), mime=mime, size=size)

    # ------------------------------------------------------------------ outbound
    async def send(self, msg: OutboundMessage) -> list[str]:
        async with self._send_lock:
            ids: list[str] = []
            quote = msg.reply_to_id if msg.reply_mode != "off" else None
            notes: list[str] = []
            for k, chunk in enumerate(translate.text_chunks(msg.text, self.capabilities.max_text)):
                q = quote if (k == 0 or msg.reply_mode == "all") else None
                ids.append(await self._send_text(msg.chat_id, chunk, q))
            for item in msg.media:
                sent = await self._send_media(msg.chat_id, item)
                if sent.startswith("("):
                    notes.append(sent)
                else:
                    ids.append(sent)
            for note in notes:
                ids.append(await self._send_text(msg.chat_id, note, None))
            self._typed.pop(msg.chat_id, None)  # a message ends the platform's typing
            return ids

    async def _send_text(self, to: str, body: str, quote: str | None) -> str:
        try:
            return await self.transport.send_message(translate.text_payload(to, body, quote))
        except ApiError as e:
            if not quote or e.code != STALE_QUOTE:
                raise
            return await self.transport.send_message(translate.text_payload(to, body))

    async def _send_media(self, to: str, item: MediaItem) -> str:
        """The sent message's id, or a one-line note (in parentheses) when it cannot go."""
        name = item.name or Path(item.target).name
        if item.is_url:
            return f"(the file {name} is a link and cannot be sent on WhatsApp: {item.target})"
        path = Path(item.target)
        try:
            size = path.stat().st_size
        except OSError:
            return f"(the file {name} could not be read)"
        mime = item.mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        plan = translate.media_plan(item.kind, mime, size, name)
        if plan.note:
            log.info("whatsapp[%s]: not sending %s: %s", self.account, name, plan.note)
            return plan.note
        media_id = await self.transport.upload(path, plan.mime)
        payload = translate.media_payload(to, plan, media_id, filename=name)
        return await self.transport.send_message(payload)

    async def react(self, chat_id: str, message_id: str, emoji: str) -> None:
        return None  # the platform cannot send reactions
