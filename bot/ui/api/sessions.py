"""``GET /ui/api/sessions`` and ``GET /ui/api/sessions/{key}/messages``."""

from __future__ import annotations

from aiohttp import web

from bot.ui.api import transcript
from bot.ui.api.common import guarded, int_query, row_id, session_trust, state


def _peer(key: str) -> str:
    parts = key.split(":")
    if len(parts) >= 5 and parts[3] in ("direct", "group", "channel"):
        return ":".join(parts[4:])
    if len(parts) >= 4 and parts[2] in ("direct", "http", "http-stateless"):
        return ":".join(parts[3:])
    return ""


def _agent(key: str) -> str:
    """The agent a session belongs to: its key names it (``agent:<id>:...``)."""
    parts = key.split(":")
    return parts[1] if len(parts) > 2 and parts[0] == "agent" else ""


async def list_sessions(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    q = request.query.get("q", "").strip()
    channel = request.query.get("channel", "").strip()
    agent = request.query.get("agent", "").strip()
    limit = int_query(request, "limit", 50, 1, 500)
    cursor = int_query(request, "cursor", 0, 0, 10**9)
    rows = ctx.store.sessions_list()
    if q:
        keep = transcript.search_keys(ctx.store, q)
        rows = [r for r in rows if r["key"] in keep]
    if channel:
        rows = [r for r in rows if transcript.channel_of(r["key"]) == channel]
    if agent:
        rows = [r for r in rows if _agent(r["key"]) == agent]
    costs = transcript.session_costs(ctx.store)
    page = rows[cursor : cursor + limit]
    sessions = [
        {
            "key": r["key"],
            "agent": _agent(r["key"]),
            "channel": transcript.channel_of(r["key"]),
            "peer": _peer(r["key"]),
            "trust": session_trust(ctx.cfg, r["key"]),
            "last_activity": r["updated"],
            "messages": r["messages"],
            "tokens": int(r["usage_in"]) + int(r["usage_out"]),
            "cost_usd": costs.get(r["key"], 0.0),
        }
        for r in page
    ]
    more = cursor + limit < len(rows)
    return web.json_response(
        {"sessions": sessions, "next_cursor": str(cursor + limit) if more else None}
    )


async def messages(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    key = request.match_info["key"]
    limit = int_query(request, "limit", 100, 1, 1000)
    raw_before = request.query.get("before", "")
    before = row_id(raw_before, "before") if raw_before else None
    msgs, has_more = transcript.messages(ctx.store, key, before=before, limit=limit)
    return web.json_response({"messages": msgs, "has_more": has_more})


def register(app: web.Application) -> None:
    app.router.add_get("/api/sessions", guarded(list_sessions))
    app.router.add_get("/api/sessions/{key}/messages", guarded(messages))
