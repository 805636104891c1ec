"""The conversation pipeline (docs/architecture.md "How a message flows"): inbound messages → access policy,
group gating, commands, turns, delivery.

``Conversation.on_inbound`` is the sink every channel adapter calls.  It stores the message
(so the adapter may acknowledge the platform) and queues the work on the session's lane;
the lane runs one turn at a time per session, in arrival order.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bot.conversation import pairing_requests as pairing
from bot.rules.admission import Verdict, admit, channel_policy, session_key
from bot.agent.turn import Agent, TurnRequest
from bot.config import ChannelPolicy, Config
from bot.conversation.approvals import Approvals
from bot.conversation.commands import COMMANDS, CommandPorts, command_call, run_command
from bot.conversation.commands import controls
from bot.conversation import api as api_turn
from bot.conversation import failures, gating
from bot.conversation import commit
from bot.conversation.commit import Commit, store_backoff
from bot.conversation.events import TurnEvents
from bot.conversation import pairing as pairing_stage
from bot.conversation.intake import Approved, valid_text
from bot.conversation.prepare import Prepare, file_root
from bot.conversation.reply import chat_reply, speaker, stopped_reply
from bot.conversation.run import Run, Stopped, live_output
from bot.conversation.dispatch import dispatch
from bot.conversation.types import (
    CommandCall,
    Dispatched,
    HistoryOnly,
    Skipped,
    TurnCall,
    TurnOutcome,
)
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.conversation.lanes import SessionLanes
from bot.store import Store, storage_full
from bot.delivery.previews import PREVIEW_INTERVAL, Preview, StreamText
from channels.base import (
    Capabilities,
    Channel,
    InboundMessage,
    OutboundMessage,
)
from channels.best_effort import best_effort

log = logging.getLogger("chela.conversation")  # the name operators grep for


class Conversation:
    def __init__(
        self,
        cfg: Config,
        store: Store,
        agent: Agent,
        lanes: SessionLanes,
        channels: dict[str, Channel],
        outbox: Outbox,
        *,
        approvals: Approvals | None = None,
        events: TurnEvents | None = None,
        notices: pairing.NoticesPort | None = None,
    ):
        self.cfg = cfg
        self.store = store
        self.agent = agent
        self.lanes = lanes
        self.channels = channels
        self.outbox = outbox  # every reply is a stored row it sends (built by the daemon)
        self._name_re = gating.name_pattern(cfg.agent.name)
        self.approved = Approved(store)
        self.accepting = True
        self._tasks: set[asyncio.Task] = set()
        self._queued: set[int] = set()  # inbound ids queued or running now
        self._recovered = False  # until recover() ran, intake only stores
        self._started = time.time()
        # live previews: the spacing of their edits, on an injectable clock
        self.preview_interval = PREVIEW_INTERVAL
        self.preview_clock: Callable[[], float] = time.monotonic
        self.preview_sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
        self.events = events or TurnEvents()  # turn progress, for the UI and the HTTP stream
        self.notices = notices  # what the owner may act on (pairing requests), for the UI
        self.runner = Run(agent, self.events)
        # the command table's reach (/approve and /deny answer held exec commands, /stop
        # stops the running turn)
        self.command_ports = CommandPorts(
            cfg,
            store,
            agent,
            turn_request=self._command_request,
            approvals=approvals,
            turns=self.runner,
            notices=notices,
        )
        self.prepare = Prepare(cfg, agent, channels, store)
        self.commit = Commit(store, outbox.storage, lambda: self.accepting)

    def _background(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------------- policy
    def policy(self, channel: str) -> ChannelPolicy | None:
        return channel_policy(self.cfg, channel)

    def admit(self, msg: InboundMessage) -> Verdict:
        return admit(msg, self.cfg, self.approved)

    def session_key(self, msg: InboundMessage, verdict: Verdict | None = None) -> str:
        verdict = verdict or self.admit(msg)
        return session_key(msg, self.cfg, verdict.trust if verdict.served else "guest")

    # ------------------------------------------------------------------------ intake
    async def on_inbound(self, msg: InboundMessage) -> None:
        """The sink: decide admission, persist, then queue.  Returns once the message is
        stored (or deliberately dropped)."""
        msg = valid_text(msg)
        verdict = self.admit(msg)
        if verdict.action == "drop":
            log.info(
                "not served channel=%s chat=%s sender=%s reason=%s",
                msg.channel,
                msg.chat_id,
                msg.sender_id,
                verdict.reason,
            )
            return
        key = self.session_key(msg, verdict)
        message_id = msg.message_id or msg.raw_id or f"t{time.time_ns()}"
        inbound_id = await self.commit.write(
            "storing an inbound message",
            lambda: self.store.add_inbound(
                msg.channel, msg.account, msg.chat_id, message_id, key, msg.to_json()
            ),
        )
        if inbound_id is None:
            log.info(
                "duplicate message ignored channel=%s chat=%s id=%s",
                msg.channel,
                msg.chat_id,
                message_id,
            )
            return
        if verdict.action == "pair":
            # kept so that the owner's approval can answer it; never processed before that.
            # Only the newest one per sender is kept: a stranger cannot fill the database.
            self.store.hold_for_pairing(inbound_id, key)
            if self.accepting:
                self.lanes.submit(key, lambda: self._pairing_reply(msg))
            return
        if not self.accepting or not self._recovered:
            # stored; processed after restart, or (during start-up) by recover(), in arrival
            # order behind the messages the last run left unanswered
            return
        if verdict.reason == "paired":  # a message held until `chela pairing approve` goes first
            await self.pairing_approved(msg.channel, msg.sender_id)
        call = command_call(msg, self.cfg, key, verdict, on_arrival=True)
        if call and COMMANDS[call.name].immediate:
            # answered now (a turn waiting for it may hold this session's lane); the reply
            # is delivered in the background so the platform's intake never waits on it
            self._background(self._immediate(inbound_id, call))
            return
        self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, verdict))

    def _queue(self, key: str, inbound_id: int, job) -> bool:
        """Queue the work of one stored message, at most once: live intake and ``recover``
        (channels start before it runs) may both see a message that arrives during start-up."""
        if inbound_id in self._queued:
            return False
        self._queued.add(inbound_id)

        async def run():
            try:
                return await job()
            finally:
                self._queued.discard(inbound_id)

        self.lanes.submit(key, run)
        return True

    def stop_accepting(self) -> None:
        """The daemon stops: new messages are stored only (answered after the restart), and
        a full disk no longer holds a write back."""
        self.accepting = False

    async def recover(self) -> int:
        """Queue stored messages that were never answered (crash or restart); the daemon
        started the outbox, with what the last run left unsent, just before."""
        self._recovered = True  # from here on intake queues (no await before the loop below)
        queued = 0
        for row in self.store.unfinished_inbound():
            msg = InboundMessage.from_json(row.payload)
            if msg.api and msg.timestamp < self._started:
                # an HTTP API call of the last run: its caller has gone (it got a 503)
                self.store.set_inbound_status(row.id, "skipped")
                continue

            def job(r=row, m=msg):
                return self._process(r.id, m, r.session_key, None)

            queued += self._queue(row.session_key, row.id, job)
        if queued:
            log.info("recovering %d unanswered message(s)", queued)
        return queued

    async def pairing_approved(self, channel: str, sender_id: str) -> bool:
        """The owner approved a pairing request (``chela pairing approve``): queue the message
        that asked (the newest one; older ones are dropped), then tell the sender."""
        probe = InboundMessage(channel=channel, chat_id=sender_id, sender_id=sender_id, text="")
        held = self.store.inbound_with_status(
            "pairing", session_key=session_key(probe, self.cfg, "guest")
        )
        if not held:
            return False
        last = held[-1]  # on_inbound keeps only the newest one
        msg = InboundMessage.from_json(last.payload)
        verdict = self.admit(msg)
        if not verdict.served:
            return False
        key = self.session_key(msg, verdict)
        self.store.requeue_inbound(last.id, key)
        self._queue(key, last.id, lambda: self._process(last.id, msg, key, verdict))
        with best_effort(log, "telling an approved sender", level=logging.WARNING):
            await send.deliver(
                self.outbox,
                msg.channel,
                OutboundMessage(
                    chat_id=msg.chat_id, account=msg.account, text=pairing.approved_message()
                ),
                kind="pairing",
            )
        return True

    # --------------------------------------------------------------------- processing
    async def _pairing_reply(self, msg: InboundMessage) -> None:
        await pairing_stage.reply(self.store, self.outbox, msg, self.cfg, notices=self.notices)

    async def _process(
        self, inbound_id: int, msg: InboundMessage, key: str, verdict: Verdict | None
    ) -> None:
        started = time.perf_counter()
        later = False  # retried after a full disk: the message is not finished
        try:
            if verdict is None:  # recovered after a restart: the config may have changed since
                verdict = self.admit(msg)
            step = dispatch(
                msg,
                key,
                verdict,
                command=lambda: command_call(msg, self.cfg, key, verdict, on_arrival=False),
                addressed=lambda: self._addressed(msg, key),
            )
            if not isinstance(step, TurnCall):
                await self._settle(inbound_id, step)
                return
            await self._turn(inbound_id, msg, key, verdict)
            log.info(
                "turn done channel=%s session=%s trust=%s ms=%.0f",
                msg.channel,
                key,
                verdict.trust,
                (time.perf_counter() - started) * 1000,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if storage_full(e):
                # a full disk: no apology, the answer comes once space is back (the stored
                # message stays 'pending'; a restart would answer it too)
                self.outbox.storage.failed(e, "answering a message")
                later = True
                self._background(self._retry_later(inbound_id, msg, key))
                return
            log.exception("turn failed channel=%s session=%s", msg.channel, key)
            # the apology first: it must not depend on the store (the outbox sends it from
            # memory when it cannot be stored)
            with best_effort(log, "sending the apology for a failed turn", level=logging.WARNING):
                await send.deliver(self.outbox, msg.channel, failures.apology(msg), kind="apology")
            try:
                self.store.set_inbound_status(inbound_id, "failed")
            except Exception:
                log.exception(
                    "could not record the failed turn channel=%s session=%s", msg.channel, key
                )
        finally:
            ch = self.channels.get(msg.channel)
            if ch is not None and not later:
                with best_effort(log, "the channel's end-of-turn signal"):
                    await ch.turn_done(msg.chat_id, msg.message_id)

    async def _settle(self, inbound_id: int, step: Dispatched) -> None:
        """What dispatch decided, when it is not a turn."""
        if isinstance(step, CommandCall):
            await self._command(inbound_id, step)
        elif isinstance(step, HistoryOnly):
            msg, key = step.msg, step.key
            ch = self.channels.get(msg.channel)
            cap = (ch.capabilities if ch else Capabilities()).group_history
            label = msg.sender_name or msg.sender_username or msg.sender_id
            self.store.add_group_history(
                key, label, msg.text or "", msg.timestamp or time.time(), cap
            )
            self.store.set_inbound_status(inbound_id, "history")
        elif isinstance(step, Skipped):
            self.store.set_inbound_status(inbound_id, "skipped")
            log.info(
                "not served channel=%s session=%s reason=%s", step.channel, step.key, step.reason
            )

    def _activation(self, msg: InboundMessage, key: str) -> gating.Activation:
        return gating.activation(self.store.session(key)["activation"], self.policy(msg.channel))

    def _addressed(self, msg: InboundMessage, key: str) -> bool:
        return gating.addressed(msg, self._activation(msg, key), self._name_re)

    # ----------------------------------------------------------------------- commands
    async def _command(self, inbound_id: int, call: CommandCall) -> None:
        """Answer a command (bot.conversation.commands), store the answer, deliver it."""
        replies = await run_command(call, self.command_ports)
        msg = call.msg
        outs = [
            OutboundMessage(
                chat_id=msg.chat_id, text=text, thread_id=msg.thread_id, account=msg.account
            )
            for text in replies.texts
        ]
        await self._answer(inbound_id, call.key, outs, "storing a command answer", msg.channel)

    async def _immediate(self, inbound_id: int, call: CommandCall) -> None:
        await self._command(inbound_id, call)
        ch = self.channels.get(call.msg.channel)
        if ch is not None:
            with best_effort(log, "the channel's end-of-turn signal"):
                await ch.turn_done(call.msg.chat_id, call.msg.message_id)

    async def _answer(
        self, inbound_id: int, key: str, outs: list[OutboundMessage], what: str, channel: str
    ) -> None:
        """Store an answer that is not a model turn with its message, then deliver it."""
        rows = await self.commit.answer(inbound_id, key, outs, what, channel=channel)
        await send.deliver_rows(self.outbox, rows)

    # --------------------------------------------------------------------------- turns
    def _command_request(self, call: CommandCall) -> TurnRequest:
        return self.prepare.request(call.msg, call.key, "", call.verdict, include_intro=False)

    def file_root(self, key: str, verdict: Verdict) -> Path | None:
        return file_root(self.cfg, key, verdict)

    def _live_output(
        self, ch: Channel | None, pol: ChannelPolicy | None, msg: InboundMessage
    ) -> Preview | StreamText | None:
        return live_output(
            ch,
            pol,
            msg,
            interval=self.preview_interval,
            clock=self.preview_clock,
            sleep=self.preview_sleep,
        )

    async def stop(self, key: str) -> bool:
        """Stop the session's running turn (``/stop``, the UI's Stop): True when one ran.
        The turn keeps the user message, stores no partial answer and sends nothing."""
        return await self.runner.stop(key)

    async def _commit_stopped(
        self,
        inbound_id: int,
        msg: InboundMessage,
        req: TurnRequest,
        turn: str,
        api: api_turn.ApiTurn | None,
    ) -> None:
        """Keep a stopped turn's user message; an HTTP API caller gets its
        empty answer, and the client's messages count as seen (its next request lines up)."""
        key = req.session_key
        if msg.chat_type == "group":
            self.store.take_group_history(key)
        outs, state = stopped_reply(msg, api).outs, self._api_state(key, api)
        rows = await self.commit.stopped(
            inbound_id, key, req, turn, outs, state, channel=msg.channel
        )
        await send.deliver_rows(self.outbox, rows)

    def _api_state(
        self, key: str, api: api_turn.ApiTurn | None, reply: dict | None = None
    ) -> dict[str, Any] | None:
        """What the client has seen, stored with the turn (a stateful API session only)."""
        if api is None or not api.stateful:
            return None
        record = api_turn.remember(api, reply, self.store.session(key)["epoch"])
        return {api_turn.state_key(key): record}

    async def _turn(self, inbound_id: int, msg: InboundMessage, key: str, verdict: Verdict) -> None:
        api = self.prepare.api_plan(msg, key, verdict) if msg.api else None
        if api is not None and api.error:
            await self._api_refusal(inbound_id, msg, key, api.error)
            return
        group = msg.chat_type == "group"
        pending = self.store.peek_group_history(key) if group else []
        mentioned = gating.mentioned(msg, self._name_re) if group else None
        try:  # a /stop during the attachments' preparation stops the turn too
            turn = await self.runner.preparing(
                key,
                msg.sender_id,
                self.prepare.user_turn(msg, key, verdict, pending=pending, was_mentioned=mentioned),
            )
        except Stopped:
            turn = self.prepare.unread_turn(msg, pending=pending, was_mentioned=mentioned)
            req = self.prepare.request(msg, key, turn.text, verdict, include_intro=True, api=api)
            await self._commit_stopped(inbound_id, msg, req, uuid.uuid4().hex, api)
            return
        req = self.prepare.request(
            msg, key, turn.text, verdict, include_intro=True, media=turn.media, api=api
        )
        ch, pol = self.channels.get(msg.channel), self.policy(msg.channel)
        model, effort = controls.session_choice(self.cfg, self.store, key)
        outcome = await self.runner.run(
            req, msg, ch, pol, lambda: self._live_output(ch, pol, msg), model=model, effort=effort
        )
        if outcome.result is None:  # stopped: the user message is kept, no answer
            await self._commit_stopped(inbound_id, msg, req, outcome.turn, api)
            return
        await self._reply(inbound_id, msg, verdict, req, outcome, api)

    async def _reply(
        self,
        inbound_id: int,
        msg: InboundMessage,
        verdict: Verdict,
        req: TurnRequest,
        outcome: TurnOutcome,
        api: api_turn.ApiTurn | None,
    ) -> None:
        """reply → commit → outbox for a finished turn."""
        key, result, live = req.session_key, outcome.result, outcome.live
        assert result is not None
        ch, pol = self.channels.get(msg.channel), self.policy(msg.channel)
        reply = await chat_reply(
            self.cfg,
            ch,
            msg,
            req,
            result,
            reply_mode=pol.reply_to_mode if pol else "off",
            api=api,
            speak=speaker(self.cfg, self.agent, req, result.turn_id),
        )
        outs = list(reply.outs)
        if isinstance(live, Preview):
            # the preview's last edit has landed; the reply (stored below, sent by the
            # outbox) is edited into it, or it is deleted (a silent reply)
            await live.settle(outs)
        elif live is not None:
            live.close()
        if msg.chat_type == "group":
            self.store.take_group_history(key)
            if req.extra_context:
                self.store.mark_intro_done(key)
        state = self._api_state(key, api, reply.api_reply)  # in the same commit
        # the turn and its reply are stored together, with the owner's last route when this
        # is the owner's direct chat (retried while the disk is full: the model is not asked
        # again), then the outbox sends the reply
        owner = commit.OwnerChat(msg, verdict.trust, bool(ch and ch.capabilities.proactive))
        rows = await self.commit.turn(
            key, result, inbound_id, outs, state, channel=msg.channel, owner=owner
        )
        await send.deliver_rows(self.outbox, rows)

    async def _api_refusal(self, inbound_id: int, msg: InboundMessage, key: str, text: str):
        """Answer an API request that cannot run (HTTP 400); nothing reaches the model."""
        out = OutboundMessage(
            chat_id=msg.chat_id, text=text, account=msg.account, error="invalid_request"
        )
        await self._answer(inbound_id, key, [out], "storing an answer", msg.channel)

    async def _retry_later(self, inbound_id: int, msg: InboundMessage, key: str) -> None:
        """Process a message again after a full disk stopped its turn."""
        backoff = store_backoff()
        while self.accepting and self.outbox.storage.down:
            await asyncio.sleep(backoff.next())
            with best_effort(log, "probing whether the disk has room again"):
                self.store.put("storage:probe", time.time())
                self.outbox.storage.ok()
        if self.accepting:
            self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, None))
