"""The Control UI's JSON routes and streams, under ``/ui/api/``.

``register`` adds them to the UI sub-application; the guard (bot/ui/guard.py) has already
checked Host, Origin, the session and its CSRF token when a handler runs, and the session
is ``request["ui_session"]``.  One module per route group: ``sessions`` (list, transcript),
``chat`` (web turns, stop, reset, compact, uploads), ``inbox`` (approvals, pairing, outbox),
``channels``, ``schedule`` (and ``schedule_edit``: add, edit, remove, preview, ended),
``usage``, ``workspace`` (workspace, context, config; ``config_edit``: the file and Save), ``logs``,
``system`` and ``events``; ``common`` is what they share, ``transcript`` the stored
messages as the UI shows them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from bot.ui.context import UiContext


def register(app: web.Application, ctx: UiContext) -> None:
    """Add the API's routes to ``app`` (paths relative to ``/ui``, e.g. ``/api/sessions``).
    (The route modules are imported here, so that ``bot.ui.turns`` and ``bot.ui.hub`` can
    use ``bot.ui.api.transcript`` without importing every route.)"""
    from bot.ui.api import (
        channels,
        chat,
        config_edit,
        events,
        inbox,
        logs,
        media,
        schedule,
        schedule_edit,
        sessions,
        system,
        usage,
        workspace,
    )
    from bot.ui.api.common import STATE, state_for

    groups = (
        sessions,
        media,
        chat,
        inbox,
        channels,
        schedule,
        schedule_edit,
        usage,
        workspace,
        config_edit,
        logs,
        system,
        events,
    )
    st = state_for(ctx)
    app[STATE] = st

    async def start(_app: web.Application) -> None:
        st.closing.clear()
        st.sessions.start()

    async def closing(_app: web.Application) -> None:
        st.closing.set()  # open event streams end, so the listener stops at once

    async def stop(_app: web.Application) -> None:
        await st.sessions.stop()

    app.on_startup.append(start)
    app.on_shutdown.append(closing)
    app.on_cleanup.append(stop)
    for group in groups:
        group.register(app)
