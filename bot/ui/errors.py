"""The one error answer under ``/ui/``: ``{"error": {"code", "message"}}``."""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web


def ui_error(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """``code`` is one of §16.4's snake_case codes; ``message`` one sentence."""
    return web.json_response(
        {"error": {"code": code, "message": message}},
        status=status,
        headers=dict(headers) if headers else None,
    )


def method_not_allowed(method: str, path: str, allowed: list[str]) -> web.Response:
    shown = ", ".join(sorted(allowed))
    return ui_error(
        405,
        "method_not_allowed",
        f"{method} is not allowed on {path}; use {shown}",
        {"Allow": shown},
    )
