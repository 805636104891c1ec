"""Scheduled turns: heartbeats (SPEC §6) and cron jobs.

Both enter like a channel does: they build a ``TurnRequest`` for a session, run it on the
session's lane (so they never overlap a user's turn), and commit like a chat turn: the turn
and its reply's outbox row are stored in ONE transaction (``Store.commit_turn``), then the
outbox sends the row.  A crash between the two sends it after the restart, once; the turn
is never "sent but not stored" nor "stored but never sent".
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.rules import heartbeat as rules
from bot import owner_route
from bot.rules.admission import channel_policy
from bot.agent.turn import Agent, TurnRequest, zone, zone_name
from bot.config import Config
from bot.conversation import commit
from bot.conversation.reply import scheduled_outbound, scheduled_plan
from bot.conversation.requests import Traits, scheduled_request
from bot.delivery import send
from bot.delivery.outbound import channel_traits
from bot.delivery.outbox import Outbox
from bot.sessions import SessionLanes, cron_key, main_key
from bot.store import Store
from channels.base import Channel

log = logging.getLogger("chela.heartbeat")

BUSY_RETRY_SECONDS = 30.0
FIRST_ATTEMPT_WAIT = 10.0  # seconds a heartbeat or cron run waits for its send's first attempt
STATELESS_MARKER = (
    "-stateless:"  # the session key of a request without `user` (bot/rules/admission.py)
)
STATELESS_KEEP = 86400.0  # seconds a stateless HTTP API session is kept after its request
_DELIVERY_REASON = {
    "delivered": "",
    "queued": "the platform did not take it yet; stored and retried",
    "failed": "delivery failed",
}


@dataclass
class Outcome:
    status: str  # skipped | ack | silent | duplicate | no-target | delivered | queued | dry-run | failed
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


def resolve_target(store: Store, cfg: Config, target: str, to: str) -> dict | None:
    """Where a heartbeat or cron reply goes: ``none``; ``last`` (the owner's last direct
    chat on a proactive channel); or a channel id with ``to`` or the owner's last direct
    chat on that channel.  Owner routes only (bot.owner_route): never a guest's chat."""
    if target == "none":
        return None
    if target == "last":
        return owner_route.last(store, cfg)
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


class Scheduled:
    """Runs heartbeat and cron turns, commits each with its reply, and hands the reply's
    stored row to the outbox."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        agent: Agent,
        lanes: SessionLanes,
        outbox: Outbox,
        channels: dict[str, Channel],
    ):
        self.cfg = cfg
        self.store = store
        self.agent = agent
        self.lanes = lanes
        self.outbox = outbox
        self.channels = channels

    # ------------------------------------------------------------------------ targets
    def resolve_target(self, target: str, to: str) -> dict | None:
        return resolve_target(self.store, self.cfg, target, to)

    def _request(
        self, key: str, text: str, *, kind: str, session_kind: str, route: dict | None
    ) -> TurnRequest:
        caps, reactions = (
            channel_traits(
                self.channels.get(route["channel"]), channel_policy(self.cfg, route["channel"])
            )
            if route
            else ((), "off")
        )
        return scheduled_request(
            key,
            text,
            kind=kind,
            session_kind=session_kind,
            route=route,
            traits=Traits(caps, reactions),
        )

    # ---------------------------------------------------------------------- heartbeat
    async def heartbeat(self, *, dry_run: bool = False, now: datetime | None = None) -> Outcome:
        hb = self.cfg.heartbeat
        key = main_key(self.cfg.agent.id)
        tz = zone(self.cfg)
        now = now or datetime.now(tz).astimezone()
        active = None
        if hb.active_hours:
            ah = hb.active_hours
            zname = ah.timezone or zone_name(self.cfg) or "UTC"
            active = (ah.start, ah.end, ZoneInfo(zname))
        decision = rules.decide(
            heartbeat_md=read_heartbeat_md(self.cfg.agent.workspace),
            now=now,
            active_hours=active,
            main_session_busy=self.lanes.busy(key),
        )
        if not decision.run:
            self.store.put(
                "heartbeat:last_run",
                {"at": time.time(), "status": "skipped", "reason": decision.reason},
            )
            return Outcome("skipped", decision.reason)
        fut = self.lanes.submit(key, lambda: self._heartbeat_turn(key, now, dry_run))
        return await fut

    async def _heartbeat_turn(self, key: str, now: datetime, dry_run: bool) -> Outcome:
        from bot.prompt.texts import DEFAULT_HEARTBEAT_PROMPT

        hb = self.cfg.heartbeat
        target = self.resolve_target(hb.target, hb.to)
        text = rules.heartbeat_user_message(
            hb.prompt or DEFAULT_HEARTBEAT_PROMPT, now, zone_name(self.cfg) or "UTC"
        )
        result = await self.agent.run_turn(
            self._request(key, text, kind="heartbeat", session_kind="heartbeat", route=target)
        )
        plan = scheduled_plan(result, heartbeat=True, ack_max_chars=hb.ack_max_chars)
        if result.error:
            out = Outcome("failed", result.error)
        elif plan.silent:
            # an idle heartbeat leaves no trace in the session history
            out = Outcome("ack" if plan.ack else "silent")
        else:
            out = await self._alert(key, result, plan, target, dry_run)
        if not dry_run:
            self.store.put(
                "heartbeat:last_run",
                {"at": time.time(), "status": out.status, "reason": out.reason},
            )
        log.info("heartbeat session=%s status=%s ms=%.0f", key, out.status, result.duration * 1000)
        return out

    async def _alert(self, key: str, result, plan, target: dict | None, dry_run: bool) -> Outcome:
        """A heartbeat with something to say: dropped when it repeats the last alert within
        24 h; else stored with its turn (and as the last alert) and sent."""
        hb = self.cfg.heartbeat
        last = self.store.get("heartbeat:last_alert") or {}
        if rules.is_duplicate_alert(plan.text, last.get("text"), last.get("at"), time.time()):
            return Outcome("duplicate", "same alert already sent within 24 h", plan.text)
        if target is None:
            if not dry_run:
                self._commit(key, result, "heartbeat")
            return Outcome("no-target", "heartbeat." + no_target_reason(hb.target), plan.text)
        if dry_run:
            return Outcome("dry-run", "", plan.text, target)
        alert = {"text": plan.text, "at": time.time()}
        status = await self._commit_and_send(
            key, result, plan, target, kind="heartbeat", state={"heartbeat:last_alert": alert}
        )
        if status == "failed":  # refused for good: the next heartbeat may say it again
            self.store.put("heartbeat:last_alert", last)
        return Outcome(status, _DELIVERY_REASON[status], plan.text, target)

    def _commit(self, key: str, result, kind: str) -> None:
        commit.scheduled(self.store, key, result, kind=kind)

    async def _commit_and_send(
        self, key: str, result, plan, route: dict, *, kind: str, state: dict | None = None
    ) -> str:
        """The turn, its reply's outbox row (and ``state``) in ONE transaction, as a chat
        turn is committed; then the outbox sends the row: 'delivered', 'queued' (retried)
        or 'failed'."""
        channel = route["channel"]
        out = scheduled_outbound(self.cfg, self.channels.get(channel), plan, route)
        ids = commit.scheduled(
            self.store, key, result, kind=kind, channel=channel, out=out, state=state
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
    async def run_cron(self, name: str, prompt: str, target: str, to: str) -> Outcome:
        key = cron_key(self.cfg.agent.id, name)
        return await self.lanes.submit(key, lambda: self._cron_turn(key, name, prompt, target, to))

    async def _cron_turn(self, key: str, name: str, prompt: str, target: str, to: str) -> Outcome:
        route = self.resolve_target(target, to)
        now = datetime.now(zone(self.cfg)).astimezone()
        text = f"[Scheduled job {name!r} fired at {now.strftime('%Y-%m-%d %H:%M %Z')}]\n\n{prompt}"
        result = await self.agent.run_turn(
            self._request(key, text, kind="cron", session_kind="cron", route=route)
        )
        plan = scheduled_plan(result, heartbeat=False)
        if plan.silent or route is None:
            self._commit(key, result, "cron")
            out = (
                Outcome("silent")
                if plan.silent
                else Outcome("no-target", no_target_reason(target), plan.text)
            )
        else:
            status = await self._commit_and_send(key, result, plan, route, kind="cron")
            out = Outcome(status, _DELIVERY_REASON[status], plan.text, route)
        self.store.put(f"cron:last_run:{name}", {"at": time.time(), "status": out.status})
        log.info("cron job=%s session=%s status=%s", name, key, out.status)
        return out


class CronService:
    """APScheduler 3 ``AsyncIOScheduler`` with the heartbeat and every cron job; also the
    object behind the agent's ``cron`` tool (add / list / remove)."""

    def __init__(self, cfg: Config, store: Store, scheduled: Scheduled):
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.cfg = cfg
        self.store = store
        self.scheduled = scheduled
        self.scheduler = AsyncIOScheduler(timezone=zone(cfg) or None)
        self._retry: asyncio.TimerHandle | None = None

    def start(self) -> None:
        every = self.cfg.heartbeat.every_seconds
        if every > 0:
            self.scheduler.add_job(
                self._heartbeat_tick,
                "interval",
                seconds=every,
                id="heartbeat",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=max(1, int(every)),
            )
        for job in self.cfg.cron:
            self._schedule(job.name, job.schedule, job.prompt, job.target, job.to, source="config")
        for row in self.store.cron_jobs():
            self._schedule(
                row["name"], row["schedule"], row["prompt"], row["target"], row["to"], source="tool"
            )
        # downloaded media older than media.retention_days goes (SPEC §9.4): soon after start, then hourly
        self.scheduler.add_job(
            self.prune_media,
            "interval",
            hours=1,
            id="prune-media",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(self.scheduler.timezone),
        )
        self.scheduler.start()

    async def prune_media(self) -> int:
        """Delete inbound media past its retention: the owner's media dir and each guest's.
        Also the HTTP API's stateless sessions a day after their request (nothing continues
        them; their usage rows stay)."""
        from bot.private import prune_older_than

        try:
            gone = self.store.prune_throwaway_sessions(
                STATELESS_MARKER, time.time() - STATELESS_KEEP
            )
            if gone:
                log.info("pruned %d stateless HTTP API session(s)", gone)
        except Exception:
            log.exception("pruning stateless sessions failed")

        days = self.cfg.media.retention_days
        dirs = [self.cfg.media_dir, *sorted(self.cfg.guests_dir.glob("*/media"))]
        try:
            removed = sum(
                [await asyncio.to_thread(prune_older_than, d, days) for d in dirs if d.is_dir()]
            )
        except asyncio.CancelledError:
            return 0  # shutting down: the next start prunes again
        except Exception:
            log.exception("pruning media failed")
            return 0
        if removed:
            log.info("pruned %d media file(s) older than %g days", removed, days)
        return removed

    def shutdown(self) -> None:
        if self._retry:
            self._retry.cancel()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def _schedule(
        self, name: str, schedule: str, prompt: str, target: str, to: str, *, source: str
    ) -> None:
        from apscheduler.triggers.cron import CronTrigger

        trigger = CronTrigger.from_crontab(schedule, timezone=zone(self.cfg) or None)
        self.scheduler.add_job(
            self._cron_tick,
            trigger,
            args=[name, prompt, target, to],
            id=f"cron:{name}",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=300,
        )
        log.info("cron job %s scheduled (%s) from %s", name, schedule, source)

    async def _heartbeat_tick(self) -> None:
        try:
            out = await self.scheduled.heartbeat()
        except Exception:
            log.exception("heartbeat failed")
            return
        if out.status == "skipped" and out.reason == rules.REASON_BUSY:
            loop = asyncio.get_running_loop()
            self._retry = loop.call_later(
                BUSY_RETRY_SECONDS, lambda: asyncio.ensure_future(self._heartbeat_tick())
            )

    async def _cron_tick(self, name: str, prompt: str, target: str, to: str) -> None:
        try:
            await self.scheduled.run_cron(name, prompt, target, to)
        except Exception:
            log.exception("cron job %s failed", name)

    # ------------------------------------------------------------- the cron tool's API
    async def add(
        self, name: str, schedule: str, prompt: str, target: str = "last", to: str = ""
    ) -> str:
        from bot.config import CronJob

        job = CronJob(
            name=name, schedule=schedule, prompt=prompt, target=target or "last", to=to or ""
        )
        self.store.add_cron_job(job.name, job.schedule, job.prompt, job.target, job.to)
        if self.scheduler.running:
            self._schedule(job.name, job.schedule, job.prompt, job.target, job.to, source="tool")
        return f"scheduled {job.name} ({job.schedule})"

    async def list(self) -> list[dict]:
        jobs = [{**j, "source": "tool"} for j in self.store.cron_jobs()]
        jobs += [
            {
                "name": j.name,
                "schedule": j.schedule,
                "prompt": j.prompt,
                "target": j.target,
                "to": j.to,
                "source": "config",
            }
            for j in self.cfg.cron
        ]
        return jobs

    async def remove(self, name: str) -> bool:
        removed = self.store.remove_cron_job(name)
        if removed and self.scheduler.get_job(f"cron:{name}"):
            self.scheduler.remove_job(f"cron:{name}")
        return removed
