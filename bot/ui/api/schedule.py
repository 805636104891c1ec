"""``GET /ui/api/schedule`` and ``POST /ui/api/schedule/{name}/run|pause|resume``:
the heartbeat and the cron jobs, through the scheduler's own port (``ctx.schedule``).  Until
the scheduler offers one, the heartbeat's row is told from the config."""

from __future__ import annotations

import inspect
from typing import Any

from aiohttp import web

from bot.ui.api.common import body, conflict, guarded, not_found, state
from bot.ui.context import UiContext
from bot.ui.errors import ui_error


def _heartbeat_row(ctx: UiContext) -> dict[str, Any]:
    hb = ctx.cfg.heartbeat
    on = hb.every_seconds > 0
    return {
        "name": "heartbeat",
        "kind": "heartbeat",
        "schedule": f"every {hb.every}" if on else "off",
        "target": hb.target,
        "paused": not on,
        "next_run": None,
        "last_run": None,
        "last_result": None,
    }


async def jobs(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    if ctx.schedule is None:
        return web.json_response({"jobs": [_heartbeat_row(ctx)]})
    return web.json_response({"jobs": list(ctx.schedule.jobs())})


async def _call(fn: Any, name: str) -> Any:
    result = fn(name)
    return await result if inspect.isawaitable(result) else result


async def _act(request: web.Request, action: str) -> web.Response:
    ctx = state(request).ctx
    name = request.match_info["name"]
    await body(request)
    if ctx.schedule is None:
        if name != "heartbeat":
            return not_found(f"no scheduled job named {name}")
        return ui_error(503, "shutting_down", "The scheduler is not running.")
    try:
        result = await _call(getattr(ctx.schedule, action), name)
    except KeyError:
        return not_found(f"no scheduled job named {name}")
    except (RuntimeError, ValueError) as e:
        return conflict(str(e) or f"{name} is already running")
    if result is None:
        return not_found(f"no scheduled job named {name}")
    if action == "run_now":
        run_id = result.get("run_id") if isinstance(result, dict) else result
        return web.json_response({"name": name, "run_id": str(run_id)}, status=202)
    paused = result.get("paused") if isinstance(result, dict) else action == "pause"
    return web.json_response({"name": name, "paused": bool(paused)})


async def run(request: web.Request) -> web.Response:
    return await _act(request, "run_now")


async def pause(request: web.Request) -> web.Response:
    return await _act(request, "pause")


async def resume(request: web.Request) -> web.Response:
    return await _act(request, "resume")


def register(app: web.Application) -> None:
    app.router.add_get("/api/schedule", guarded(jobs))
    app.router.add_post("/api/schedule/{name}/run", guarded(run))
    app.router.add_post("/api/schedule/{name}/pause", guarded(pause))
    app.router.add_post("/api/schedule/{name}/resume", guarded(resume))
