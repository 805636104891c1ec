"""Usage and cost of model calls: recording, the daily cost limits, ``/usage``
and ``chela usage``.

Every model call that answered is one row of the store's ``usage`` table (tokens and the
cost litellm's local cost map gives, 0 when the model is not in it), written by the model
gate (bot/model/gate.py), which also holds the daily limits.  A "day" is the local
calendar day in ``agent.timezone`` (the machine's zone when unset).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.config import Config
from bot.model.gate import budget_refusal, day_start
from bot.model.gate import money as _money
from bot.store import Store

__all__ = ["budget_refusal", "day_of", "day_start", "usage_report", "usage_table", "usage_text"]


def _zone(cfg: Config) -> ZoneInfo | None:
    return ZoneInfo(cfg.agent.timezone) if cfg.agent.timezone else None


def day_of(cfg: Config, ts: float) -> str:
    return datetime.fromtimestamp(ts, _zone(cfg)).strftime("%Y-%m-%d")


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


def usage_report(cfg: Config, store: Store, days: int, agent: str | None = None) -> dict[str, Any]:
    """``chela usage``: per day and model over the last ``days`` days (today included), of
    every agent or of ``agent`` only."""
    since = day_start(cfg, days_back=max(0, days - 1))
    per: dict[tuple[str, str], dict[str, Any]] = {}
    total = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    total_cost = 0.0
    for r in store.usage_rows(since):
        if agent is not None and r["agent"] != agent:
            continue
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
        "agent": agent,
        "since": datetime.fromtimestamp(since, _zone(cfg)).isoformat(),
        "rows": rows,
        "total": {**total, "cost_usd": total_cost},
    }


def usage_table(report: dict[str, Any]) -> str:
    from bot.reports.tables import table

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
