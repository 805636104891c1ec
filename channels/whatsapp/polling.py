"""Inbound: the long-poll loop of one WhatsApp account, and where its cursor is kept.

The platform keeps updates for 30 days and takes no acknowledgement: the offset a client
sends is all it knows, so the cursor is stored, one per account, in the store: the last
message of a batch carries it to the sink, which writes it in the same transaction as that
message's row (the rows before it are stored already); a batch that brings nothing to keep
stores it alone through the ``Cursor`` port.  A crash before that commit re-reads the batch;
the store drops what it already has (the message id is the key), so nothing is lost or
answered twice.

At the first start of an account (no cursor yet) the updates already waiting are skipped:
never answered, never shown to the model; only the newest is marked read (one call).

Failures: ``409`` (another client polls this key) sets the state ``conflict`` and backs off;
three within ten minutes stop polling until restart.  ``401`` (or ``400``/100: a revoked key)
ends the loop with an error the daemon shows.  Anything else backs off and polls again."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any

from channels.base import ChannelError, InboundMessage, InboundSink, cursor_key
from channels.retry import Backoff
from channels.whatsapp import translate
from channels.whatsapp.transport import ApiError, Transport

log = logging.getLogger("chela.channels.whatsapp")

CONFLICTS_TO_STOP = 3
CONFLICT_SPAN = 600.0  # seconds in which that many conflicts stop the account


@dataclass(frozen=True)
class Cursor:
    """Where an account's offset is kept, as two ports the app gives (it owns the store):
    ``load`` (None before the first start) and ``save`` (durable when it returns; for a
    batch without a message to keep: the sink stores the rest with the rows)."""

    load: Callable[[], int | None]
    save: Callable[[int], None]


class KeyRefused(ChannelError):
    """The platform refused the API key (revoked, regenerated, or not a key)."""


class Poller:
    def __init__(
        self,
        transport: Transport,
        cursor: Cursor,
        *,
        account: str,
        poll_timeout: int,
        on_state: Callable[[str], None],
        on_taken: Callable[[InboundMessage], Awaitable[None]],
        backoff: Backoff,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.transport, self.cursor, self.account = transport, cursor, account
        self.poll_timeout = poll_timeout
        self.on_state, self.on_taken = on_state, on_taken
        self.backoff, self.clock = backoff, clock
        self.offset: int | None = cursor.load()
        self.key = cursor_key("whatsapp", account)  # the store's name for the offset
        self.agent_id = ""
        self.polls = 0
        self._conflicts: collections.deque[float] = collections.deque()

    async def skip_backlog(self) -> None:
        """First start: read what is waiting without a wait, answer none of it, mark the
        newest read, and store the cursor past it."""
        if self.offset is not None:
            return
        offset, newest = 0, ""
        while True:
            body = await self.transport.poll(offset, 0)
            self.polls += 1
            if body is None:
                break
            batch = translate.parse_updates(body)
            self.agent_id = self.agent_id or batch.agent_id
            newest = translate.newest_message_id(batch.messages) or newest
            if batch.next_offset == offset or not (batch.messages or batch.statuses):
                offset = batch.next_offset
                break
            offset = batch.next_offset
        if newest:
            log.info("whatsapp[%s]: first start: skipped the messages waiting", self.account)
            with contextlib.suppress(ChannelError):
                await self.transport.mark_read(translate.status_payload(newest, typing=False))
        self.cursor.save(offset)
        self.offset = offset

    async def run(self, sink: InboundSink) -> None:
        """Poll until cancelled, a refused key (raises ``KeyRefused``) or too many conflicts."""
        while True:
            try:
                body = await self.transport.poll(self.offset, self.poll_timeout)
            except ApiError as e:
                if not await self._failed(e):
                    return
                continue
            except (TimeoutError, OSError, ChannelError) as e:
                await self._wait(f"{type(e).__name__}: {e}")
                continue
            finally:
                self.polls += 1
            self.backoff.reset()
            self.on_state("connected")
            if body is not None:
                await self._batch(body, sink)

    async def _failed(self, e: ApiError) -> bool:
        """After a refused poll: False to stop polling (raises for a refused key)."""
        if e.status == 401 or (e.status == 400 and e.code == 100):
            self.on_state("unauthorized")
            log.error(
                "whatsapp[%s]: the platform refused the API key (%s); polling stopped: put a "
                "valid key from WhatsApp > Settings > Agents in the configured variable",
                self.account,
                e,
            )
            raise KeyRefused(f"whatsapp[{self.account}]: API key refused (HTTP {e.status})")
        if e.status == 409:
            return await self._conflict()
        await self._wait(str(e))
        return True

    async def _conflict(self) -> bool:
        now = self.clock()
        self._conflicts.append(now)
        while self._conflicts and now - self._conflicts[0] > CONFLICT_SPAN:
            self._conflicts.popleft()
        self.on_state("conflict")
        if len(self._conflicts) >= CONFLICTS_TO_STOP:
            log.error(
                "whatsapp[%s]: another client keeps polling this API key (%d conflicts in 10 "
                "minutes); this account stops polling until Chela restarts",
                self.account,
                len(self._conflicts),
            )
            self.on_state("conflict: stopped polling until restart")
            return False
        log.warning(
            "whatsapp[%s]: another client polls this API key (HTTP 409); retrying in %.1fs",
            self.account,
            self.backoff.peek(),
        )
        await asyncio.sleep(self.backoff.next())
        return True

    async def _wait(self, why: str) -> None:
        log.warning(
            "whatsapp[%s]: poll failed (%s); retrying in %.1fs",
            self.account,
            why,
            self.backoff.peek(),
        )
        await asyncio.sleep(self.backoff.next())

    async def _batch(self, body: Any, sink: InboundSink) -> None:
        try:
            batch = translate.parse_updates(body)
        except translate.Malformed as e:
            await self._wait(f"malformed answer: {e}")
            return
        self.agent_id = self.agent_id or batch.agent_id
        msgs = [m for raw in batch.messages if (m := self._translate(raw, batch.names))]
        moved = batch.next_offset != self.offset
        if moved and self.offset is not None and batch.next_offset < self.offset:
            log.warning("whatsapp[%s]: the cursor went back; using it", self.account)
        cursor = (self.key, batch.next_offset) if moved else None
        for k, msg in enumerate(msgs):  # the last one carries the cursor into its row's commit
            await self._hand(msg, sink, cursor if k == len(msgs) - 1 else None)
        if moved and not msgs:  # nothing kept: the cursor is stored alone
            self.cursor.save(batch.next_offset)
        self.offset = batch.next_offset

    def _translate(self, raw: dict[str, Any], names: dict[str, str]) -> InboundMessage | None:
        try:
            msg = translate.inbound_message(raw, names=names, account=self.account)
        except Exception as e:  # the translator never raises; a bug must not stop the poll
            log.warning("whatsapp[%s]: skipping a message: %r", self.account, e)
            return None
        if msg is None:
            log.info(
                "whatsapp[%s]: skipping a %r message (nothing to answer)",
                self.account,
                str(raw.get("type", "?"))[:40],
            )
        return msg

    async def _hand(
        self, msg: InboundMessage, sink: InboundSink, cursor: tuple[str, int] | None
    ) -> None:
        await store_until_taken(sink, msg, cursor, self.backoff, self.account)
        await self.on_taken(msg)


async def store_until_taken(
    sink: InboundSink,
    msg: InboundMessage,
    cursor: tuple[str, int] | None,
    like: Backoff,
    account: str,
) -> None:
    """Give ``msg`` (with the batch's cursor when it is the last) to the sink until it is
    stored; a failed store is retried with backoff (a fresh one shaped ``like``), never
    skipped."""
    backoff = Backoff(like.initial, like.cap)
    while True:
        try:
            await sink(msg, cursor)
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "whatsapp[%s]: storing a message failed; retrying in %.1fs",
                account,
                backoff.peek(),
            )
            await asyncio.sleep(backoff.next())
