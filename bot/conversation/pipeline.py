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
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from bot.conversation import pairing_requests as pairing
from bot.rules.admission import Verdict, admit, channel_policy, session_key
from bot.agent.turn import Agent, TurnRequest
from bot.config import ChannelPolicy, Config
from bot.conversation.agents import AgentParts, build_parts, choose, unknown_model
from bot.conversation.approvals import Approvals
from bot.conversation.commands import COMMANDS, command_call, run_command
from bot.conversation.commands import controls
from bot.conversation import api as api_turn
from bot.conversation import failures, gating, outage
from bot.conversation import commit
from bot.conversation.commit import Commit, store_backoff
from bot.conversation.events import TurnEvents
from bot.conversation import pairing as pairing_stage
from bot.conversation.intake import Approved, valid_text, where
from bot.conversation.prepare import file_root
from bot.conversation.reply import chat_reply, speaker, stopped_reply
from bot.conversation.run import Run, Stopped, live_output
from bot.conversation.dispatch import dispatch
from bot.conversation.types import (
    Accepted,
    ApiTurn,
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
from bot.delivery.previews import PREVIEW_INTERVAL, Preview
from channels.base import (
    adapter_for,
    account_key,
    Capabilities,
    Channel,
    InboundMessage,
    OutboundMessage,
)
from channels.best_effort import best_effort

log = logging.getLogger("chela.conversation")  # the name operators grep for


class Conversation:
    """``agents``: every agent of the daemon by id (the default agent's first)."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        agents: Mapping[str, Agent],
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
        self.lanes = lanes
        self.channels = channels
        self.outbox = outbox  # every reply is a stored row it sends (built by the daemon)
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
        self.outage = outage.Outage(cfg, store, lanes, outbox, agents[cfg.agent.id], self._process)
        self.runner = Run(agents, self.events, self.outage.kept)
        # each agent's stages; the command table's reach (/approve and /deny answer held
        # exec commands, /stop stops the running turn) is every agent's
        shared = {"approvals": approvals, "turns": self.runner, "notices": notices}
        self.agents = build_parts(cfg, store, agents, channels, shared)
        default = self.agents[cfg.agent.id]  # the web chat's and the Control UI's agent
        self.agent, self.prepare, self.command_ports = (
            default.agent,
            default.prepare,
            default.commands,
        )
        self.commit = Commit(store, outbox.storage, lambda: self.accepting)

    def _live(self, ch: Channel | None, pol: ChannelPolicy | None, msg: InboundMessage):
        clock, sleep = self.preview_clock, self.preview_sleep
        return live_output(ch, pol, msg, interval=self.preview_interval, clock=clock, sleep=sleep)

    def _background(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------------- policy
    def policy(self, channel: str) -> ChannelPolicy | None:
        return channel_policy(self.cfg, channel)

    def admit(self, msg: InboundMessage) -> Verdict:
        return admit(msg, self.cfg, self.approved)

    def choose_agent(self, msg: InboundMessage) -> str | None:
        """The agent that answers ``msg`` (its binding; an HTTP API ``chela/<id>``)."""
        return choose(self.cfg, msg, self.agents)

    def session_key(
        self, msg: InboundMessage, verdict: Verdict | None = None, agent: str | None = None
    ) -> str:
        """``msg``'s session in ``agent``'s (by default: the one its binding chooses)."""
        verdict = verdict or self.admit(msg)
        own = self.agents[agent or self.choose_agent(msg) or self.cfg.agent.id].cfg
        return session_key(msg, own, verdict.trust if verdict.served else "guest")

    # ------------------------------------------------------------------------ intake
    async def on_inbound(self, msg: InboundMessage, cursor: tuple[str, int] | None = None) -> None:
        """The sink: decide admission, persist, then queue.  Returns once the message is
        stored (or deliberately dropped); ``cursor`` is stored with its row (or alone)."""
        msg = valid_text(msg)
        verdict = self.admit(msg)
        agent = self.choose_agent(msg) if verdict.action != "drop" else None  # once, here
        if agent is None:  # not served, or no agent of this daemon for it: no row
            await self.commit.write("storing a cursor", lambda: self.store.put_cursor(cursor))
            if verdict.action == "drop":
                log.info("not served %s reason=%s", where(msg), verdict.reason)
            else:
                await unknown_model(self.outbox, self.channels, msg, self.agents)
            return
        key = self.session_key(msg, verdict, agent)
        message_id = msg.message_id or msg.raw_id or f"t{time.time_ns()}"
        inbound_id = await self.commit.write(
            "storing an inbound message",
            lambda: self.store.add_inbound(
                msg.channel, msg.account, msg.chat_id, message_id, key, msg.to_json(), agent, cursor
            ),
        )
        if inbound_id is None:
            log.info("duplicate message ignored %s id=%s", where(msg), message_id)
            return
        if verdict.action == "pair":
            # kept so that the owner's approval can answer it; never processed before that.
            # Only the newest one per sender is kept: a stranger cannot fill the database.
            self.store.hold_for_pairing(inbound_id, key)
            if self.accepting:
                reply = pairing_stage.reply
                self.lanes.submit(
                    key, lambda: reply(self.store, self.outbox, msg, self.cfg, notices=self.notices)
                )
            return
        if not self.accepting or not self._recovered:
            # stored; processed after restart, or (during start-up) by recover(), in arrival
            # order behind the messages the last run left unanswered
            return
        if verdict.reason == "paired":  # a message held until `chela pairing approve` goes first
            await self.pairing_approved(account_key(msg.channel, msg.account), msg.sender_id)
        call = command_call(msg, self.agents[agent].cfg, key, verdict, on_arrival=True)
        if call and COMMANDS[call.name].immediate:
            # answered now (a turn waiting for it may hold this session's lane); the reply
            # is delivered in the background so the platform's intake never waits on it
            self._background(self._immediate(inbound_id, call, agent))
            return
        self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, verdict, agent))

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

            # the agent chosen at intake ('' on a row stored without one: the default's)
            def job(r=row, m=msg, agent=row.agent or self.cfg.agent.id):
                return self._process(r.id, m, r.session_key, None, agent)

            queued += self._queue(row.session_key, row.id, job)
        if queued:
            log.info("recovering %d unanswered message(s)", queued)
        return queued

    async def pairing_approved(self, channel: str, sender_id: str) -> bool:
        """The owner approved a pairing request (``chela pairing approve``): queue the message
        that asked (the newest one; older ones are dropped), then tell the sender."""
        look = pairing_stage.held_message  # in the session of the agent its intake chose
        held = [look(self.store, a.cfg, channel, sender_id) for a in self.agents.values()]
        last = max((r for r in held if r is not None), key=lambda r: r.id, default=None)
        if last is None:
            return False
        msg, agent = InboundMessage.from_json(last.payload), last.agent  # chosen at intake
        verdict = self.admit(msg)
        if not verdict.served or agent not in self.agents:
            return False
        key = self.session_key(msg, verdict, agent)
        self.store.requeue_inbound(last.id, key, agent)
        self._queue(key, last.id, lambda: self._process(last.id, msg, key, verdict, agent))
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
    def _dispatch(self, acc: Accepted) -> Dispatched:
        parts = self.agents.get(acc.agent)
        if parts is None:  # its agent has left the config since the message was stored
            return Skipped(f"agent {acc.agent!r} is not configured", acc.msg.channel, acc.key)
        msg, key, verdict = acc.msg, acc.key, acc.verdict
        return dispatch(
            acc,
            command=lambda: command_call(msg, parts.cfg, key, verdict, on_arrival=False),
            addressed=lambda: self._addressed(msg, key, parts),
        )

    async def _process(
        self, inbound_id: int, msg: InboundMessage, key: str, verdict: Verdict | None, agent: str
    ) -> None:
        started = time.perf_counter()
        later = False  # retried after a full disk: the message is not finished
        try:
            if verdict is None:  # recovered after a restart: the config may have changed since
                verdict = self.admit(msg)
            step = self._dispatch(Accepted(msg, key, verdict, agent))
            if not isinstance(step, TurnCall):
                await self._settle(inbound_id, step, agent)
                return
            await self._turn(inbound_id, step)
            ms = (time.perf_counter() - started) * 1000
            log.info("turn done %s session=%s trust=%s ms=%.0f", where(msg), key, verdict.trust, ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if storage_full(e):
                # a full disk: no apology, the answer comes once space is back (the stored
                # message stays 'pending'; a restart would answer it too)
                self.outbox.storage.failed(e, "answering a message")
                later = True
                self._background(self._retry_later(inbound_id, msg, key, agent))
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
            ch = adapter_for(self.channels, msg.channel, msg.account)
            if ch is not None and not later:
                with best_effort(log, "the channel's end-of-turn signal"):
                    await ch.turn_done(msg.chat_id, msg.message_id)

    async def _settle(self, inbound_id: int, step: Dispatched, agent: str) -> None:
        """What dispatch decided, when it is not a turn."""
        if isinstance(step, CommandCall):
            await self._command(inbound_id, step, agent)
        elif isinstance(step, HistoryOnly):
            ch = adapter_for(self.channels, step.msg.channel, step.msg.account)
            cap = (ch.capabilities if ch else Capabilities()).group_history
            commit.history_only(self.store, inbound_id, step, cap)
        elif isinstance(step, Skipped):
            self.store.set_inbound_status(inbound_id, "skipped")
            log.info(
                "not served channel=%s session=%s reason=%s", step.channel, step.key, step.reason
            )

    def _addressed(self, msg: InboundMessage, key: str, parts: AgentParts) -> bool:
        mode = gating.activation(self.store.session(key)["activation"], self.policy(msg.channel))
        return gating.addressed(msg, mode, parts.name_re)

    # ----------------------------------------------------------------------- commands
    async def _command(self, inbound_id: int, call: CommandCall, agent: str) -> None:
        """Answer a command (bot.conversation.commands) as ``agent``; store, deliver it."""
        replies = await run_command(call, self.agents[agent].commands)
        msg = call.msg
        outs = [
            OutboundMessage(
                chat_id=msg.chat_id, text=text, thread_id=msg.thread_id, account=msg.account
            )
            for text in replies.texts
        ]
        await self._answer(
            inbound_id, call.key, outs, "storing a command answer", msg.channel, agent
        )

    async def _immediate(self, inbound_id: int, call: CommandCall, agent: str) -> None:
        await self._command(inbound_id, call, agent)
        ch = adapter_for(self.channels, call.msg.channel, call.msg.account)
        if ch is not None:
            with best_effort(log, "the channel's end-of-turn signal"):
                await ch.turn_done(call.msg.chat_id, call.msg.message_id)

    async def _answer(
        self,
        inbound_id: int,
        key: str,
        outs: list[OutboundMessage],
        what: str,
        channel: str,
        agent: str,
    ) -> None:
        """Store an answer that is not a model turn with its message, then deliver it."""
        rows = await self.commit.answer(inbound_id, key, outs, what, channel=channel, agent=agent)
        await send.deliver_rows(self.outbox, rows)

    # --------------------------------------------------------------------------- turns
    def file_root(self, key: str, verdict: Verdict) -> Path | None:
        return file_root(self.cfg, key, verdict)

    async def stop(self, key: str) -> bool:
        """Stop the session's running turn (``/stop``, the UI's Stop): True when one ran.
        The turn keeps the user message, stores no partial answer and sends nothing."""
        return await self.runner.stop(key)

    async def _commit_stopped(
        self, inbound_id: int, msg: InboundMessage, req: TurnRequest, turn: str, api: ApiTurn | None
    ) -> None:
        """Keep a stopped turn's user message; an HTTP API caller gets its
        empty answer, and the client's messages count as seen (its next request lines up)."""
        key = req.session_key
        if msg.chat_type == "group":
            self.store.take_group_history(key)
        outs, state = stopped_reply(msg, api).outs, self._seen(api, None, key)
        rows = await self.commit.stopped(
            inbound_id, key, req, turn, outs, state, channel=msg.channel
        )
        await send.deliver_rows(self.outbox, rows)

    def _seen(self, api: ApiTurn | None, reply: dict | None, key: str) -> dict | None:
        """What an HTTP API client has seen, stored with the turn (None: no API turn)."""
        if api is None:
            return None
        return api_turn.state_values(api, reply, self.store.session(key)["epoch"], key)

    async def _turn(self, inbound_id: int, call: TurnCall) -> None:
        """prepare → run → reply, by the agent chosen at intake (``call.agent``)."""
        msg, key, verdict, parts = call.msg, call.key, call.verdict, self.agents[call.agent]
        prep = parts.prepare
        api = prep.api_plan(msg, key, verdict) if msg.api else None
        if api is not None and api.error:
            await self._api_refusal(inbound_id, msg, key, api.error, call.agent)
            return
        group = msg.chat_type == "group"
        pending = self.store.peek_group_history(key) if group else []
        mentioned = gating.mentioned(msg, parts.name_re) if group else None
        try:  # a /stop during the attachments' preparation stops the turn too
            turn = await self.runner.preparing(
                key,
                msg.sender_id,
                prep.user_turn(msg, key, verdict, pending=pending, was_mentioned=mentioned),
            )
        except Stopped:
            turn = prep.unread_turn(msg, pending=pending, was_mentioned=mentioned)
            req = prep.request(msg, key, turn.text, verdict, include_intro=True, api=api)
            await self._commit_stopped(inbound_id, msg, req, uuid.uuid4().hex, api)
            return
        req = prep.request(
            msg, key, turn.text, verdict, include_intro=True, media=turn.media, api=api
        )
        ch, pol = adapter_for(self.channels, msg.channel, msg.account), self.policy(msg.channel)
        model, effort = controls.session_choice(parts.cfg, self.store, key)
        outcome = await self.runner.run(
            req, msg, ch, pol, lambda: self._live(ch, pol, msg), model=model, effort=effort
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
        api: ApiTurn | None,
    ) -> None:
        """reply → commit → outbox for a finished turn."""
        key, result, live = req.session_key, outcome.result, outcome.live
        # the outage is the default agent's model chain: another agent's failure is its own
        # error, answered as such, and never holds the default agent's messages
        if result is None or (
            req.agent == self.cfg.agent.id and await self.outage.hold(inbound_id, msg, outcome, api)
        ):
            return  # kept for the model (bot/conversation/outage.py)
        ch, pol = adapter_for(self.channels, msg.channel, msg.account), self.policy(msg.channel)
        parts = self.agents[req.agent]
        reply = await chat_reply(
            parts.cfg,
            ch,
            msg,
            req,
            result,
            reply_mode=pol.reply_to_mode if pol else "off",
            api=api,
            speak=speaker(parts.cfg, parts.agent, req, result.turn_id),
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
        state = self._seen(api, reply.api_reply, key)  # in the same commit
        # the turn and its reply are stored together, with the owner's last route when this
        # is the owner's direct chat (retried while the disk is full: the model is not asked
        # again), then the outbox sends the reply
        owner = commit.OwnerChat(msg, verdict.trust, bool(ch and ch.capabilities.proactive))
        rows = await self.commit.turn(
            key, result, inbound_id, outs, state, channel=msg.channel, owner=owner, agent=req.agent
        )
        await send.deliver_rows(self.outbox, rows)

    async def _api_refusal(
        self, inbound_id: int, msg: InboundMessage, key: str, text: str, agent: str
    ) -> None:
        """Answer an API request that cannot run (HTTP 400); nothing reaches the model."""
        out = OutboundMessage(
            chat_id=msg.chat_id, text=text, account=msg.account, error="invalid_request"
        )
        await self._answer(inbound_id, key, [out], "storing an answer", msg.channel, agent)

    async def _retry_later(
        self, inbound_id: int, msg: InboundMessage, key: str, agent: str
    ) -> None:
        """Process a message again after a full disk stopped its turn."""
        backoff = store_backoff()
        while self.accepting and self.outbox.storage.down:
            await asyncio.sleep(backoff.next())
            with best_effort(log, "probing whether the disk has room again"):
                self.store.put("storage:probe", time.time())
                self.outbox.storage.ok()
        if self.accepting:
            self._queue(key, inbound_id, lambda: self._process(inbound_id, msg, key, None, agent))
