"""Writing in a session from the Control UI: ``POST …/messages`` (a web
turn, answered as its stream), ``…/stop``, ``…/reset`` and ``…/compact`` (as ``/new``
and ``/compact``), and ``POST /ui/api/uploads``."""

from __future__ import annotations

import mimetypes
import re
import uuid
from pathlib import Path

from aiohttp import web

from bot import fs
from bot.conversation.commands import run_command
from bot.conversation.types import CommandCall
from bot.conversation.web import OWNER, WebMessage, answer_key
from bot.ui.api.common import (
    CLIENT_MSG_ID,
    ApiState,
    BadRequest,
    body,
    conflict,
    guarded,
    not_found,
    session_trust,
    state,
)
from bot.ui.api.transcript import answer_of
from bot.ui.errors import ui_error
from bot.ui.hub import secret_values
from bot.ui.turns import TurnLog, stream_log
from channels.base import MediaItem

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
UPLOADS_KEPT = 100  # uploads not yet sent with a message


def _fields(data: dict) -> tuple[str, str, list[str]]:
    text = data.get("text", "")
    cid = data.get("client_msg_id")
    attachments = data.get("attachments") or []
    if not isinstance(text, str):
        raise BadRequest("text must be a string")
    if not isinstance(cid, str) or not CLIENT_MSG_ID.fullmatch(cid):
        raise BadRequest("client_msg_id must be 1-64 characters of A-Z, a-z, 0-9, _ and -")
    if not isinstance(attachments, list) or not all(isinstance(a, str) for a in attachments):
        raise BadRequest("attachments must be a list of upload ids")
    if not text.strip() and not attachments:
        raise BadRequest("text is empty")
    return text, cid, attachments


def _attachments(st: ApiState, ids: list[str]) -> tuple[MediaItem, ...]:
    missing = [i for i in ids if i not in st.uploads.files]
    if missing:
        raise BadRequest(f"attachments: no upload with id {missing[0]}")
    return tuple(MediaItem(**st.uploads.files.pop(i)) for i in ids)


def _secrets(st: ApiState) -> tuple[str, ...]:
    return tuple(secret_values(st.ctx.cfg))


def _replayed(st: ApiState, key: str, cid: str) -> TurnLog:
    """The stream of a message seen before whose turn is no longer followed here: its
    stored answer, or a conflict when none is stored."""
    log = TurnLog(st.ctx.store, key, cid)
    seen = st.ctx.store.get(answer_key(key, cid)) or {}
    message = answer_of(st.ctx.store, key, seen["turn"]) if seen.get("turn") else None
    if message is not None:
        log.final(message, stopped=False, usage={})
    elif seen.get("stopped"):
        log.finished(turn="", text=str(seen.get("text") or ""), stopped=True, usage={})
    else:
        log.failed("conflict", "This message was received before and has no answer to show.")
    return log


async def post_message(request: web.Request) -> web.StreamResponse:
    st = state(request)
    ctx, key = st.ctx, request.match_info["key"]
    text, cid, ids = _fields(await body(request))
    if not key.startswith(f"agent:{ctx.cfg.agent.id}:"):
        return not_found(f"{key} is not a session of agent {ctx.cfg.agent.id}")
    if session_trust(ctx.cfg, key) == "guest":
        return conflict("a guest session is read-only here")
    running = st.logs.get(key, cid)
    if running is not None:  # the same message again (a reload): replay, start nothing
        return await stream_log(request, running, _secrets(st))
    if not ctx.conversation.accepting:
        return ui_error(503, "shutting_down", "The daemon is stopping.")
    items = _attachments(st, ids)
    log = TurnLog(ctx.store, key, cid)
    st.logs.add(log)
    if await st.web.submit(WebMessage(key, text, cid, items), log) is None:
        st.logs.drop(log)
        log = _replayed(st, key, cid)
    return await stream_log(request, log, _secrets(st))


async def stop(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    stopped = await ctx.conversation.stop(request.match_info["key"])
    return web.json_response({"stopped": stopped})


async def _command(request: web.Request, name: str, args: str) -> web.Response:
    st = state(request)
    ctx, key = st.ctx, request.match_info["key"]
    msg = WebMessage(key, f"/{name}", f"ui-{uuid.uuid4().hex[:12]}").inbound()
    call = CommandCall(name, args, msg, key, OWNER, owner=True)
    conv = ctx.conversation
    await conv.lanes.submit(key, lambda: run_command(call, conv.command_ports))
    return web.json_response({"ok": True})


async def reset(request: web.Request) -> web.Response:
    await body(request)
    return await _command(request, "new", "")


async def compact(request: web.Request) -> web.Response:
    focus = (await body(request)).get("focus") or ""
    if not isinstance(focus, str):
        raise BadRequest("focus must be a string")
    return await _command(request, "compact", focus)


def _kind(data: bytes, mime: str) -> str:
    from bot.media.images import sniff_image

    if sniff_image(data):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "document"


async def _read_file(request: web.Request, cap: int) -> tuple[str, str, bytes] | None:
    """The ``file`` field (name, mime, bytes); None when it is over ``cap`` bytes."""
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        if getattr(part, "name", None) != "file":
            continue
        name = Path(getattr(part, "filename", None) or "file").name
        mime = part.headers.get("Content-Type", "") or mimetypes.guess_type(name)[0] or ""
        chunks, size = [], 0
        while chunk := await part.read_chunk():  # type: ignore[union-attr]
            size += len(chunk)
            if size > cap:
                return None
            chunks.append(chunk)
        return name, mime, b"".join(chunks)
    raise BadRequest("file: the multipart body has no file field")


async def upload(request: web.Request) -> web.Response:
    st = state(request)
    cfg = st.ctx.cfg
    cap = int(cfg.media.max_download_mb * 1024 * 1024)
    if not request.content_type.startswith("multipart/"):
        raise BadRequest("an upload is multipart/form-data with a file field")
    got = await _read_file(request, cap)
    if got is None:
        return ui_error(
            413, "too_large", f"the file is larger than {cfg.media.max_download_mb:g} MB"
        )
    name, mime, data = got
    uid = uuid.uuid4().hex
    safe = _SAFE.sub("_", name).strip("._")[:80] or "file"
    path = fs.save(fs.private_dir(cfg.media_dir) / f"web_{uid[:12]}_{safe}", data)
    kind = _kind(data, mime)
    st.uploads.files[uid] = {"kind": kind, "target": str(path), "name": name, "mime": mime}
    while len(st.uploads.files) > UPLOADS_KEPT:
        st.uploads.files.pop(next(iter(st.uploads.files)))
    return web.json_response({"id": uid, "name": name, "mime": mime, "size": len(data)}, status=201)


def register(app: web.Application) -> None:
    app.router.add_post("/api/sessions/{key}/messages", guarded(post_message))
    app.router.add_post("/api/sessions/{key}/stop", guarded(stop))
    app.router.add_post("/api/sessions/{key}/reset", guarded(reset))
    app.router.add_post("/api/sessions/{key}/compact", guarded(compact))
    app.router.add_post("/api/uploads", guarded(upload))
