"""Scheduled turns: heartbeats and cron jobs.

Both enter like a channel does: they build a ``TurnRequest`` for a session, run it on the
session's lane (so they never overlap a user's turn) through the conversation's run stage
(turn events, ``/stop``, the session's ``/model`` and ``/think``), and commit like a chat
turn: the turn
and its reply's outbox row are stored in ONE transaction (``Store.commit_turn``), then the
outbox sends the row.  A crash between the two sends it after the restart, once; the turn
is never "sent but not stored" nor "stored but never sent".
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.rules import heartbeat as rules
from bot.conversation import owner_route
from bot.agent.turn import Agent, TurnRequest, zone, zone_name
from bot.config import Config, agent_config
from bot.conversation import commit
from bot.conversation.commands.controls import session_choice
from bot.conversation.events import TurnEvents
from bot.conversation.run import Run
from bot.conversation.reply import scheduled_outbound, scheduled_plan
from bot.conversation.requests import route_traits, scheduled_request
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.conversation.lanes import SessionLanes
from bot.rules.keys import cron_key, main_key
from bot.rules.routing import accounts_of_agent
from bot.store import Store
from channels.base import Channel, InboundMessage, account_key, adapter_for

log = logging.getLogger("chela.heartbeat")

BUSY_RETRY_SECONDS = 30.0
FIRST_ATTEMPT_WAIT = 10.0  # seconds a heartbeat or cron run waits for its send's first attempt
_DELIVERY_REASON = {
    "delivered": "",
    "queued": "the platform did not take it yet; stored and retried",
    "failed": "delivery failed",
}


@dataclass
class Outcome:
    # skipped | stopped | ack | silent | duplicate | no-target | delivered | queued | dry-run | failed
    status: str
    reason: str = ""
    text: str = ""
    target: dict | None = None

    def describe(self) -> str:
        where = f" to {self.target['channel']}:{self.target['chat_id']}" if self.target else ""
        parts = [self.status + where]
        if self.reason:
            parts.append(f"({self.reason})")
        if self.text:
            parts.append("\n" + self.text)
        return " ".join(parts)


def read_heartbeat_md(workspace: Path) -> str | None:
    """HEARTBEAT.md as the prompt sees it; None when it counts as missing (absent, over
    2 MiB, unreadable, or a symlink out of the workspace), which does not skip a run."""
    from bot.prompt.workspace import read_text

    return read_text(str(workspace / "HEARTBEAT.md"), {}, root_real=os.path.realpath(workspace))


def last_of_agent(store: Store, cfg: Config, agent: str) -> dict | None:
    """The owner's last direct chat on an account bound to ``agent`` (the newest of them);
    with one agent and no bindings, simply the owner's last direct chat."""
    if not cfg.agents and not cfg.bindings:
        return owner_route.last(store, cfg)
    found = [
        route
        for channel, account in sorted(accounts_of_agent(cfg, agent))
        if (route := owner_route.last(store, cfg, account_key(channel, account))) is not None
    ]
    return max(found, key=lambda r: float(r.get("at") or 0), default=None)


def resolve_target(store: Store, cfg: Config, target: str, to: str, agent: str = "") -> dict | None:
    """Where a heartbeat or cron reply of ``agent`` (default: the default agent) goes:
    ``none``; ``last`` (the owner's last direct chat on a proactive channel account bound to
    that agent); or a channel id with ``to`` or the owner's last direct chat on that channel.
    Owner routes only (bot.conversation.owner_route): never a guest's chat."""
    if target == "none":
        return None
    if target == "last":
        return last_of_agent(store, cfg, agent or cfg.agent.id)
    route = owner_route.last(store, cfg, target) or {}
    if to:
        return {
            "channel": target,
            "chat_id": to,
            "account": route.get("account", "default"),
            "thread_id": None,
        }
    return route or None


def no_target_reason(target: str) -> str:
    """Why a heartbeat or cron reply has nowhere to go."""
    if target == "none":
        return "target = 'none'"
    where = "" if target == "last" else f" on {target}"
    return f"target = {target!r}: {owner_route.NO_ROUTE}{where}"


def _state_key(cfg: Config, agent: str, what: str) -> str:
    """The store key of an agent's heartbeat state (``heartbeat:last_run`` for the default
    agent, as with one agent; ``heartbeat:<id>:last_run`` for another)."""
    return f"heartbeat:{what}" if agent == cfg.agent.id else f"heartbeat:{agent}:{what}"


class Scheduled:
    """Runs heartbeat and cron turns, commits each with its reply, and hands the reply's
    stored row to the outbox.  Each turn belongs to an agent (``agents``: every agent by
    id): its heartbeat, its cron job; none given is the default agent."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        agents: Mapping[str, Agent],
        lanes: SessionLanes,
        outbox: Outbox,
        channels: dict[str, Channel],
        runner: Run | None = None,
    ):
        self.cfg = cfg
        self.store = store
        self.agents = agents
        self.lanes = lanes
        self.outbox = outbox
        self.channels = channels
        # the conversation's run stage (the daemon hands its own, so /stop reaches these turns)
        self.runner = runner or Run(agents or {}, TurnEvents())

    def _own(self, agent: str | None) -> Config:
        """Agent ``agent``'s view of the config (None: the default agent).  KeyError for an
        id that is no agent of this daemon."""
        return agent_config(self.cfg, agent or self.cfg.agent.id)

    async def _run(self, req: TurnRequest, route: dict | None):
        """The turn through the run stage, with the session's model and thinking level;
        None when it was stopped (``/stop``, the UI's Stop)."""
        key = req.session_key
        msg = InboundMessage(
            channel=route["channel"] if route else "schedule",
            chat_id=str(route["chat_id"]) if route else key,
            sender_id="",
            text=req.user_text,
        )
        own = self._own(req.agent)
        model, effort = session_choice(own, self.store, key)  # one read of its settings
        outcome = await self.runner.run(
            req, msg, None, None, lambda: None, model=model, effort=effort
        )
        return outcome.result

    # ------------------------------------------------------------------------ targets
    def resolve_target(self, target: str, to: str, agent: str = "") -> dict | None:
        return resolve_target(self.store, self.cfg, target, to, agent)

    def _request(
        self,
        key: str,
        text: str,
        *,
        kind: str,
        session_kind: str,
        route: dict | None,
        agent: str,
    ) -> TurnRequest:
        return scheduled_request(
            key,
            text,
            kind=kind,
            session_kind=session_kind,
            route=route,
            traits=route_traits(self.cfg, self.channels, route),
            agent=agent,
        )

    # ---------------------------------------------------------------------- heartbeat
    async def heartbeat(
        self, *, dry_run: bool = False, now: datetime | None = None, agent: str | None = None
    ) -> Outcome:
        """Agent ``agent``'s heartbeat (None: the default agent's), in its main session."""
        own = self._own(agent)
        hb = own.heartbeat
        key = main_key(own.agent.id)
        tz = zone(own)
        now = now or datetime.now(tz).astimezone()
        active = None
        if hb.active_hours:
            ah = hb.active_hours
            zname = ah.timezone or zone_name(own) or "UTC"
            active = (ah.start, ah.end, ZoneInfo(zname))
        decision = rules.decide(
            heartbeat_md=read_heartbeat_md(own.agent.workspace),
            now=now,
            active_hours=active,
            main_session_busy=self.lanes.busy(key),
        )
        if not decision.run:
            self.store.put(
                _state_key(self.cfg, own.agent.id, "last_run"),
                {"at": time.time(), "status": "skipped", "reason": decision.reason},
            )
            return Outcome("skipped", decision.reason)
        fut = self.lanes.submit(key, lambda: self._heartbeat_turn(key, now, dry_run, own))
        return await fut

    async def _heartbeat_turn(self, key: str, now: datetime, dry_run: bool, own: Config) -> Outcome:
        from bot.prompt.texts import DEFAULT_HEARTBEAT_PROMPT

        hb, agent = own.heartbeat, own.agent.id
        target = self.resolve_target(hb.target, hb.to, agent)
        text = rules.heartbeat_user_message(
            hb.prompt or DEFAULT_HEARTBEAT_PROMPT, now, zone_name(own) or "UTC"
        )
        req = self._request(
            key, text, kind="heartbeat", session_kind="heartbeat", route=target, agent=agent
        )
        result = await self._run(req, target)
        if result is None or result.error_kind == "budget":
            return _ended_early(result, f"heartbeat session={key}")
        plan = scheduled_plan(result, heartbeat=True, ack_max_chars=hb.ack_max_chars)
        if result.error:
            out = Outcome("failed", result.error)
        elif plan.silent:
            # an idle heartbeat leaves no trace in the session history
            out = Outcome("ack" if plan.ack else "silent")
        else:
            out = await self._alert(key, result, plan, target, dry_run, own)
        if not dry_run:
            self.store.put(
                _state_key(self.cfg, agent, "last_run"),
                {"at": time.time(), "status": out.status, "reason": out.reason},
            )
        log.info("heartbeat session=%s status=%s ms=%.0f", key, out.status, result.duration * 1000)
        return out

    async def _alert(
        self, key: str, result, plan, target: dict | None, dry_run: bool, own: Config
    ) -> Outcome:
        """A heartbeat with something to say: dropped when it repeats the last alert within
        24 h; else stored with its turn (and as the last alert) and sent."""
        hb, agent = own.heartbeat, own.agent.id
        alert_key = _state_key(self.cfg, agent, "last_alert")
        last = self.store.get(alert_key) or {}
        if rules.is_duplicate_alert(plan.text, last.get("text"), last.get("at"), time.time()):
            return Outcome("duplicate", "same alert already sent within 24 h", plan.text)
        if target is None:
            if not dry_run:
                self._commit(key, result, "heartbeat", agent)
            return Outcome("no-target", "heartbeat." + no_target_reason(hb.target), plan.text)
        if dry_run:
            return Outcome("dry-run", "", plan.text, target)
        alert = {"text": plan.text, "at": time.time()}
        status = await self._commit_and_send(
            key, result, plan, target, kind="heartbeat", state={alert_key: alert}, own=own
        )
        if status == "failed":  # refused for good: the next heartbeat may say it again
            self.store.put(alert_key, last)
        return Outcome(status, _DELIVERY_REASON[status], plan.text, target)

    def _commit(self, key: str, result, kind: str, agent: str) -> None:
        commit.scheduled(self.store, key, result, kind=kind, agent=agent)

    async def _commit_and_send(
        self,
        key: str,
        result,
        plan,
        route: dict,
        *,
        kind: str,
        own: Config,
        state: dict | None = None,
    ) -> str:
        """The turn, its reply's outbox row (and ``state``) in ONE transaction, as a chat
        turn is committed; then the outbox sends the row: 'delivered', 'queued' (retried)
        or 'failed'."""
        channel = route["channel"]
        ch = adapter_for(self.channels, channel, route.get("account") or "default")
        out = scheduled_outbound(own, ch, plan, route)
        ids = commit.scheduled(
            self.store,
            key,
            result,
            kind=kind,
            channel=channel,
            out=out,
            state=state,
            agent=own.agent.id,
        )
        try:  # the first attempt is awaited, but never for ever: the outbox goes on alone
            sent = await asyncio.wait_for(send.deliver_stored(self.outbox, ids), FIRST_ATTEMPT_WAIT)
        except TimeoutError:
            log.warning(
                "%s: the first delivery attempt did not finish within %.0fs; "
                "the outbox goes on with it in the background",
                kind,
                FIRST_ATTEMPT_WAIT,
            )
            sent = ["queued"]
        status = (sent or ["failed"])[0]
        return "delivered" if status == "sent" else status

    # --------------------------------------------------------------------------- cron
    async def run_cron(
        self, name: str, prompt: str, target: str, to: str, agent: str | None = None
    ) -> Outcome:
        """Cron job ``name`` as a turn of ``agent`` (None: the default agent)."""
        own = self._own(agent)
        key = cron_key(own.agent.id, name)
        return await self.lanes.submit(
            key, lambda: self._cron_turn(key, name, prompt, target, to, own)
        )

    async def _cron_turn(
        self, key: str, name: str, prompt: str, target: str, to: str, own: Config
    ) -> Outcome:
        agent = own.agent.id
        route = self.resolve_target(target, to, agent)
        now = datetime.now(zone(own)).astimezone()
        text = f"[Scheduled job {name!r} fired at {now.strftime('%Y-%m-%d %H:%M %Z')}]\n\n{prompt}"
        req = self._request(key, text, kind="cron", session_kind="cron", route=route, agent=agent)
        result = await self._run(req, route)
        if result is None or result.error_kind == "budget":
            return _ended_early(result, f"cron job={name}")
        plan = scheduled_plan(result, heartbeat=False)
        if plan.silent or route is None:
            self._commit(key, result, "cron", agent)
            out = (
                Outcome("silent")
                if plan.silent
                else Outcome("no-target", no_target_reason(target), plan.text)
            )
        else:
            status = await self._commit_and_send(key, result, plan, route, kind="cron", own=own)
            out = Outcome(status, _DELIVERY_REASON[status], plan.text, route)
        self.store.put(f"cron:last_run:{name}", {"at": time.time(), "status": out.status})
        log.info("cron job=%s session=%s status=%s", name, key, out.status)
        return out


def _ended_early(result: object, what: str) -> Outcome:
    """The outcome of a scheduled turn that never got to an answer: stopped (``/stop``:
    no result) or refused by the daily cost limit (the model was never called)."""
    if result is None:
        log.info("%s stopped", what)
        return Outcome("stopped", "stopped")
    return Outcome("skipped", "cost limit")
