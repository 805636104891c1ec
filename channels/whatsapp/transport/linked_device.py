"""WhatsApp as a linked device, through neonize (whatsmeow): the same :class:`Transport` as
the Agent Platform, so the adapter sends, marks read, shows typing and fetches files alike.

neonize's client runs in the daemon and pushes events; the handlers here keep the guards of
a linked number and queue ``InboundMessage`` values and state changes for ``poll`` (the
offset is not used: the queue is the position).  Guards: our own messages are dropped
(``IsFromMe``, except the owner's "message yourself" chat, and the ids we sent); a sender
seen by LID and by phone number is one id; groups only from the allowlist (one log line per
dropped group); logged out, a replaced stream (440), a ban or an outdated client stop the
account with a final state and an error line instead of reconnecting; other drops reconnect
with backoff behind a circuit breaker; one process per session database (a lock); sends
paced with jitter; never a first message to someone who has not written (the owner
excepted).  The client comes from ``client_factory`` (neonize's by default): the seam the
tests use to drive this code with neonize's own event objects."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from channels.base import ChannelError, InboundMessage
from channels.retry import Backoff
from channels.util import BoundedLRU
from channels.whatsapp.linked import ids, media, messages, session
from channels.whatsapp.linked.guards import Breaker, GroupGate, Memory
from channels.whatsapp.linked.messages import Received, Who
from channels.whatsapp.transport import ApiError
from channels.whatsapp.transport.agent_platform import Pacer

log = logging.getLogger("chela.channels.whatsapp")

RECENT = 500  # inbound messages kept for receipts, typing, quotes and files
SENT = 2000  # ids of messages we sent, to drop their echo
UNOFFICIAL = (
    "whatsapp[%s]: linked device: WhatsApp Web's unofficial protocol (through neonize); "
    "WhatsApp may restrict or ban the number; use a dedicated number"
)
HALTS = {  # event → (final state, why): the account stays down until Chela restarts
    "LoggedOutEv": ("logged_out", "the device was logged out (removed on the phone?)"),
    "StreamReplacedEv": (
        "logged_out",
        "another client took over this session (stream replaced, 440)",
    ),
    "TemporaryBanEv": ("banned", "WhatsApp banned the number for a while"),
    "ClientOutdatedEv": ("outdated", "WhatsApp refuses this client version (update neonize)"),
}


class LinkedDevice:
    """One linked WhatsApp number (one session database)."""

    def __init__(
        self,
        session_db: Path,
        *,
        lock: session.SessionLock,
        memory: Memory,
        account: str = "default",
        owners: Collection[str] = (),
        group_policy: str = "disabled",
        groups: Collection[str] = (),
        per_window: int = 12,
        window: float = 60.0,
        jitter: float = 1.0,
        client_factory: session.ClientFactory | None = None,
        backoff: Backoff | None = None,
        breaker: Breaker | None = None,
        cool_off: float = 600.0,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.session_db, self.account = session_db, account
        self.owners = tuple(owners)
        self.gate = GroupGate(group_policy, groups, account)
        self.memory = memory
        self.pacer, self.jitter = Pacer(per_window, window), jitter
        self.factory = client_factory
        self.backoff = backoff or Backoff(2.0, 120.0, jitter=0.2)
        self.breaker, self.cool_off = breaker or Breaker(), cool_off
        self.sleep = sleep
        self.lock = lock
        self.queue: asyncio.Queue[InboundMessage | str] = asyncio.Queue()
        self.recent = BoundedLRU(RECENT)  # message id → Received
        self.sent = BoundedLRU(SENT)  # ids of messages we sent
        self.own: frozenset[str] = frozenset()
        self.own_jid = ""
        self.qr: str | None = None
        self.client: Any = None
        self.files = media.Outgoing()
        self._runner: asyncio.Task[None] | None = None
        self._halted = False
        self._taking: set[str] = set()  # ids of messages being taken in right now
        self._in_order = asyncio.Lock()  # a LID lookup must not let a later message pass
        self._paused = False  # the breaker tripped: the next connect waits cool_off

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        if self.client is not None:
            return
        if self.factory is None:
            session.require_neonize()
        session.take(self.lock, self.session_db)  # SessionBusy: another process has it
        try:
            session.prepare(self.session_db)
        except OSError as e:
            self.lock.release()
            raise ChannelError(f"whatsapp: cannot create {self.session_db}: {e}") from None
        log.warning(UNOFFICIAL, self.account)
        self.client = (self.factory or session.neonize_client)(str(self.session_db))
        self._subscribe(self.client)
        self._state("connecting")
        self._runner = asyncio.create_task(self._run(), name=f"whatsapp-linked-{self.account}")

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        client, self.client = self.client, None
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        if client is not None:
            await _disconnect(client)
        self.lock.release()

    def pairing_qr(self) -> str | None:
        return self.qr

    def _subscribe(self, client: Any) -> None:
        from neonize.aioze import events as ev

        client.qr(self._on_qr)
        client.event(ev.ConnectedEv)(self._on_connected)
        client.event(ev.DisconnectedEv)(self._on_disconnected)
        client.event(ev.PairStatusEv)(self._on_pair)
        client.event(ev.MessageEv)(self._on_message)
        for name, (state, why) in HALTS.items():
            client.event(getattr(ev, name))(functools.partial(self._on_halt, state, why))

    async def _run(self) -> None:
        """Keep neonize's connection task running: when it ends on its own, connect again
        after a backoff (a long pause once the breaker trips), until a final state."""
        while not self._halted:
            why = "the connection ended"
            try:
                await (await self.client.connect())
            except asyncio.CancelledError:
                raise
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
            if self._halted:
                return
            paused, self._paused = self._paused, False
            wait = self.cool_off if paused or self.breaker.record() else self.backoff.next()
            log.warning("whatsapp[%s]: %s; connecting again in %.0fs", self.account, why, wait)
            self._state(f"reconnecting: {why}")
            await self.sleep(wait)

    def _state(self, state: str) -> None:
        self.queue.put_nowait(state)

    # ------------------------------------------------------------------ events
    async def _on_qr(self, _: Any, data: bytes) -> None:
        self.qr = data.decode(errors="replace")
        self._state("pairing: scan the QR code (chela whatsapp login, or the Control UI)")

    async def _on_pair(self, _: Any, ev: Any) -> None:
        if ev.Status == type(ev).SUCCESS:
            self.qr = None
            log.info("whatsapp[%s]: linked as %s", self.account, session.jid_text(ev.ID))
        else:
            log.error("whatsapp[%s]: pairing failed: %s", self.account, ev.Error)

    async def _on_connected(self, client: Any, _: Any) -> None:
        self.qr = None
        self.backoff.reset()
        try:
            me = await client.get_me()
            self.own = frozenset(u for u in (me.JID.User, me.LID.User) if u)
            self.own_jid = session.jid_text(me.JID)
        except Exception as e:  # until the next connect mentions of us and replies to us miss
            log.warning(
                "whatsapp[%s]: could not read our own number and LID (%s: %s); mentions of "
                "and replies to this number are not recognised until it connects again",
                self.account,
                type(e).__name__,
                e,
            )
        self._state("connected")

    async def _on_disconnected(self, client: Any, _: Any) -> None:
        """neonize reconnects by itself; too many drops in a span trip the breaker: the
        client is stopped and ``_run`` waits the pause before connecting again."""
        if self._halted:
            return
        if self.breaker.record():
            log.error(
                "whatsapp[%s]: the connection keeps dropping; pausing %.0fs",
                self.account,
                self.cool_off,
            )
            self._paused = True
            self._state(
                f"disconnected: the connection keeps dropping; pausing {self.cool_off:.0f}s"
            )
            await _disconnect(client)
            return
        self._state("reconnecting: the connection dropped")

    async def _on_halt(self, state: str, why: str, client: Any, _: Any) -> None:
        if self._halted:
            return
        self._halted = True
        self.qr = None
        log.error(
            "whatsapp[%s]: %s; the account is stopped until Chela restarts "
            "(link it again with `chela whatsapp login`)",
            self.account,
            why,
        )
        self._state(
            f"{state}: {why}; link it again with `chela whatsapp login`, then restart Chela"
        )
        await _disconnect(client)

    async def _on_message(self, client: Any, ev: Any) -> None:
        """neonize runs each handler as its own task, so one message delivered twice can be
        here twice at once: the second is dropped while the first is being taken; and a
        message waiting on a LID lookup would let the next one pass: they are taken one at a
        time, in the order neonize started their handlers."""
        mid = ev.Info.ID
        if mid in self._taking:
            return
        self._taking.add(mid)
        try:
            async with self._in_order:  # one at a time, in arrival order (the lock is FIFO)
                msg = await self._inbound(client, ev)
                if msg is not None:
                    self.queue.put_nowait(msg)
        except Exception:  # a bug here must not stay silent (neonize drops handler errors)
            log.exception("whatsapp[%s]: skipping a message", self.account)
        finally:
            self._taking.discard(mid)

    async def _inbound(self, client: Any, ev: Any) -> InboundMessage | None:
        src, mid = ev.Info.MessageSource, ev.Info.ID
        if mid in self.sent or (src.IsFromMe and not self._self_chat(src)):
            return None  # our own echo (the owner's "message yourself" chat excepted)
        if mid in self.recent:
            return None  # delivered again (after a reconnect): taken once
        if src.Chat.Server not in ids.CHATS:
            return None  # status updates (status@broadcast), channels (newsletters): no chat
        group = src.IsGroup or src.Chat.Server == ids.GROUP
        chat = ids.chat_id(src.Chat.User, src.Chat.Server)
        if group and not self.gate.allows(chat):
            return None
        sender = await self._person(client, src)
        who = Who(chat if group else sender, sender, group, self.own)
        msg = messages.inbound_message(ev, who, self.account)
        if msg is None:
            fields = ", ".join(f.name for f, _ in ev.Message.ListFields()) or "empty"
            log.info(
                "whatsapp[%s]: skipping a message (%s): nothing to answer", self.account, fields
            )
            return None
        jid = f"{src.Sender.User}@{src.Sender.Server}"
        self.recent.put(mid, Received(mid, src.Chat, src.Sender, jid, ev.Message))
        self.memory.note_wrote(msg.chat_id)
        return msg

    def _self_chat(self, src: Any) -> bool:
        return not src.IsGroup and src.Chat.User in self.own

    async def _person(self, client: Any, src: Any) -> str:
        """The sender's one id: by number whenever it is known (from the event's alt
        field, what was learned before, or neonize's LID store)."""
        pn = lid = ""
        for jid in (src.Sender, src.SenderAlt):
            if jid.Server == ids.PN:
                pn = pn or jid.User
            elif jid.Server == ids.LID:
                lid = lid or jid.User
        if lid and not pn:
            pn = self.memory.pn_for(lid) or await _pn_from_lid(client, src.Sender)
        self.memory.learn(lid, pn)
        return ids.person_id(pn, lid)

    # ------------------------------------------------------------------ the Transport
    async def poll(self, offset: int | None, timeout: int) -> list[InboundMessage | str] | None:
        """What was queued (waiting up to ``timeout`` seconds for the first)."""
        try:  # not wait_for: it can swallow a cancellation that meets the item (Python 3.11)
            async with asyncio.timeout(timeout):
                first = await self.queue.get()
        except TimeoutError:
            return None
        items = [first]
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        return items

    def may_send(self, chat: str) -> bool:
        """Only to whom wrote first, or the owner."""
        return self.memory.has_written(chat) or any(ids.same_person(chat, o) for o in self.owners)

    async def send_message(self, payload: dict[str, Any]) -> str:
        to = str(payload.get("to", ""))
        if not self.may_send(to):
            raise ApiError(
                "send",
                403,
                0,
                f"{to} has never written to this number; Chela does not start conversations",
            )
        client = self._client()
        message = await self._build(client, payload)
        await self.pacer.take()
        if self.jitter:
            await self.sleep(random.uniform(0, self.jitter))
        from neonize.proto.Neonize_pb2 import JID

        user, server = ids.address(to)
        try:
            resp = await client.send_message(JID(User=user, Server=server), message)
        except Exception as e:  # it may have gone out: not sent again
            raise ApiError("send", 0, 0, f"{type(e).__name__}: {e}", unknown_outcome=True) from None
        self.sent.put(resp.ID)
        return str(resp.ID)

    async def _build(self, client: Any, payload: dict[str, Any]) -> Any:
        mtype = str(payload.get("type", "text"))
        if mtype != "text":
            return await self.files.message(client, mtype, payload[mtype])
        quoted = (payload.get("context") or {}).get("message_id")
        return messages.text_message(payload["text"]["body"], self.recent.get(quoted or ""))

    async def mark_read(self, payload: dict[str, Any]) -> None:
        """A read receipt, or (with ``typing_indicator``) "typing…" in that message's chat."""
        got = self.recent.get(str(payload.get("message_id", "")))
        if got is None:
            return
        from neonize.utils.enum import ChatPresence, ChatPresenceMedia, ReceiptType

        client = self._client()
        try:
            if "typing_indicator" in payload:
                await client.send_chat_presence(
                    got.chat,
                    ChatPresence.CHAT_PRESENCE_COMPOSING,
                    ChatPresenceMedia.CHAT_PRESENCE_MEDIA_TEXT,
                )
            else:
                await client.mark_read(
                    got.id, chat=got.chat, sender=got.sender, receipt=ReceiptType.READ
                )
        except Exception as e:
            raise ChannelError(f"whatsapp: {type(e).__name__}: {e}") from None

    async def upload(self, path: Path, mime: str) -> str:
        """Kept until the send: the file's keys depend on the message type it goes as."""
        return self.files.keep(path, mime)

    async def download(self, media_id: str, dest: Path, max_bytes: int) -> tuple[str, int]:
        return await media.fetch(self._client(), self.recent.get(media_id), dest, max_bytes)

    def _client(self) -> Any:
        if self.client is None or self._halted:
            raise ApiError("whatsapp: the linked device is not connected", 0)
        return self.client


async def _pn_from_lid(client: Any, jid: Any) -> str:
    try:
        found = await client.get_pn_from_lid(jid)
    except Exception:  # not in neonize's store yet
        return ""
    return str(found.User or "")


async def _disconnect(client: Any) -> None:
    """Stop neonize's client (its connection task ends; no automatic reconnect)."""
    with contextlib.suppress(Exception):
        await client.disconnect()
    with contextlib.suppress(Exception):
        await client.stop()
