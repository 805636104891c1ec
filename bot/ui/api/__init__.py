"""The Control UI's JSON routes and streams (SPEC §16.4–16.5), under ``/ui/api/``.

``register`` adds them to the UI sub-application; the guard (bot/ui/guard.py) has already
checked Host, Origin, the session and its CSRF token when a handler runs, and the session
is ``request["ui_session"]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

    from bot.ui.context import UiContext


def register(app: web.Application, ctx: UiContext) -> None:
    """Add the API's routes to ``app`` (paths relative to ``/ui``, e.g. ``/api/sessions``)."""
