"""``GET /ui/api/usage?days=N&by=day|model|session|source|agent[&agent=ID]``: the model
calls of the last N days (of one agent with ``agent``); ``total`` is ``chela usage --days N
[--agent ID] --json``'s (the same report)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.config import agent_ids
from bot.model.gate import day_start
from bot.ui.api.common import BadRequest, guarded, int_query, state
from bot.reports.usage import day_of, usage_report

BY = ("day", "model", "session", "source", "agent")
COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def _key(cfg: Any, row: dict[str, Any], by: str) -> str:
    if by == "day":
        return day_of(cfg, row["created"])
    if by == "model":
        return str(row["model"])
    if by == "session":
        return str(row["session_key"])
    if by == "agent":
        return str(row["agent"])
    return str(row["kind"])


def group(cfg: Any, rows: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        k = _key(cfg, r, by)
        acc = out.setdefault(k, {"key": k, "calls": 0, **dict.fromkeys(COUNTS, 0), "cost_usd": 0.0})
        acc["calls"] += 1
        for c in COUNTS:
            acc[c] += int(r[c] or 0)
        acc["cost_usd"] += float(r["cost_usd"] or 0.0)
    return sorted(out.values(), key=lambda a: a["key"])


def budgets(ctx: Any) -> dict[str, Any]:
    a = ctx.cfg.agent
    today = day_start(ctx.cfg)
    return {
        "daily_cost_limit_usd": a.daily_cost_limit_usd or None,
        "spent_today_usd": ctx.store.usage_totals(today)["cost_usd"],
        "guest_daily_cost_limit_usd": getattr(a, "guest_daily_cost_limit_usd", None) or None,
        "guest_spent_today_usd": ctx.store.usage_totals(today, trust="guest")["cost_usd"],
    }


async def usage(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    days = int_query(request, "days", 1, 1, 3660)
    by = request.query.get("by", "model") or "model"
    if by not in BY:
        raise BadRequest("by must be day, model, session, source or agent")
    agent = request.query.get("agent", "").strip() or None
    if agent is not None and agent not in agent_ids(ctx.cfg):
        raise BadRequest(f"unknown agent {agent!r}")
    report = usage_report(ctx.cfg, ctx.store, days, agent)
    rows = ctx.store.usage_rows(day_start(ctx.cfg, days_back=days - 1))
    rows = [r for r in rows if agent is None or r["agent"] == agent]
    return web.json_response(
        {
            "days": days,
            "since": report["since"],
            "by": by,
            "agent": agent,
            "agents": agent_ids(ctx.cfg),
            "rows": group(ctx.cfg, rows, by),
            "total": report["total"],
            "budgets": budgets(ctx),
        }
    )


def register(app: web.Application) -> None:
    app.router.add_get("/api/usage", guarded(usage))
