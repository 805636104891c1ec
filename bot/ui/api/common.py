"""What every API route module shares: the per-daemon state behind the routes, reading a
JSON body, the trust of a session key, and answers in §16.4's shapes."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.conversation.web import WebTurns
from bot.rules.admission import channel_policy, is_owner_sender
from bot.ui.context import UiContext
from bot.ui.errors import ui_error
from bot.ui.guard import read_json_body
from bot.ui.hub import LogHub, SessionWatch, secret_values
from bot.ui.turns import TurnLogs
from channels.base import InboundMessage
from channels.redact import redact_values

CLIENT_MSG_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # matched whole (fullmatch)


@dataclass
class Uploads:
    """Files the page uploaded, by id, until a message takes them."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ApiState:
    ctx: UiContext
    web: WebTurns
    logs: TurnLogs
    hub: LogHub
    sessions: SessionWatch
    uploads: Uploads
    closing: asyncio.Event = field(default_factory=asyncio.Event)  # the app shuts down


_STATES: dict[int, ApiState] = {}
STATE = web.AppKey("chela_ui_api", ApiState)


def _forget(key: int, hub: LogHub) -> None:
    hub.detach(logging.getLogger("chela"))
    _STATES.pop(key, None)


def state_for(ctx: UiContext) -> ApiState:
    """One state per daemon (the UI app is built again at each HTTP channel start)."""
    st = _STATES.get(id(ctx))
    if st is not None and st.ctx is ctx:
        return st
    hub = LogHub(lambda: secret_values(ctx.cfg))
    hub.attach(logging.getLogger("chela"))
    st = ApiState(
        ctx=ctx,
        web=WebTurns(ctx.conversation),
        logs=TurnLogs(),
        hub=hub,
        sessions=SessionWatch(ctx.store, ctx.notices),
        uploads=Uploads(),
    )
    _STATES[id(ctx)] = st
    weakref.finalize(ctx, _forget, id(ctx), hub)
    return st


def state(request: web.Request) -> ApiState:
    return request.app[STATE]


class BadRequest(Exception):
    """A missing or invalid field: answered 400 ``bad_request`` naming it."""


def bad(message: str) -> web.Response:
    return ui_error(400, "bad_request", message)


def not_found(message: str) -> web.Response:
    return ui_error(404, "not_found", message)


def conflict(message: str) -> web.Response:
    return ui_error(409, "conflict", message)


async def body(request: web.Request) -> dict[str, Any]:
    """The JSON object of the request (``{}`` for an empty body)."""
    raw = await read_json_body(request)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("the body is not valid JSON (or is nested too deeply)") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def decision_of(data: dict[str, Any]) -> str:
    decision = data.get("decision")
    if decision not in ("approve", "deny"):
        raise BadRequest('decision must be "approve" or "deny"')
    return str(decision)


ROW_ID_MAX = 2**63 - 1  # SQLite's largest integer


def row_id(raw: str, name: str) -> int:
    """A database row id from the path or the query: 400 naming ``name`` otherwise."""
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a row id") from None
    if not 0 <= value <= ROW_ID_MAX:
        raise BadRequest(f"{name} must be a row id between 0 and {ROW_ID_MAX}")
    return value


def int_query(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}")
    return value


def session_trust(cfg: Any, key: str) -> str:
    """The trust a session's turns run at, from its key: a direct session
    of a sender who is not an owner id, and a group that is not an owner group, are guest."""
    parts = key.split(":")
    if len(parts) < 5 or parts[3] not in ("direct", "group", "channel"):
        return "owner"  # main, per-peer direct, http, cron, subagent
    channel, kind, peer = parts[2], parts[3], parts[4]
    pol = channel_policy(cfg, channel)
    if pol is None:
        return "owner"
    if kind == "direct":
        probe = InboundMessage(channel=channel, chat_id=peer, sender_id=peer, text="")
        return "owner" if is_owner_sender(probe, cfg) else "guest"
    return "owner" if peer in pol.owner_groups else "guest"


def scrubbed(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
    """A JSON answer with every secret value redacted: the last line of defence for text
    the daemon did not write itself (platform errors, file contents, model output)."""
    if isinstance(resp, web.Response) and resp.content_type == "application/json" and resp.text:
        secrets = secret_values(state(request).ctx.cfg)
        clean = redact_values(resp.text, secrets)
        if clean != resp.text:
            resp.text = clean
    return resp


def guarded(handler):
    """Answer :class:`BadRequest` as 400 ``bad_request``; scrub every JSON answer."""

    async def run(request: web.Request) -> web.StreamResponse:
        try:
            return scrubbed(request, await handler(request))
        except BadRequest as e:
            return bad(str(e))

    run.__name__ = getattr(handler, "__name__", "handler")
    return run
