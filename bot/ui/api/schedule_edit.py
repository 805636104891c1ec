"""The Schedule page's edits, through the ``cron`` tool's own view of the scheduler (so the
running daemon schedules a job the moment it is saved):

- ``POST /ui/api/schedule/preview`` ``{"kind", "when"}``: the next run the job would have,
  checked as adding it checks it (400 saying why not);
- ``POST /ui/api/schedule`` ``{"name", "prompt", "kind", "when"}``: add a tool job (201);
- ``POST /ui/api/schedule/{name}/edit``: the same fields, replacing a tool job;
- ``DELETE /ui/api/schedule/{name}``: remove a tool job;
- ``GET /ui/api/schedule/ended``: one-shot jobs that ended (ran, failed or missed) in the
  last 7 days, from the ledger.

``kind`` is ``at``, ``in``, ``every`` or ``schedule``.  Jobs of ``config.toml`` (and the
heartbeat) are refused with 409: they are edited in the file."""

from __future__ import annotations

import inspect
import time
from typing import Any

from aiohttp import web

from bot.config import TARGETS
from bot.schedule.views import ui_status
from bot.ui.api.common import BadRequest, body, conflict, guarded, not_found, state
from bot.ui.context import Schedule, UiContext
from bot.ui.errors import ui_error

KINDS = ("at", "in", "every", "schedule")
ENDED_DAYS = 7
NAME_MAX = 64


def _schedule(ctx: UiContext) -> Schedule:
    if ctx.schedule is None:
        raise _Unavailable
    return ctx.schedule


class _Unavailable(Exception):
    pass


def _text(data: dict[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{key} is required")
    if len(value) > limit:
        raise BadRequest(f"{key} is longer than {limit} characters")
    return value.strip()


def _when(data: dict[str, Any]) -> dict[str, str]:
    kind = data.get("kind")
    if kind not in KINDS:
        raise BadRequest("kind must be one of at, in, every, schedule")
    return {str(kind): _text(data, "when", 200)}


def _job_fields(data: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """(name, prompt, {kind: when, "target", "to"}); ``target`` defaults to ``last``."""
    name = _text(data, "name", NAME_MAX)
    if any(c in name for c in "/\\\n\r\t") or name.startswith("."):
        raise BadRequest("name must be one line without slashes")
    target, to = data.get("target") or "last", data.get("to") or ""
    if target not in TARGETS:
        raise BadRequest(f"target must be one of {', '.join(TARGETS)}")
    if not isinstance(to, str) or len(to) > 200 or (to and target in ("last", "none")):
        raise BadRequest("to must be a chat id of the target channel")
    where = {"target": str(target), "to": to}
    return name, _text(data, "prompt", 20_000), {**_when(data), **where}


def _row(ctx: UiContext, name: str) -> dict[str, Any] | None:
    return next((j for j in _schedule(ctx).jobs() if j.get("name") == name), None)


def _tool_job(ctx: UiContext, name: str) -> dict[str, Any] | web.Response:
    row = _row(ctx, name)
    if row is None:
        return not_found(f"no scheduled job named {name}")
    if row.get("source") != "tool":
        return conflict(f"{name} comes from config.toml: edit it there (it can be paused)")
    return row


async def preview(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    when = _when(await body(request))
    try:
        nxt = _schedule(ctx).for_route({}).preview(**when)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return web.json_response({"next_run": nxt})


async def _add(ctx: UiContext, name: str, prompt: str, when: dict[str, str]) -> dict[str, Any]:
    await _schedule(ctx).for_route({}).add(name, prompt, **when)
    return _row(ctx, name) or {"name": name}


async def add(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    name, prompt, when = _job_fields(await body(request))
    if _row(ctx, name) is not None:
        return conflict(f"a job named {name} exists already (edit or remove it)")
    try:
        job = await _add(ctx, name, prompt, when)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return web.json_response({"job": job}, status=201)


async def edit(request: web.Request) -> web.Response:
    """Check the new schedule first, then remove the old job and add the new one (paused
    when the old one was); should the add still fail, the old job is put back."""
    ctx = state(request).ctx
    old_name = request.match_info["name"]
    new_name, prompt, when = _job_fields(await body(request))
    old = _tool_job(ctx, old_name)
    if isinstance(old, web.Response):
        return old
    if new_name != old_name and _row(ctx, new_name) is not None:
        return conflict(f"a job named {new_name} exists already")
    api = _schedule(ctx).for_route({})
    try:
        api.preview(**{k: v for k, v in when.items() if k not in ("target", "to")})
    except ValueError as e:
        raise BadRequest(str(e)) from None
    await api.remove(old_name)
    try:
        job = await _add(ctx, new_name, prompt, when)
    except ValueError as e:
        spec, target = old["spec"], str(old.get("target") or "last").split(":", 1)
        where = {"target": target[0], "to": target[1] if len(target) > 1 else ""}
        await api.add(old_name, old.get("prompt", ""), **{spec["kind"]: spec["when"]}, **where)
        raise BadRequest(str(e)) from None
    if old.get("paused"):
        result = _schedule(ctx).pause(new_name)
        if inspect.isawaitable(result):
            await result
        job = _row(ctx, new_name) or job
    return web.json_response({"job": job})


async def remove(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    name = request.match_info["name"]
    old = _tool_job(ctx, name)
    if isinstance(old, web.Response):
        return old
    removed = await _schedule(ctx).for_route({}).remove(name)
    if not removed:
        return not_found(f"no scheduled job named {name}")
    return web.json_response({"name": name, "removed": True})


async def ended(request: web.Request) -> web.Response:
    """The last ledger row of each one-shot job no longer scheduled, newest first."""
    ctx = state(request).ctx
    live = {j.get("name") for j in _schedule(ctx).jobs()}
    last: dict[str, dict[str, Any]] = {}
    for row in ctx.store.ledger_since(time.time() - ENDED_DAYS * 86400):
        if row["job"] in live or row["status"] == "running":
            continue
        seen = ctx.store.job_state(row["job"]) or {}
        if str(seen.get("spec", "")).startswith("at "):
            last[row["job"]] = row
    rows = [
        {
            "name": r["job"],
            "due": r["due"],
            "ended": r["ended"],
            "status": ui_status(r),
            "detail": r["reason"] or r["detail"],
        }
        for r in sorted(last.values(), key=lambda r: -r["due"])
    ]
    return web.json_response({"jobs": rows, "days": ENDED_DAYS})


def _available(handler):
    async def run(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except _Unavailable:
            return ui_error(503, "shutting_down", "The scheduler is not running.")

    run.__name__ = handler.__name__
    return guarded(run)


def register(app: web.Application) -> None:
    app.router.add_get("/api/schedule/ended", _available(ended))
    app.router.add_post("/api/schedule/preview", _available(preview))
    app.router.add_post("/api/schedule", _available(add))
    app.router.add_post("/api/schedule/{name}/edit", _available(edit))
    app.router.add_delete("/api/schedule/{name}", _available(remove))
