"""The Control UI's web turn: a message typed in the browser is an
inbound message of channel ``web`` with the owner's identity, in the session the page names.

It is stored first (the inbound row's ``message_id`` is the page's ``client_msg_id``, so a
second POST with the same id is a duplicate the store refuses: no second turn, no second
model call), queued on the session's lane behind whatever runs there, and answered by the
same stages as a chat message: commands from the command table, ``prepare`` (attachments,
the user turn), the one ``TurnRequest`` builder, ``run`` (cancellable by ``/stop`` and the
UI's Stop), ``reply`` (NO_REPLY, tags) and ``commit`` (one transaction).  So trust,
sessions, compaction, usage and budgets apply unchanged.  The only difference: the reply
goes to the page's stream (a :class:`WebSink`), not to the outbox."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from bot.conversation.commands import COMMANDS, command_call, run_command
from bot.conversation.commands import controls
from bot.conversation.pipeline import Conversation
from bot.conversation.reply import chat_reply
from bot.conversation.run import Stopped
from bot.delivery.previews import StreamEvent, StreamText
from bot.rules.admission import Verdict
from channels.base import InboundMessage, MediaItem

log = logging.getLogger("chela.web")

CHANNEL = "web"
OWNER = Verdict("serve", "owner", "Control UI session")


def answer_key(session: str, client_msg_id: str) -> str:
    """The kv key under which a web message's answer is recorded (with the turn)."""
    return f"ui:web:{session}:{client_msg_id}"


class WebSink(Protocol):
    """Where a web turn's progress goes (the page's stream, bot/ui/turns.py)."""

    def push(self, ev: StreamEvent) -> None: ...

    def finished(self, *, turn: str, text: str, stopped: bool, usage: dict[str, Any]) -> None:
        """``turn``: the stored turn's id ("" when nothing was stored); ``text``: the
        reply as delivered (for a stopped turn, what was shown so far)."""

    def failed(self, code: str, message: str) -> None: ...


@dataclass(frozen=True)
class WebMessage:
    session: str
    text: str
    client_msg_id: str
    attachments: tuple[MediaItem, ...] = ()

    def inbound(self) -> InboundMessage:
        return InboundMessage(
            channel=CHANNEL,
            chat_id=self.session,
            sender_id="owner",
            sender_name="owner",
            text=self.text,
            message_id=self.client_msg_id,
            timestamp=time.time(),
            attachments=list(self.attachments),
        )


class _Live(StreamText):
    """The turn's visible text (the preview filter: never NO_REPLY, a tag, ``<think>`` or
    ``<tool_call>`` text) and its tool calls, as they happen."""

    def __init__(self, sink: WebSink) -> None:
        self._out = sink
        super().__init__(self._sink)

    def _sink(self, kind: str, value: Any) -> None:
        if kind == "text":
            self._out.push(StreamEvent("text", text=value))
        elif kind == "usage":
            self._out.push(StreamEvent("usage", usage=value))
        elif kind == "step":
            self._out.push(StreamEvent("step"))

    def push(self, ev: StreamEvent) -> None:
        if ev.kind in ("tool_start", "tool_end"):
            self.flush()
            self._out.push(ev)
            return
        super().push(ev)

    @property
    def shown(self) -> str:
        return self.sent


class WebTurns:
    """Web messages into the conversation's stages (one per daemon)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conv = conversation
        self._tasks: set[asyncio.Task] = set()
        self.set_aside()

    def set_aside(self) -> int:
        """Web messages a previous run left unanswered are not answered at start-up (their
        page has gone, and the reply has nowhere to go): they wait for the page to send
        them again (same ``client_msg_id``), which answers them once."""
        store, n = self.conv.store, 0
        for row in store.unfinished_inbound():
            if row.payload.get("channel") == CHANNEL:
                store.set_inbound_status(row.id, "skipped")
                n += 1
        if n:
            log.info("%d web message(s) of the last run wait for their page to send them again", n)
        return n

    def _resume(self, m: WebMessage, sink: WebSink) -> int | None:
        """A message seen before that a previous run left unanswered: answered now."""
        store = self.conv.store
        rows = store.inbound_with_status("skipped", channel=CHANNEL, session_key=m.session)
        row = next((r for r in rows if r.payload.get("message_id") == m.client_msg_id), None)
        if row is None:
            return None
        store.requeue_inbound(row.id, m.session)
        msg, rid = InboundMessage.from_json(row.payload), row.id
        self._queue(m.session, lambda: self.process(rid, msg, sink), sink)
        return rid

    async def submit(self, m: WebMessage, sink: WebSink) -> int | None:
        """Store the message and queue its turn; None when this ``client_msg_id`` was seen
        in this session before and answered or running (nothing is started)."""
        conv, msg = self.conv, m.inbound()
        inbound_id = await conv.commit.write(
            "storing a web message",
            lambda: conv.store.add_inbound(
                CHANNEL,
                msg.account,
                m.session,
                m.client_msg_id,
                m.session,
                msg.to_json(),
                conv.cfg.agent.id,  # the web chat talks to the default agent
            ),
        )
        if inbound_id is None:
            return self._resume(m, sink)
        call = command_call(msg, conv.cfg, m.session, OWNER, on_arrival=True)
        if call is not None and COMMANDS[call.name].immediate:  # /stop, /approve: now
            task = asyncio.ensure_future(self._command(inbound_id, call, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return inbound_id
        self._queue(m.session, lambda: self.process(inbound_id, msg, sink), sink)
        return inbound_id

    def _queue(self, key: str, job: Any, sink: WebSink) -> None:
        """On the session's lane; a job the lane drops (the daemon stops before it ran)
        ends its stream with ``shutting_down`` (the message stays stored)."""

        def dropped(fut: asyncio.Future) -> None:
            if fut.cancelled() or fut.exception() is not None:
                sink.failed("shutting_down", "The daemon is stopping; send the message again.")

        self.conv.lanes.submit(key, job).add_done_callback(dropped)

    async def process(self, inbound_id: int, msg: InboundMessage, sink: WebSink) -> None:
        key = msg.chat_id
        try:
            call = command_call(msg, self.conv.cfg, key, OWNER, on_arrival=False)
            if call is not None:
                await self._command(inbound_id, call, sink)
            else:
                await self._turn(inbound_id, msg, key, sink)
        except asyncio.CancelledError:
            sink.failed("shutting_down", "The daemon is stopping; send the message again later.")
            raise
        except Exception:
            log.exception("web turn failed session=%s", key)
            sink.failed("model_error", "The turn failed; the daemon's log says why.")
            try:
                self.conv.store.set_inbound_status(inbound_id, "failed")
            except Exception:
                log.exception("could not record the failed web turn session=%s", key)

    async def _command(self, inbound_id: int, call: Any, sink: WebSink) -> None:
        replies = await run_command(call, self.conv.command_ports)
        await self.conv.commit.write(
            "storing a command answer",
            lambda: self.conv.store.commit_turn(call.key, "", [], inbound_id=inbound_id),
        )
        sink.finished(turn="", text="\n\n".join(replies.texts), stopped=False, usage={})

    async def _turn(self, inbound_id: int, msg: InboundMessage, key: str, sink: WebSink) -> None:
        conv, prep = self.conv, self.conv.prepare
        try:  # Stop during the attachments' preparation stops the turn too
            turn = await conv.runner.preparing(
                key, msg.sender_id, prep.user_turn(msg, key, OWNER, pending=[], was_mentioned=None)
            )
        except Stopped:
            turn = prep.unread_turn(msg, pending=[], was_mentioned=None)
            req = prep.request(msg, key, turn.text, OWNER, include_intro=False)
            await self._stopped(inbound_id, msg, req, uuid.uuid4().hex, "", sink)
            return
        req = prep.request(msg, key, turn.text, OWNER, include_intro=False, media=turn.media)
        live = _Live(sink)
        model, effort = controls.session_choice(conv.cfg, conv.store, key)  # one read
        outcome = await conv.runner.run(
            req, msg, None, None, lambda: live, model=model, effort=effort
        )
        if outcome.result is None:  # stopped: the user message stays, no answer
            await self._stopped(inbound_id, msg, req, outcome.turn, live.shown, sink)
            return
        result = outcome.result
        reply = await chat_reply(conv.cfg, None, msg, req, result, reply_mode="off")
        live.close()
        text = reply.outs[0].text if reply.outs else ""
        state = {answer_key(key, msg.message_id): {"turn": result.turn_id}}
        await conv.commit.turn(key, result, inbound_id, [], state)
        if result.error:
            code = "budget" if result.error_kind == "budget" else "model_error"
            sink.failed(code, text or str(result.error))
            return
        sink.finished(turn=result.turn_id, text=text, stopped=False, usage=dict(result.usage))

    async def _stopped(
        self, inbound_id: int, msg: InboundMessage, req: Any, turn: str, shown: str, sink: WebSink
    ) -> None:
        """Keep the user message, store no answer; a replay says it was stopped."""
        record = {"turn": "", "stopped": True, "text": shown}
        state = {answer_key(msg.chat_id, msg.message_id): record}
        await self.conv.commit.stopped(inbound_id, msg.chat_id, req, turn, state=state)
        sink.finished(turn="", text=shown, stopped=True, usage={})
