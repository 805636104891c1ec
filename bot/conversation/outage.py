"""While no configured model answers: messages kept, the model probed, the drain after.

A chat turn that fails because no model answered (``LLMError`` kind ``down``: no
connection, timeouts, 5xx, 429 after the client's retries and fallbacks) is not answered
with an error: its message is held (``bot.store.pending``), its chat gets one notice per
outage, and the outage begins.  While it lasts, the run stage asks :meth:`Outage.kept`
before each chat turn and does not call the model (a held message is not retried one by
one).  :meth:`Outage.watch`, a task of the daemon, probes the model with a minimal request
through the model gate, waiting longer after each failure (``[outage] probe_initial`` up to
``probe_max``); when it answers, every session's held messages are answered in arrival
order on the session's lane, as if they had just arrived.  A message held longer than
``max_wait`` is not answered late: its chat gets one line saying so.  Commands are not
turns, so they work throughout; ``/new`` drops the session's held messages.  Webhook and
mail events are kept the same way by their runner (``bot.triggers.events``), which
registers with :meth:`Outage.keep_also`: the watcher expires and releases them with the
messages.

Turns of the HTTP API and of the Control UI's chat are never held (their caller waits for
an answer), nor are
scheduled turns: the heartbeat is skipped while the model is down (its ledger says
``model down``), a cron job waits for the model and then catches up as after downtime
(``bot.schedule.service``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bot.agent.request import TurnRequest, TurnResult
from bot.config import Config
from bot.conversation.types import TurnOutcome
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.delivery.previews import Preview, StreamText
from bot.model import ON_CALL, LLMError
from bot.store import pending
from channels.base import InboundMessage, OutboundMessage
from channels.best_effort import best_effort
from channels.retry import Backoff

log = logging.getLogger("chela.outage")

DOWN = "down"  # the LLMError kind of a call no model answered
NOTICE = "I can't reach my model right now; I'll answer this as soon as it's back."
PROBE_SESSION = "outage:probe"  # the usage rows of the probes
PROBE = [{"role": "user", "content": "Reply with OK."}]
# channels whose caller waits on the answer (the Control UI's chat page): never kept, they
# get the error as before
WAITING_CALLERS = ("web",)


def expired_line(max_wait: str) -> str:
    return (
        f"I could not answer what you sent while my model was unreachable: it stayed down "
        f"longer than {max_wait}, so I won't answer it late. Please send it again if it "
        f"still matters."
    )


class KeptElsewhere(Protocol):
    """Turns other than chat messages kept for the model (the triggers' events): the outage
    expires them with its messages and releases them when the model answers again."""

    async def expire(self, before: float) -> None:
        """Kept since before ``before`` (epoch seconds): never run late, their owner told."""

    def release(self) -> None:
        """The model answers (or no outage is known): run what is kept, once each."""


def _chat(msg: InboundMessage) -> str:
    return f"{msg.channel}|{msg.account}|{msg.chat_id}"


async def _settle_live(live: Any) -> None:
    """A held turn shows nothing: its live preview (if one began) goes."""
    if isinstance(live, Preview):
        await asyncio.shield(live.settle([]))
    elif isinstance(live, StreamText):
        live.close()


class Outage:
    """The outage state of one daemon and its watcher (see the module doc).

    ``agent``: the agent whose model chain the probe asks (the default agent's); ``process``
    answers one released message as if it had just arrived (the pipeline's processing of a
    stored message: id, message, session, verdict None = decided again, agent), called on
    the message's session lane."""

    def __init__(
        self,
        cfg: Config,
        store: Any,
        lanes: Any,
        outbox: Outbox,
        agent: Any,
        process: Callable[[int, InboundMessage, str, Any, str], Awaitable[None]],
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.lanes = lanes
        self.outbox = outbox
        self.agent = agent
        self.process = process
        self.clock = clock
        self.sleep = sleep
        self.down = pending.down_since(store) is not None  # a restart keeps the outage
        self._wake = asyncio.Event()
        self._elsewhere: list[KeptElsewhere] = []

    def keep_also(self, kept: KeptElsewhere) -> None:
        """Another kind of turn kept for the model: expired and released with the messages."""
        self._elsewhere.append(kept)

    def begin(self) -> None:
        """A turn found no model answering: the outage starts (once) and the probe wakes."""
        if self.down:
            return
        since = pending.mark_down(self.store, self.clock())
        log.warning("model down since %.0f: messages are kept until it answers", since)
        self.down = True
        self._wake.set()

    # ----------------------------------------------------------------- the run stage
    def kept(self, msg: InboundMessage, req: TurnRequest) -> TurnResult | None:
        """The run stage's question before a turn: the result of a chat turn kept without
        calling the model (the model is known to be down, or an older message of the
        session still waits: none overtakes another), else None."""
        if msg.api or msg.channel in WAITING_CALLERS or req.kind != "chat":
            return None
        if req.agent not in ("", self.cfg.agent.id):
            return None  # another agent's turn: its own model answers, or its own error
        if not (self.down or pending.session_waits(self.store, req.session_key)):
            return None
        return TurnResult(text=NOTICE, to_store=[], error=NOTICE, error_kind=DOWN)

    # ------------------------------------------------------------- the reply stage
    async def hold(
        self, inbound_id: int, msg: InboundMessage, outcome: TurnOutcome, api: Any
    ) -> bool:
        """Keep the message when its turn found no model answering (True: held, nothing
        else is stored or sent for it).  A turn that ran tools before the model failed is
        not held (a tool that ran is never run again): it fails as before."""
        result = outcome.result
        if api is not None or msg.api or result is None or result.error_kind != DOWN:
            return False
        if any(m.get("role") == "assistant" for m in result.to_store):
            return False
        if pending.agent_of(self.store, inbound_id) not in ("", self.cfg.agent.id):
            return False  # the probe asks the default agent's models only: told as before
        await _settle_live(outcome.live)
        pending.hold(self.store, inbound_id)
        self.begin()
        if pending.first_notice(self.store, _chat(msg)):
            out = OutboundMessage(
                chat_id=msg.chat_id, thread_id=msg.thread_id, account=msg.account, text=NOTICE
            )
            with best_effort(log, "telling a chat the model is down", level=logging.WARNING):
                await send.deliver(self.outbox, msg.channel, out, kind="outage")
        log.info("message kept for the model id=%d channel=%s", inbound_id, msg.channel)
        return True

    # ------------------------------------------------------------------- the watcher
    async def watch(self) -> None:
        """The daemon's task: probe while the model is down, then answer what was kept."""
        first = True
        while True:
            self._wake.clear()
            if self.down:
                await self._probe_until_up(at_once=first)
            first = False
            self._drain()
            if not self.down:
                await self._wake.wait()

    async def _probe_until_up(self, *, at_once: bool) -> None:
        o = self.cfg.outage
        backoff = Backoff(o.probe_initial_seconds, o.probe_max_seconds)
        while True:
            await self._expire()
            if not at_once:
                await self.sleep(backoff.next())
            at_once = False
            if await self.probe():
                break
        self.down = False
        pending.mark_up(self.store)
        log.info("the model answers again: answering the kept messages")

    async def probe(self) -> bool:
        """One minimal request through the model gate (budget checked, usage recorded):
        True when a model answered (a refusal that is not an outage counts: it answered)."""
        call = self.agent.gate.bind("owner", PROBE_SESSION)
        if call.refusal() is not None:
            log.info("outage probe not sent: the daily budget is used up")
            return False
        token = ON_CALL.set(call.recorder("probe"))
        try:
            await self.agent.llm.complete(PROBE, params={"max_tokens": 8})
        except LLMError as e:
            log.info("outage probe: still no model answers (%s)", e.reason)
            return e.kind not in (DOWN, "budget")
        finally:
            ON_CALL.reset(token)
        return True

    # -------------------------------------------------------------------- the drain
    def _drain(self) -> None:
        """Each session with kept messages gets one job on its lane that answers them."""
        if self.lanes.closed:
            return
        for key in pending.sessions_waiting(self.store):
            self.lanes.submit(key, lambda k=key: self._drain_session(k))
        for kept in self._elsewhere:
            kept.release()

    async def _drain_session(self, key: str) -> None:
        await self._expire()
        while not self.down:
            rows = pending.release(self.store, key)
            if not rows:
                return
            for row in rows:  # held again at once if the model fails again meanwhile
                msg = InboundMessage.from_json(row.payload)
                await self.process(row.id, msg, row.session_key, None, row.agent)

    async def _expire(self) -> None:
        """Messages kept longer than ``max_wait``: never answered; each chat told once."""
        before = self.clock() - self.cfg.outage.max_wait_seconds
        for kept in self._elsewhere:
            await kept.expire(before)
        rows = pending.expire(self.store, before)
        chats: dict[str, InboundMessage] = {}
        for row in rows:
            msg = InboundMessage.from_json(row.payload)
            chats.setdefault(_chat(msg), msg)
        for msg in chats.values():
            log.info("kept messages expired channel=%s chat=%s", msg.channel, msg.chat_id)
            out = OutboundMessage(
                chat_id=msg.chat_id,
                thread_id=msg.thread_id,
                account=msg.account,
                text=expired_line(self.cfg.outage.max_wait),
            )
            with best_effort(log, "telling a chat its messages expired", level=logging.WARNING):
                await send.deliver(self.outbox, msg.channel, out, kind="outage")
