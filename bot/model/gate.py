"""The one gate every model call passes.

Turns, compaction summaries, memory flushes, sub-agents, transcription and speech all run
for one trust level: before the call the gate says whether that level's daily budget
allows it, after the call it records the usage and cost (one row of the store's ``usage``
table, with the agent the call was made for).  Budgets are per agent: an agent's
``daily_cost_limit_usd`` counts every call of the day made for that agent; for a guest call
its ``guest_daily_cost_limit_usd`` also counts the calls it made for all guests.

The gate knows nothing of the config or store classes (it sits below them in the house's
layers): it reads ``cfg.agent`` and calls ``store.usage_totals`` / ``store.add_usage``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

GUEST_USED_UP = "The assistant's budget for guests is used up for today. Please try again tomorrow."
ALL_USED_UP_GUEST = "The assistant's budget for today is used up. Please try again tomorrow."


class BudgetRefused(Exception):
    """A model call the daily budget does not allow; ``message`` is for the user."""

    def __init__(self, message: str, purpose: str) -> None:
        super().__init__(message)
        self.message = message
        self.purpose = purpose


def day_start(cfg: Any, now: float | None = None, days_back: int = 0) -> float:
    """Epoch seconds of the start of today (minus ``days_back`` days) in the agent's zone."""
    tz = ZoneInfo(cfg.agent.timezone) if cfg.agent.timezone else None
    current = datetime.fromtimestamp(now, tz) if now is not None else datetime.now(tz)
    midnight = current.replace(hour=0, minute=0, second=0, microsecond=0)
    if days_back:
        # calendar days, not 24 h steps (a DST change makes one day 23 or 25 hours)
        d = (midnight - timedelta(days=days_back)).date()
        midnight = datetime(d.year, d.month, d.day, tzinfo=tz)
    return midnight.timestamp()


def money(v: float) -> str:
    return f"${v:.4f}" if v < 1 else f"${v:.2f}"


def budget_refusal(cfg: Any, store: Any, trust: str, now: float | None = None) -> str | None:
    """Why no model call may be made now for ``trust`` (a daily cost limit was reached),
    or None."""
    a = cfg.agent
    guest_limit = a.guest_daily_cost_limit_usd if trust == "guest" else 0.0
    if not a.daily_cost_limit_usd and not guest_limit:
        return None
    since = day_start(cfg, now)
    spent = store.usage_totals(since, agent=a.id)["cost_usd"] if a.daily_cost_limit_usd else 0.0
    if a.daily_cost_limit_usd and spent >= a.daily_cost_limit_usd:
        if trust == "guest":
            return ALL_USED_UP_GUEST
        return (
            f"Today's model budget of {money(a.daily_cost_limit_usd)} "
            f"(agent.daily_cost_limit_usd) is used up: no more model calls until midnight."
        )
    if guest_limit:
        guests = store.usage_totals(since, trust="guest", agent=a.id)["cost_usd"]
        if guests >= guest_limit:
            return GUEST_USED_UP
    return None


class ModelGate:
    """Budget before, usage after, for every model call (see the module doc)."""

    def __init__(self, cfg: Any, store: Any) -> None:
        self.cfg = cfg
        self.store = store

    def refusal(self, trust: str) -> str | None:
        """The budget's refusal for a call made for ``trust`` now, or None."""
        return budget_refusal(self.cfg, self.store, trust)

    def check(self, trust: str, purpose: str) -> None:
        """Raise :class:`BudgetRefused` when a ``purpose`` call for ``trust`` may not run."""
        why = self.refusal(trust)
        if why is not None:
            raise BudgetRefused(why, purpose)

    def record(
        self,
        trust: str,
        purpose: str,
        model: str,
        usage: dict[str, int] | None,
        cost: float,
        session: str,
        turn: str = "",
    ) -> None:
        """One usage row: the call's tokens and cost, its purpose (the ``kind`` column:
        chat, heartbeat, cron, subagent, compaction, transcription, speech) and trust."""
        u = usage or {}
        self.store.add_usage(
            session,
            turn,
            model or "",
            prompt_tokens=u.get("prompt_tokens", 0),
            completion_tokens=u.get("completion_tokens", 0),
            cached_tokens=u.get("cached_tokens", 0),
            cost_usd=float(cost or 0.0),
            kind=purpose,
            trust=trust,
            agent=self.cfg.agent.id,
        )

    def bind(self, trust: str, session: str, turn: str = "") -> GateCall:
        """The gate for the calls made for one conversation at one trust level."""
        return GateCall(self, trust, session, turn)


@dataclass(frozen=True)
class GateCall:
    """The gate with the trust level and session the calls run for, so the trust level
    travels with the call (a guest's voice note is transcribed as a guest call)."""

    gate: ModelGate
    trust: str
    session: str
    turn: str = ""

    def refusal(self) -> str | None:
        return self.gate.refusal(self.trust)

    def check(self, purpose: str) -> None:
        self.gate.check(self.trust, purpose)

    def record(self, purpose: str, model: str, usage: dict[str, int] | None, cost: float) -> None:
        self.gate.record(self.trust, purpose, model, usage, cost, self.session, self.turn)

    def recorder(self, purpose: str) -> Callable[[Any], None]:
        """A model client's per-call hook (``bot.model.ON_CALL``): records each
        completion (its ``model``, ``usage`` and ``cost``) for this call's purpose."""

        def record(comp: Any) -> None:
            self.record(purpose, comp.model or "", comp.usage, comp.cost)

        return record
