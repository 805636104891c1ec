"""``GET /ui/api/workspace``, ``/workspace/{name}``, ``/context`` and ``/config``:
the eight prompt files, the ``/context`` report of the main session, and the effective
config with every secret shown as its variable's name and whether it is set.

``POST /ui/api/workspace/{name}`` saves one of the eight files (``{"text", "base"}``;
``base`` is the SHA-256 the page loaded, null for a file that did not exist): a file changed
since is refused (409), any other name is 404, and the write goes through bot/fs.py under the
workspace (atomic, no link followed)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from bot import fs
from bot.agent.turn import TurnRequest
from bot.config import config_warnings
from bot.prompt.report import context_report
from bot.prompt.workspace import BOOTSTRAP_ORDER
from bot.ui.api.common import BadRequest, body, conflict, guarded, not_found, state
from bot.ui.context import UiContext
from bot.ui.hub import scrub, scrub_data, secret_values

MAX_FILE = 2_000_000  # bytes read of one prompt file


def context_object(ctx: UiContext) -> dict[str, Any]:
    """The object of ``chela context json``, for the main session."""
    agent = ctx.conversation.agent
    req = TurnRequest(session_key="", user_text="", session_kind="main", channel="")
    pctx = agent.prompt_context(req)
    return json.loads(context_report(agent.cache.get(pctx), pctx, "json"))


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(fs.read_in(path, MAX_FILE)).hexdigest()
    except OSError:
        return None


async def workspace(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    report = context_object(ctx)
    by_name = {f["name"]: f for f in report.get("files", [])}
    ws = Path(ctx.cfg.agent.workspace)
    files = []
    for name in BOOTSTRAP_ORDER:
        f = by_name.get(name, {})
        files.append(
            {
                "name": name,
                "status": f.get("status", "missing"),
                "raw_chars": f.get("raw_chars", 0),
                "injected_chars": f.get("injected_chars", 0),
                "sha256": _digest(ws / name),
            }
        )
    skills = [s["name"] for s in report.get("skills", {}).get("items", [])]
    limits = report.get("limits", {})
    return web.json_response({"files": files, "skills": sorted(skills), "limits": limits})


async def workspace_file(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    name = request.match_info["name"]
    if name not in BOOTSTRAP_ORDER:
        return not_found(f"{name} is not one of the eight prompt files")
    try:
        data = fs.read_in(Path(ctx.cfg.agent.workspace) / name, MAX_FILE)
    except OSError:
        return not_found(f"{name} does not exist in the workspace")
    text = scrub(data.decode("utf-8", "replace"), secret_values(ctx.cfg))
    return web.json_response(
        {"name": name, "text": text, "sha256": hashlib.sha256(data).hexdigest()}
    )


async def save_file(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    name = request.match_info["name"]
    if name not in BOOTSTRAP_ORDER:
        return not_found(f"{name} is not one of the eight prompt files")
    data = await body(request)
    text, base = data.get("text"), data.get("base")
    if not isinstance(text, str):
        raise BadRequest("text must be the file's new text")
    if base is not None and not isinstance(base, str):
        raise BadRequest("base must be the sha256 the page loaded (or null for a new file)")
    ws = Path(ctx.cfg.agent.workspace).expanduser()
    if _digest(ws / name) != base:
        return conflict(
            f"{name} changed since this page loaded it: nothing was written; "
            "open the file again to see it as it is now"
        )
    new = text.encode("utf-8")
    fs.write_under(ws, ws / name, new, keep_mode=True)
    return web.json_response({"name": name, "sha256": hashlib.sha256(new).hexdigest()})


async def context(request: web.Request) -> web.Response:
    return web.json_response(context_object(state(request).ctx))


def _secret(name: Any) -> dict[str, Any]:
    import os

    return {"env": name, "set": bool(name and os.environ.get(str(name)))}


def config_view(node: Any) -> Any:
    """The config as plain data; every ``*_env`` value as ``{"env", "set"}``."""
    if isinstance(node, BaseModel):
        out: dict[str, Any] = {}
        for key in type(node).model_fields:
            value = getattr(node, key)
            if key.endswith("_env") and isinstance(value, str):
                out[key] = _secret(value)
            elif key.endswith("_env") and isinstance(value, dict):
                out[key] = {k: _secret(v) for k, v in value.items()}
            else:
                out[key] = config_view(value)
        return out
    if isinstance(node, dict):
        return {str(k): config_view(v) for k, v in node.items()}
    if isinstance(node, (list, tuple, set, frozenset)):
        return [config_view(v) for v in node]
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    return str(node)


async def config(request: web.Request) -> web.Response:
    ctx = state(request).ctx
    secrets = secret_values(ctx.cfg)
    path = ctx.config_path or ctx.cfg.source
    check = [{"level": "warn", "message": w} for w in config_warnings(ctx.cfg)]
    if ctx.config_check is not None:  # chela check's own findings, when chela run handed them
        found = await asyncio.to_thread(ctx.config_check, ctx.cfg)
        check = [{"level": "error", "message": e} for e in found.errors]
        check += [{"level": "warn", "message": w} for w in found.warnings]
    return web.json_response(
        scrub_data(
            {"path": str(path) if path else None, "config": config_view(ctx.cfg), "check": check},
            tuple(secrets),
        )
    )


def register(app: web.Application) -> None:
    app.router.add_get("/api/workspace", guarded(workspace))
    app.router.add_get("/api/workspace/{name}", guarded(workspace_file))
    app.router.add_post("/api/workspace/{name}", guarded(save_file))
    app.router.add_get("/api/context", guarded(context))
    app.router.add_get("/api/config", guarded(config))
