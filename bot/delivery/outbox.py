"""The outbox: every outbound message is a stored row, sent in order per chat, retried
through platform outages, and sent again after a crash.

A row's life: ``queued`` (stored with the turn that produced it, or on its own for
heartbeats, cron, the ``message`` tool, pairing and approval notes) → ``sending`` (written
just before the platform call) → ``sent`` (with the platform's message ids) or
``failed`` (a permanent refusal, or not delivered within ``delivery.max_age``).  A failed
attempt that may succeed later (5xx, 429, a dropped connection, a timeout) puts the row
back to ``queued`` and the chat's worker tries again with backoff (honouring the
platform's ``retry_after``); later messages to the same chat wait behind it, other chats
do not.

After a crash, ``queued`` rows are sent, and so are ``sending`` rows: their outcome is
unknown, so they are the only possible duplicates (at most the sends in flight at the
crash).  Each row carries a nonce the adapter passes to platforms with idempotent sends
(Discord's ``nonce`` + ``enforce_nonce``), where even those are not duplicated.

When the state database cannot be written (a full disk) nothing is sent without its
``sending`` mark: the row waits and goes out once space is back.  A message whose row
could not be stored at all is still sent from memory (it just does not survive a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from bot.delivery.failures import classify
from bot.store import OUTBOX_PENDING, OutboxRow, Store, storage_full
from bot.store.disk import DiskAlarm, disk_full
from channels.base import Channel, MediaItem, OutboundMessage, account_key, adapter_for
from channels.retry import Backoff

log = logging.getLogger("chela.outbox")

RETRY_INITIAL = 1.0  # seconds before the first retry of a failed send
RETRY_MAX = 30.0  # the longest wait between two attempts
MAX_PARALLEL = 16  # platform sends in flight at once, over all chats
STOP_GRACE = 5.0  # seconds stop() lets sends in flight finish
KEEP_DONE = 7 * 86400.0  # sent and failed rows are kept this long (for audit), then pruned
ADOPT_EVERY = 60.0  # how often the daemon looks for rows another process left unsent
ADOPT_IDLE = 120.0  # ... untouched this long (a one-shot `chela heartbeat` that gave up)


class StorageAlarm:
    """``down``: the outbox's last write to the state database failed (messages wait in
    memory).  A full disk is said by the one disk-full alarm (``disk``, the store's: it names
    the state dir and tells the owner once per episode); any other refused write is said here,
    once, and once that writes work again."""

    def __init__(self, disk: DiskAlarm | None = None) -> None:
        self.down = False
        self.disk = disk
        self._said = False  # this episode was said here (not a full disk)

    def failed(self, e: BaseException, what: str) -> None:
        full = self.disk is not None and disk_full(e)
        if full and self.disk is not None:
            self.disk.failed(e)
        if self.down or full:
            log.debug("state database still not writable (%s): %s", what, e)
        else:
            self._said = True
            log.error(
                "cannot write the state database (%s) while %s: messages are kept in memory "
                "and answered once it works again",
                e,
                what,
            )
        self.down = True

    def ok(self) -> None:
        if self.disk is not None:
            self.disk.ok()
        if self.down:
            self.down = False
            if self._said:
                self._said = False
                log.warning("the state database is writable again: catching up")


@dataclass(eq=False)
class _Item:
    id: int | None  # None: the row could not be stored; sent from memory
    channel: str
    out: OutboundMessage
    kind: str
    nonce: str
    created: float  # wall clock
    attempts: int = 0
    first: asyncio.Future = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.channel, self.out.account, self.out.chat_id)


def out_json(o: OutboundMessage) -> dict[str, Any]:
    return dataclasses.asdict(o)


_OUT_FIELDS = frozenset(f.name for f in dataclasses.fields(OutboundMessage))


def out_from_json(d: dict) -> OutboundMessage:
    d = dict(d)
    d["media"] = [MediaItem(**m) for m in d.get("media", [])]
    return OutboundMessage(**{k: v for k, v in d.items() if k in _OUT_FIELDS})


def failed_item(item: _Item, error: str | None) -> dict[str, Any]:
    """A failed row as the Control UI's Inbox shows it ( outbox item)."""
    text = (item.out.text or "").strip()
    return {
        "id": item.id,
        "channel": item.channel,
        "chat": item.out.chat_id,
        "kind": item.kind,
        "preview": text.split("\n", 1)[0][:200],
        "state": "failed",
        "error": error,
        "attempts": item.attempts,
        "created": item.created,
    }


def _settle(fut: asyncio.Future, value: str) -> None:
    if not fut.done():
        fut.set_result(value)


class Outbox:
    def __init__(
        self,
        store: Store,
        channels: dict[str, Channel],
        *,
        max_age: float = 3600.0,
        retry_initial: float = RETRY_INITIAL,
        retry_max: float = RETRY_MAX,
        notices: Any = None,  # bot.reports.notices.Notices: delivery.failed for the UI
    ):
        self.notices = notices
        self.store = store
        self.channels = channels
        self.max_age = max_age
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.storage = StorageAlarm(store.disk)  # the store's disk-full alarm
        self._queues: dict[tuple[str, str, str], deque[_Item]] = {}
        self._workers: dict[tuple[str, str, str], asyncio.Task] = {}
        self._retrying: set[tuple[str, str, str]] = set()  # chats waiting out a failed send
        self._known: set[int] = set()  # row ids in memory now
        self._unsaved: dict[int, tuple[str, list[str] | None, str | None]] = {}
        self._flusher: asyncio.Task | None = None
        self._adopter: asyncio.Task | None = None
        self._started = False
        self._stopping = asyncio.Event()
        self._slots = asyncio.Semaphore(MAX_PARALLEL)

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, recover: bool) -> int:
        """Begin sending.  With ``recover`` (the daemon that receives; never a one-shot
        command next to it) also queue the rows a previous run left unsent, before any
        row queued since (they are older).  Returns the number recovered."""
        recovered = 0
        if recover:
            try:
                self.store.prune_outbox(time.time() - KEEP_DONE)
                rows = self.store.outbox_pending()
            except Exception as e:  # e.g. a full disk: reported by the first write that fails
                log.error("cannot read the outbox: %s", e)
                rows = []
            in_doubt = sum(1 for r in rows if r.state == "sending")
            for row in rows:
                if row.id not in self._known:
                    self._add(self._item_from_row(row))
                    recovered += 1
            if recovered:
                log.info(
                    "outbox: %d message(s) left unsent by the last run, %d of them possibly "
                    "sent already (in flight at the stop)",
                    recovered,
                    in_doubt,
                )
        self._started = True
        for key in list(self._queues):
            self._ensure_worker(key)
        if recover and self._adopter is None:
            self._adopter = asyncio.create_task(self._adopt_loop(), name="outbox:adopt")
        return recovered

    async def _adopt_loop(self) -> None:
        """Send rows another process stored and left (a one-shot ``chela heartbeat`` next to
        this daemon whose platform was down): pending, unknown here, untouched for a while."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), ADOPT_EVERY)
            if self._stopping.is_set():
                return
            try:
                rows = self.store.outbox_pending()
            except Exception as e:
                log.debug("outbox: cannot look for left rows: %s", e)
                continue
            idle = time.time() - ADOPT_IDLE
            for row in rows:
                if row.id not in self._known and row.updated < idle:
                    log.info("outbox: sending row %d left by another process", row.id)
                    self._add(self._item_from_row(row))

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Let sends in flight finish (up to ``grace``), then stop; unsent rows stay stored."""
        self._stopping.set()
        if self._adopter is not None:
            self._adopter.cancel()
        tasks = [*self._workers.values(), *([self._flusher] if self._flusher else [])]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._flush_unsaved()

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    # -------------------------------------------------------------------- queueing
    def _item_from_row(self, row: OutboxRow) -> _Item:
        out = out_from_json(row.payload)  # a new message, the item's own
        if row.nonce:  # every attempt sends it with the row's nonce
            out.idempotency_key = row.nonce
        return _Item(
            id=row.id,
            channel=row.channel,
            out=out,
            kind=row.kind,
            nonce=row.nonce,
            created=row.created,
            attempts=row.attempts,
        )

    def _add(self, item: _Item) -> None:
        q = self._queues.setdefault(item.key, deque())
        if item.id is not None:
            self._known.add(item.id)
            # keep id order (a recovered row is older than one queued during start-up)
            if q and q[-1].id is not None and q[-1].id > item.id:
                at = next(
                    (i for i, x in enumerate(q) if x.id is not None and x.id > item.id), len(q)
                )
                if at == 0 and self._workers.get(item.key):
                    at = 1  # never in front of a send in flight
                q.insert(at, item)
            else:
                q.append(item)
        else:
            q.append(item)
        if item.key in self._retrying:
            _settle(item.first, "queued")
        self._ensure_worker(item.key)

    def _ensure_worker(self, key: tuple[str, str, str]) -> None:
        if not self._started or self._stopping.is_set() or key in self._workers:
            return
        self._workers[key] = asyncio.create_task(self._work(key), name=f"outbox:{key[0]}")

    def enqueue(self, ids: list[int]) -> list[_Item]:
        """Queue rows already stored (e.g. by ``Store.commit_turn``)."""
        rows = self.store.outbox_rows([i for i in ids if i not in self._known])
        items = [self._item_from_row(r) for r in rows if r.state in OUTBOX_PENDING]
        for item in items:
            self._add(item)
        return items

    def enqueue_rows(self, rows: list[OutboxRow]) -> list[_Item]:
        """Queue rows the caller has just stored and holds as stored
        (``Store.commit_turn_rows``): ``enqueue`` without reading them back."""
        items = [
            self._item_from_row(r)
            for r in rows
            if r.id not in self._known and r.state in OUTBOX_PENDING
        ]
        for item in items:
            self._add(item)
        return items

    def submit(
        self,
        channel: str,
        out: OutboundMessage,
        *,
        kind: str,
        inbound_id: int | None = None,
        agent: str = "",
    ) -> _Item:
        """Store and queue one message.  When the store cannot be written (a full disk) the
        message is still sent, from memory."""
        try:
            ids = self.store.add_outbox(
                channel, [out_json(out)], kind=kind, inbound_id=inbound_id, agent=agent
            )
        except Exception as e:
            if storage_full(e):
                self.storage.failed(e, f"queueing a {kind} message")
            else:
                log.exception("cannot store a %s message for %s; sending it anyway", kind, channel)
            from bot.store import _new_nonce

            item = _Item(None, channel, out, kind, _new_nonce(), time.time())
            self._add(item)
            return item
        self.storage.ok()
        items = self.enqueue(ids)
        return items[0]

    @staticmethod
    async def first_attempt(items: list[_Item]) -> list[str]:
        """Wait until each item was tried once (or waits behind a chat's retry):
        'sent', 'failed' or 'queued' (being retried)."""
        return [await asyncio.shield(i.first) for i in items]

    @staticmethod
    async def final(items: list[_Item]) -> list[str]:
        return [await asyncio.shield(i.done) for i in items]

    # ---------------------------------------------------------------------- workers
    async def _work(self, key: tuple[str, str, str]) -> None:
        q = self._queues[key]
        backoff = Backoff(self.retry_initial, self.retry_max)
        try:
            while q and not self._stopping.is_set():
                item = q[0]
                result, wait = await self._attempt(item)
                if result == "retry":
                    self._retrying.add(key)
                    for waiting in q:
                        _settle(waiting.first, "queued")
                    pause = max(backoff.next(), wait or 0.0)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), pause)
                    continue
                self._retrying.discard(key)
                backoff.reset()
                q.popleft()
                if item.id is not None:
                    self._known.discard(item.id)
                _settle(item.first, result)
                _settle(item.done, result)
        finally:
            self._retrying.discard(key)
            if self._workers.get(key) is asyncio.current_task():
                del self._workers[key]
            if not q:
                self._queues.pop(key, None)
            elif not self._stopping.is_set():
                self._ensure_worker(key)  # cancelled from outside: keep going

    def _write(self, what: str, fn) -> bool:
        try:
            fn()
        except Exception as e:
            if storage_full(e):
                self.storage.failed(e, what)
            else:
                log.exception("outbox: %s failed", what)
            return False
        self.storage.ok()
        return True

    async def _attempt(self, item: _Item) -> tuple[str, float | None]:
        """One send: 'sent', 'failed', or 'retry' (with the platform's retry_after)."""
        channel = account_key(item.channel, item.out.account)
        where = f"channel={channel} chat={item.out.chat_id} kind={item.kind} row={item.id}"
        age = time.time() - item.created
        if age > self.max_age:
            log.error(
                "outbox: giving up on a message not delivered within %.0fs after %d attempt(s) %s",
                self.max_age,
                item.attempts,
                where,
            )
            self._finish(item, "failed", error="not delivered within delivery.max_age")
            return "failed", None
        # the adapter of the row's own account, never another account's (a reply leaves
        # through the account its message came in on)
        ch = adapter_for(self.channels, item.channel, item.out.account)
        if ch is None:
            log.error("outbox: channel %s is not configured; dropping %s", channel, where)
            self._finish(item, "failed", error="channel not configured")
            return "failed", None
        row_id = item.id
        if row_id is not None and not self._write(
            "marking a message as being sent", lambda: self.store.outbox_sending(row_id)
        ):
            return "retry", None  # nothing goes out without its 'sending' mark
        item.attempts += 1
        out = item.out
        if item.nonce and out.idempotency_key != item.nonce:
            out = dataclasses.replace(out, idempotency_key=item.nonce)
        try:
            async with self._slots:
                ids = await ch.send(out)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            permanent, retry_after = classify(e)
            if permanent or not ch.capabilities.proactive:
                log.warning("outbox: delivery failed for good %s: %s", where, e)
                self._finish(item, "failed", error=str(e)[:500])
                return "failed", None
            (log.warning if item.attempts == 1 else log.info)(
                "outbox: delivery failed %s attempt=%d (retrying%s): %s",
                where,
                item.attempts,
                f" after {retry_after:g}s" if retry_after else "",
                e,
            )
            if item.id is not None:
                row_id, err = item.id, str(e)[:500]
                self._write(
                    "recording a failed send",
                    lambda: self.store.outbox_done(row_id, "queued", error=err),
                )
            return "retry", retry_after
        self._finish(item, "sent", sent_ids=[str(i) for i in ids or []])
        return "sent", None

    def _finish(
        self,
        item: _Item,
        state: str,
        *,
        sent_ids: list[str] | None = None,
        error: str | None = None,
    ) -> None:
        if item.id is None:
            return
        row_id = item.id
        if state == "failed" and self.notices is not None:
            self.notices.publish("delivery.failed", failed_item(item, error))
        if not self._write(
            f"recording a {state} message",
            lambda: self.store.outbox_done(row_id, state, sent_ids=sent_ids, error=error),
        ):
            # never send it again: remember the outcome and write it when space is back
            self._unsaved[row_id] = (state, sent_ids, error)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush_loop(), name="outbox:flush")

    async def _flush_loop(self) -> None:
        backoff = Backoff(self.retry_initial, self.retry_max)
        while self._unsaved and not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), backoff.next())
            self._flush_unsaved()

    def _flush_unsaved(self) -> None:
        for row_id, (state, sent_ids, error) in list(self._unsaved.items()):
            if not self._write(
                "recording a sent message",
                lambda r=row_id, s=state, i=sent_ids, e=error: self.store.outbox_done(
                    r, s, sent_ids=i, error=e
                ),
            ):
                return
            del self._unsaved[row_id]
