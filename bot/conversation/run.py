"""The run stage (docs/architecture.md "How a message flows"): typing and the ack reaction, live output, and
``agent.run_turn``; cancellable and observed.

While a turn runs it is a task of its own, so ``Run.stop(key)`` can cancel it (the ``/stop``
command and the UI's Stop use it): the outcome is then ``stopped`` and the caller stores the
user message without an answer.  Progress is published on the ``TurnEvents`` hub: started,
the model's text as it arrives, a new model call (``step``), tool calls started and finished,
then final, error or cancelled.  The model is streamed when someone looks (a live preview,
the HTTP stream or a subscriber of the session): with nobody looking the turn runs exactly as
it would without events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

from bot.agent.request import TurnResult
from bot.agent.turn import Agent, TurnRequest
from bot.config import ChannelPolicy
from bot.conversation.events import EventKind, TurnEvent, TurnEvents
from bot.conversation.types import TurnOutcome
from bot.delivery.previews import Preview, StreamEvent, StreamText
from bot.model.choice import CHOICE, Choice
from channels.base import Channel, InboundMessage
from channels.best_effort import best_effort

log = logging.getLogger("chela.run")

TYPING_EVERY = 4.0
ACK_EMOJI = "👀"
FORWARDED = ("text", "step", "tool_start", "tool_end")  # StreamEvent kinds published as events

Live = Preview | StreamText
Kept = Callable[[InboundMessage, TurnRequest], TurnResult | None] | None
T = TypeVar("T")


class Stopped(Exception):
    """The session's turn was stopped (``Run.stop``) while it was being prepared."""


def live_output(
    ch: Channel | None,
    pol: ChannelPolicy | None,
    msg: InboundMessage,
    *,
    interval: float,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[Any]],
) -> Live | None:
    """What shows this turn while the model writes it: a live preview in a
    chat whose channel has ``streaming = "partial"`` and can edit, the caller's stream
    on a request/response channel that asked for one (HTTP ``stream: true``), else
    nothing."""
    if ch is None:
        return None
    sink = ch.live_stream(msg.chat_id)
    if sink is not None:
        return StreamText(sink)
    if pol is None or pol.streaming != "partial" or not ch.capabilities.edit:
        return None
    mode = pol.reply_to_mode
    return Preview(
        ch,
        msg.chat_id,
        thread_id=msg.thread_id,
        # where the reply goes unless a reply tag says otherwise (build_outbound)
        reply_to_id=(msg.message_id or None) if mode in ("first", "all") else None,
        interval=interval,
        clock=clock,
        sleep=sleep,
        max_chars=ch.capabilities.max_text,
    )


async def keep_typing(ch: Channel, msg: InboundMessage) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        while True:
            with best_effort(log, "showing typing"):
                # never cancel a platform call in flight: a cancelled HTTP request can
                # leak a connection-pool slot (PTB's stock httpx request does;
                # bench/typing_cancel_leak.py)
                await asyncio.shield(asyncio.ensure_future(ch.typing(msg.chat_id, msg.thread_id)))
            await asyncio.sleep(TYPING_EVERY)


async def _ack(ch: Channel | None, pol: ChannelPolicy | None, msg: InboundMessage) -> None:
    if ch and pol and pol.reactions == "ack" and msg.message_id:
        with best_effort(log, "the acknowledgement reaction"):
            await ch.react(msg.chat_id, msg.message_id, ACK_EMOJI)


async def _drop_live(live: Live | None) -> None:
    """The turn ended without a reply to settle into its live output."""
    if isinstance(live, Preview):
        await asyncio.shield(live.delete())


def _stopped(task: asyncio.Task) -> bool:
    """The run task was cancelled by ``stop``, not the caller with it (a daemon stop)."""
    me = asyncio.current_task()
    return task.cancelled() and not (me is not None and me.cancelling())


class Run:
    """One running turn per session at most (the lanes see to it); ``stop`` cancels it.
    ``agents``: every agent by id; a turn runs on the one its request names."""

    def __init__(self, agents: Mapping[str, Agent], events: TurnEvents, kept: Kept = None) -> None:
        self.agents = agents
        self.events = events
        self.kept = kept  # a turn's result without a model call (the outage's), or None
        self._running: dict[str, asyncio.Task] = {}
        self._senders: dict[str, str] = {}  # who started each running turn (a group's /stop)

    async def stop(self, key: str) -> bool:
        """Cancel the session's running turn (being prepared or with the model); True when
        one was running.  Returns once the turn's task has ended (its child processes killed
        by the tools on cancel)."""
        task = self._running.get(key)
        if task is None or task.done() or not task.cancel():
            return False
        await asyncio.wait([task])
        return True

    def running(self, key: str) -> bool:
        task = self._running.get(key)
        return task is not None and not task.done()

    def started_by(self, key: str) -> str | None:
        """The sender whose message started the session's running turn (None: none runs)."""
        return self._senders.get(key) if self.running(key) else None

    def _claim(self, key: str, task: asyncio.Task, sender: str) -> None:
        self._running[key], self._senders[key] = task, sender

    def _release(self, key: str, task: asyncio.Task) -> None:
        if self._running.get(key) is task:
            del self._running[key], self._senders[key]

    async def preparing(self, key: str, sender: str, work: Awaitable[T]) -> T:
        """Run the turn's preparation (attachments fetched and read) so that
        ``stop(key)`` cancels it too: raises ``Stopped`` then (a daemon stop propagates)."""
        task = asyncio.ensure_future(work)
        self._claim(key, task, sender)
        try:
            return await task
        except asyncio.CancelledError:
            if not _stopped(task):
                raise
            log.info("turn stopped while being prepared session=%s", key)
            raise Stopped(key) from None
        finally:
            self._release(key, task)

    def _agent(self, req: TurnRequest) -> Agent:
        agent = self.agents.get(req.agent)
        if agent is None:  # never another agent's answer (nor the default one's)
            raise LookupError(f"the turn names no agent of this daemon: {req.agent!r}")
        return agent

    def _start(
        self, agent: Agent, req: TurnRequest, on_event, model: str, effort: str
    ) -> asyncio.Task:
        """The turn's task on its agent, its model calls following the session's choices."""
        token = CHOICE.set(Choice(getattr(agent, "llm", None), model, effort))
        try:  # the task copies the context now: the choice is its own, not the lane's
            return asyncio.ensure_future(agent.run_turn(req, on_event=on_event))
        finally:
            CHOICE.reset(token)

    async def run(
        self,
        req: TurnRequest,
        msg: InboundMessage,
        ch: Channel | None,
        pol: ChannelPolicy | None,
        make_live: Callable[[], Live | None],
        *,
        model: str = "",
        effort: str = "",
    ) -> TurnOutcome:
        """Run the turn; ``model`` and ``effort``: the session's ``/model`` ("" = the
        configured chain) and thinking level ("" = none sent)."""
        key, turn, agent = req.session_key, uuid.uuid4().hex, self._agent(req)
        if self.kept is not None and (kept := self.kept(msg, req)) is not None:
            return TurnOutcome(kept, None, turn)  # the model is down: not called
        self.events.publish(TurnEvent("started", key, turn))
        typing = (
            asyncio.create_task(keep_typing(ch, msg)) if ch and ch.capabilities.typing else None
        )
        live = make_live()
        on_event = self._observer(key, turn, live)
        task = self._start(agent, req, on_event, model, effort)
        self._claim(key, task, msg.sender_id)  # no await since the preparation's release
        try:
            await _ack(ch, pol, msg)
            result = await task
        except asyncio.CancelledError:
            task.cancel()  # the daemon stops while the ack is sent: the turn goes with it
            await _drop_live(live)
            if not _stopped(task):
                raise
            if isinstance(live, StreamText):
                live.close()
            log.info("turn stopped session=%s", key)
            self.events.publish(TurnEvent("cancelled", key, turn))
            return TurnOutcome(None, None, turn)
        except BaseException as e:
            await _drop_live(live)  # the apology replaces it
            self.events.publish(TurnEvent("error", key, turn, text=str(e) or type(e).__name__))
            raise
        finally:
            if typing:
                typing.cancel()
            self._release(key, task)
        end: EventKind = "error" if result.error else "final"
        self.events.publish(TurnEvent(end, key, turn, text=result.text))
        return TurnOutcome(result, live, turn)

    def _observer(
        self, key: str, turn: str, live: Live | None
    ) -> Callable[[StreamEvent], None] | None:
        """The agent's ``on_event``: the live output and the hub; None when nobody looks
        (the model is then not streamed, as before events existed)."""
        if live is None and not self.events.watching(key):
            return None
        events = self.events

        def on_event(ev: StreamEvent) -> None:
            if ev.kind in FORWARDED:
                events.publish(
                    TurnEvent(
                        cast(EventKind, ev.kind),
                        key,
                        turn,
                        text=ev.text,
                        tool=ev.tool,
                        summary=ev.summary,
                        duration=ev.duration,
                        ok=ev.ok,
                    )
                )
            if live is not None:
                live.push(ev)

        return on_event
