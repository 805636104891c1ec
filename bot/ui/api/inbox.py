"""What waits on the owner: held exec commands (``/approve``/``/deny``), pairing
requests (``chela pairing approve``) and the outbox's failed deliveries (retry, discard);
and the triggers' event ledger (webhooks and mail with their verdicts, as ``chela hooks
log`` lists it)."""

from __future__ import annotations

import logging
import time

from aiohttp import web

from bot.conversation import pairing_requests as pairing
from bot.ui.hub import scrub_data, secret_values
from bot.ui.api.common import (
    BadRequest,
    body,
    conflict,
    decision_of,
    guarded,
    int_query,
    not_found,
    row_id,
    state,
)
from channels.best_effort import best_effort

log = logging.getLogger("chela.ui")

OUTBOX_STATES = ("failed", "queued", "sending")
EVENTS_LIMIT = 50  # ledger rows a page of the Inbox's Events shows (at most 200)


async def approvals(request: web.Request) -> web.Response:
    held = state(request).ctx.approvals
    return web.json_response({"approvals": held.listed() if held is not None else []})


async def decide_approval(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    code = request.match_info["code"].strip().upper()
    decision = decision_of(await body(request))
    outcome = ctx.approvals.decide(code, decision) if ctx.approvals is not None else "unknown"
    if outcome == "unknown":
        return not_found(f"no command is waiting with code {code}")
    if outcome == "already":
        return conflict(f"the command with code {code} was already decided")
    log.info("exec approval decided from the Control UI code=%s decision=%s", code, decision)
    return web.json_response({"code": code, "decision": decision})


async def pairing_requests(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    return web.json_response({"requests": pairing.pending(ctx.store)})


async def decide_pairing(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    channel, code = request.match_info["channel"], request.match_info["code"].strip().upper()
    decision = decision_of(await body(request))
    try:
        row = pairing.decide(ctx.store, channel, code, decision, notices=ctx.notices)  # type: ignore[arg-type]
    except pairing.PairingError as e:
        return not_found(str(e))
    if decision == "approve":  # as the daemon does for `chela pairing approve`, now
        with best_effort(
            log, "answering the approved sender's waiting message", level=logging.WARNING
        ):
            await ctx.conversation.pairing_approved(row["channel"], row["sender_id"])
    return web.json_response({"channel": channel, "code": code, "decision": decision})


async def outbox(request: web.Request) -> web.Response:
    wanted = request.query.get("state", "")
    if wanted and wanted not in OUTBOX_STATES:
        raise BadRequest("state must be failed, queued or sending")
    ctx = state(request).ctx
    items = ctx.store.outbox_items(wanted or None)
    secrets = tuple(secret_values(ctx.cfg))  # a platform error may quote a token
    return web.json_response({"items": scrub_data(items, secrets)})


def _row_id(request: web.Request) -> int:
    return row_id(request.match_info["id"], "id")


async def retry(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    row_id = _row_id(request)
    await body(request)
    if ctx.store.outbox_state(row_id) is None:
        return not_found(f"no outbox row {row_id}")
    if not ctx.store.outbox_requeue(row_id, time.time()):
        return conflict(f"outbox row {row_id} has not failed")
    ctx.outbox.enqueue([row_id])
    ctx.notices.publish("delivery.resolved", {"id": row_id, "state": "queued"})
    return web.json_response({"id": row_id, "state": "queued"})


async def discard(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    row_id = _row_id(request)
    await body(request)
    if ctx.store.outbox_state(row_id) is None:
        return not_found(f"no outbox row {row_id}")
    if not ctx.store.outbox_discard(row_id, time.time()):
        return conflict(f"outbox row {row_id} has not failed")
    ctx.notices.publish("delivery.resolved", {"id": row_id, "state": "discarded"})
    return web.json_response({"id": row_id, "state": "discarded"})


def _trigger_sources(cfg) -> dict[str, str]:
    """Each configured trigger's ledger name -> the session its turns run in."""
    from bot.triggers.events import session_key

    named = [(h.name, h.agent) for h in cfg.hooks] + [(f"mail:{m.name}", m.agent) for m in cfg.mail]
    return {name: session_key(agent or cfg.agent.id, name) for name, agent in named}


async def trigger_events(request: web.Request) -> web.Response:
    """The event ledger, newest first: ``source`` one trigger's, ``before`` an event id
    (the next page).  What ``chela hooks log`` shows, plus each event's header names and the
    start of its body or mail text; never a secret or a signature (neither is stored)."""
    ctx = state(request).ctx
    source = request.query.get("source", "")
    before = request.query.get("before", "")
    limit = int_query(request, "limit", EVENTS_LIMIT, 1, 200)
    rows = ctx.store.trigger_log(source or None, limit + 1, before or None)
    sessions = _trigger_sources(ctx.cfg)
    events = [{**r, "session": sessions.get(r["source"])} for r in rows[:limit]]
    for e in events:
        e.pop("payload", None)
    sources = [
        {"name": name, "kind": "mail" if name.startswith("mail:") else "hook"} for name in sessions
    ]
    return web.json_response({"events": events, "has_more": len(rows) > limit, "sources": sources})


def register(app: web.Application) -> None:
    app.router.add_get("/api/approvals", guarded(approvals))
    app.router.add_post("/api/approvals/{code}", guarded(decide_approval))
    app.router.add_get("/api/pairing", guarded(pairing_requests))
    app.router.add_post("/api/pairing/{channel}/{code}", guarded(decide_pairing))
    app.router.add_get("/api/outbox", guarded(outbox))
    app.router.add_post("/api/outbox/{id}/retry", guarded(retry))
    app.router.add_post("/api/outbox/{id}/discard", guarded(discard))
    app.router.add_get("/api/inbox/events", guarded(trigger_events))
