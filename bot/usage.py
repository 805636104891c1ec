"""Usage and cost of model calls (SPEC §12): recording, the daily cost limits, ``/usage``
and ``chela usage``.

Every model call that answered is one row of the store's ``usage`` table (tokens and the
cost litellm's local cost map gives, 0 when the model is not in it).  A "day" is the local
calendar day in ``agent.timezone`` (the machine's zone when unset).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.config import Config
from bot.store import Store


def _zone(cfg: Config) -> ZoneInfo | None:
    return ZoneInfo(cfg.agent.timezone) if cfg.agent.timezone else None


def day_start(cfg: Config, now: float | None = None, days_back: int = 0) -> float:
    """Epoch seconds of the start of today (minus ``days_back`` days) in the agent's zone."""
    tz = _zone(cfg)
    current = datetime.fromtimestamp(now, tz) if now is not None else datetime.now(tz)
    midnight = current.replace(hour=0, minute=0, second=0, microsecond=0)
    if days_back:
        # calendar days, not 24 h steps (a DST change makes one day 23 or 25 hours)
        d = (midnight - timedelta(days=days_back)).date()
        midnight = datetime(d.year, d.month, d.day, tzinfo=tz)
    return midnight.timestamp()


def day_of(cfg: Config, ts: float) -> str:
    return datetime.fromtimestamp(ts, _zone(cfg)).strftime("%Y-%m-%d")


def recorder(store: Store, session_key: str, turn: str, *, kind: str, trust: str) -> Callable:
    """``on_call`` for the agent loop: one usage row per model call."""

    def record(comp: Any) -> None:
        u = comp.usage
        store.add_usage(
            session_key,
            turn,
            comp.model or "",
            prompt_tokens=u.get("prompt_tokens", 0),
            completion_tokens=u.get("completion_tokens", 0),
            cached_tokens=u.get("cached_tokens", 0),
            cost_usd=comp.cost,
            kind=kind,
            trust=trust,
        )

    return record


def budget_refusal(cfg: Config, store: Store, trust: str, now: float | None = None) -> str | None:
    """Why no model call may be made now (a daily cost limit was reached), or None.

    ``agent.daily_cost_limit_usd`` counts every call of the day; for a guest turn
    ``agent.guest_daily_cost_limit_usd`` also counts the calls of all guest turns."""
    a = cfg.agent
    guest_limit = a.guest_daily_cost_limit_usd if trust == "guest" else 0.0
    if not a.daily_cost_limit_usd and not guest_limit:
        return None
    since = day_start(cfg, now)
    if a.daily_cost_limit_usd:
        spent = store.usage_totals(since)["cost_usd"]
        if spent >= a.daily_cost_limit_usd:
            if trust == "guest":
                return "The assistant's budget for today is used up. Please try again tomorrow."
            return (
                f"Today's model budget of {_money(a.daily_cost_limit_usd)} "
                f"(agent.daily_cost_limit_usd) is used up: no more model calls until midnight."
            )
    if guest_limit:
        spent = store.usage_totals(since, trust="guest")["cost_usd"]
        if spent >= guest_limit:
            return (
                "The assistant's budget for guests is used up for today. Please try again tomorrow."
            )
    return None


def _money(v: float) -> str:
    return f"${v:.4f}" if v < 1 else f"${v:.2f}"


def _line(label: str, t: dict[str, Any]) -> str:
    cached = f", {t['cached_tokens']} cached" if t["cached_tokens"] else ""
    return (
        f"{label}: {_money(t['cost_usd'])} over {t['calls']} model call"
        f"{'' if t['calls'] == 1 else 's'} ({t['prompt_tokens']} prompt{cached} / "
        f"{t['completion_tokens']} completion tokens)"
    )


def usage_text(cfg: Config, store: Store, session_key: str, trust: str) -> str:
    """The answer to ``/usage``: this conversation today, and (for the owner) everything
    today and the limits."""
    since = day_start(cfg)
    lines = [_line("This conversation today", store.usage_totals(since, session_key=session_key))]
    a = cfg.agent
    if trust == "owner":
        total = store.usage_totals(since)
        lines.append(_line("All conversations today", total))
        if a.daily_cost_limit_usd:
            left = max(0.0, a.daily_cost_limit_usd - total["cost_usd"])
            lines.append(f"Daily limit: {_money(a.daily_cost_limit_usd)} ({_money(left)} left)")
        if a.guest_daily_cost_limit_usd:
            guests = store.usage_totals(since, trust="guest")["cost_usd"]
            lines.append(
                f"Guest daily limit: {_money(a.guest_daily_cost_limit_usd)} "
                f"({_money(max(0.0, a.guest_daily_cost_limit_usd - guests))} left)"
            )
    elif a.guest_daily_cost_limit_usd and budget_refusal(cfg, store, "guest"):
        lines.append("The budget for guests is used up for today.")
    return "\n".join(lines)


def usage_report(cfg: Config, store: Store, days: int) -> dict[str, Any]:
    """``chela usage``: per day and model over the last ``days`` days (today included)."""
    since = day_start(cfg, days_back=max(0, days - 1))
    per: dict[tuple[str, str], dict[str, Any]] = {}
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    total_cost = 0.0
    for r in store.usage_rows(since):
        key = (day_of(cfg, r["created"]), r["model"])
        row = per.setdefault(
            key,
            {
                "day": key[0],
                "model": key[1],
                "calls": 0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cached_tokens": 0,
                "cost_usd": 0.0,
            },
        )
        row["calls"] += 1
        total["calls"] += 1
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            row[k] += r[k]
            total[k] += r[k]
        row["cost_usd"] += r["cost_usd"]
        total_cost += r["cost_usd"]
    rows = [per[k] for k in sorted(per)]
    return {
        "days": days,
        "since": datetime.fromtimestamp(since, _zone(cfg)).isoformat(),
        "rows": rows,
        "total": {**total, "cost_usd": total_cost},
    }


def usage_table(report: dict[str, Any]) -> str:
    from bot.status import table

    head = ["DAY", "MODEL", "CALLS", "PROMPT", "CACHED", "COMPLETION", "COST USD"]
    body = [
        [
            r["day"],
            r["model"],
            str(r["calls"]),
            str(r["prompt_tokens"]),
            str(r["cached_tokens"]),
            str(r["completion_tokens"]),
            f"{r['cost_usd']:.4f}",
        ]
        for r in report["rows"]
    ]
    t = report["total"]
    body.append(
        [
            "total",
            "",
            str(t["calls"]),
            str(t["prompt_tokens"]),
            str(t["cached_tokens"]),
            str(t["completion_tokens"]),
            f"{t['cost_usd']:.4f}",
        ]
    )
    return table(head, body)
