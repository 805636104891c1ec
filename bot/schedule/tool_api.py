"""The ``cron`` tool's view of the scheduler for one turn: ``add`` resolves
``in`` against the server clock and answers the next run as a local date-time with its zone;
a job delivers by default to the chat it was created from, or, from a chat that cannot be
reached later (the terminal, the HTTP API), to the owner's last direct chat; the answer
names where, and a job with nowhere to go is refused (so the model never promises it)."""

from __future__ import annotations

from typing import Any

from bot.config.durations import parse_duration
from bot.rules.admission import channel_policy
from bot.schedule.jobs import DEFAULT_CATCH_UP, Job, local, next_after, resolve_in
from bot.schedule.views import fmt_local, listing
from bot.schedule.where import delivery_words

ScheduleService = Any  # the service (bot.schedule.service), not imported: it imports this module


class ToolApi:
    def __init__(self, svc: ScheduleService, route: dict[str, Any] | None) -> None:
        self.svc = svc
        self.route = route or {}

    def _where(self, target: str, to: str) -> tuple[str, str]:
        if target:
            return target, to
        channel, chat = self.route.get("channel", ""), str(self.route.get("chat_id", ""))
        if channel and chat and channel_policy(self.svc.cfg, channel) is not None:
            return channel, chat  # back to the chat the job was created from
        return "last", ""

    def _kind(self, when: dict[str, str]) -> tuple[str, str]:
        given = {k: v.strip() for k, v in when.items() if v and v.strip()}
        if len(given) != 1:
            raise ValueError("give exactly one of at, in, every or schedule")
        kind, spec = next(iter(given.items()))
        if kind == "in":
            now = self.svc.clock.now()
            at = resolve_in(spec, now)
            return "at", local(at, self.svc.tz, "%Y-%m-%dT%H:%M:%S%z")
        return kind, spec

    async def add(self, name: str, prompt: str, *, catch_up: str = "", **when: str) -> str:
        target, to = self._where(when.pop("target", ""), when.pop("to", ""))
        kind, spec = self._kind(when)
        job = Job(
            name,
            kind,  # type: ignore[arg-type]
            spec,
            prompt=prompt,
            target=target,
            to=to,
            catch_up=parse_duration(catch_up) if catch_up else DEFAULT_CATCH_UP,
            source="tool",
            route=dict(self.route),
        )
        agent = str(self.route.get("agent") or "")
        where = delivery_words(self.svc, target, to, self.route, agent)  # ValueError: nowhere
        added = self.svc.add(job)
        nxt = next_after(added, self.svc.clock.now(), self.svc.tz)
        when_text = fmt_local(nxt, self.svc.tz) if nxt is not None else "never"
        return f"Scheduled job {name!r}; next run {when_text}; {where}."

    def preview(self, **when: str) -> float | None:
        """The next run a job with this ``at``/``in``/``every``/``schedule`` would have if
        added now, checked as :meth:`add` checks it (ValueError says why it is refused)."""
        kind, spec = self._kind(when)
        now = self.svc.clock.now()
        job = self.svc.registry.check(Job("preview", kind, spec, source="tool"), now)  # type: ignore[arg-type]
        return next_after(job, now, self.svc.tz)

    async def list(self) -> str:
        return listing(self.svc)

    async def remove(self, name: str) -> bool:
        return self.svc.remove(name)

    async def pause(self, name: str) -> bool:
        return self.svc.pause(name)

    async def resume(self, name: str) -> bool:
        return self.svc.resume(name)

    async def run_now(self, name: str) -> str:
        return await self.svc.run_now(name)
