"""``GET /ui/api/logs?level=&since=&limit=``: the daemon's recent log lines,
scrubbed of every secret value (bot/ui/hub.py keeps them)."""

from __future__ import annotations

from aiohttp import web

from bot.ui.api.common import BadRequest, guarded, int_query, state
from bot.ui.hub import LEVELS


async def logs(request: web.Request) -> web.Response:
    hub = state(request).hub
    level = request.query.get("level", "").lower()
    if level and level not in LEVELS:
        raise BadRequest("level must be debug, info, warning or error")
    raw = request.query.get("since", "")
    try:
        since = float(raw) if raw else None
    except ValueError:
        raise BadRequest("since must be a time in Unix seconds") from None
    limit = int_query(request, "limit", 200, 1, 2000)
    return web.json_response({"lines": hub.select(level, since, limit)})


def register(app: web.Application) -> None:
    app.router.add_get("/api/logs", guarded(logs))
