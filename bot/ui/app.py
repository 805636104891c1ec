"""The Control UI's sub-application: the guard, login and sessions, the API and
the files.  ``ui_mounts`` is what the app hands the HTTP channel to mount under ``/ui``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from aiohttp import web

from bot.ui import api, static_routes
from bot.ui.auth import Auth
from bot.ui.errors import method_not_allowed, ui_error
from bot.ui.guard import EVENTS, Guard, GuardSettings, add_headers
from bot.ui.where import not_served_reason
from channels.util import parse_listen

if TYPE_CHECKING:
    from bot.config import Config
    from bot.ui.context import UiContext

log = logging.getLogger("chela.ui")

PREFIX = "/ui"


def guard_settings(cfg: Config) -> GuardSettings:
    host, _ = parse_listen(cfg.channels.http.listen)
    ui = cfg.ui
    return GuardSettings(
        listen_host=host.lower().strip("[]"),
        public_origin=ui.public_origin,
        public_host=ui.public_host,
        read_only=ui.read_only,
        idle=ui.idle_seconds,
        max_age=ui.max_seconds,
        upload_max=int(cfg.media.max_download_mb * 1024 * 1024),
    )


def build_ui_app(ctx: UiContext) -> web.Application:
    """A fresh sub-application (one per HTTP channel start: a mounted app cannot be reused)."""
    guard = Guard(guard_settings(ctx.cfg), ctx.store)
    app = web.Application(middlewares=[guard.middleware])
    app.on_response_prepare.append(add_headers)
    Auth(ctx).register(app)
    app.router.add_get(EVENTS.removeprefix(PREFIX), _events_get)
    api.register(app, ctx)
    static_routes.register(app)  # last: its catch-all pattern comes after the API's paths
    return app


def not_served_app(reason: str) -> web.Application:
    """``/ui/`` answers 404 saying why (a non-loopback listen without ``public_origin``)."""

    async def refuse(request: web.Request) -> web.Response:
        return ui_error(404, "not_found", f"the Control UI is not served: {reason}")

    app = web.Application()
    app.on_response_prepare.append(add_headers)
    app.router.add_route("*", "/{tail:.*}", refuse)
    return app


def ui_mounts(ctx: UiContext) -> list[tuple[str, web.Application]]:
    """The sub-applications the HTTP channel mounts, built fresh for each start."""
    reason = not_served_reason(ctx.cfg)
    if not ctx.cfg.channels.http.enabled or not ctx.cfg.ui.enabled:
        return []
    if reason:
        return [(PREFIX, not_served_app(reason))]
    return [(PREFIX, build_ui_app(ctx))]


async def _events_get(request: web.Request) -> web.Response:
    """An ``EventSource`` (a GET, which carries no Origin) gets nothing: the stream is a POST."""
    return method_not_allowed(request.method, request.path, ["POST"])
