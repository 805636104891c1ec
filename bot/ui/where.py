"""Where the Control UI is served, and why not: light enough for ``chela run``'s
first lines and ``chela dashboard`` (no aiohttp import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from channels.util import is_loopback, parse_listen

if TYPE_CHECKING:
    from bot.config import Config


def not_served_reason(cfg: Config) -> str:
    """Why the UI is not served with this config ("" when it is)."""
    if not cfg.channels.http.enabled:
        return "the HTTP channel is off ([channels.http] enabled = false)"
    if not cfg.ui.enabled:
        return "ui.enabled = false"
    host, _ = parse_listen(cfg.channels.http.listen)
    if not is_loopback(host) and not cfg.ui.public_origin:
        return (
            f"channels.http.listen = {cfg.channels.http.listen!r} is not loopback and "
            "ui.public_origin is empty (set it to the https:// address of your TLS proxy)"
        )
    return ""


def ui_base(cfg: Config) -> str:
    """Where the UI is: ``public_origin`` + ``/ui/``, else the listen address (a wildcard
    listen is reached at 127.0.0.1)."""
    if cfg.ui.public_origin:
        return f"{cfg.ui.public_origin}/ui/"
    host, port = parse_listen(cfg.channels.http.listen)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/ui/"


def startup_line(cfg: Config) -> str:
    """What ``chela run`` says about the UI among its first lines."""
    if not (cfg.channels.http.enabled and cfg.ui.enabled):
        return "Control UI: off"
    if not_served_reason(cfg):
        return "Control UI: not served (ui.public_origin is empty on a non-loopback listen)"
    return f"Control UI: {ui_base(cfg)} (log in with `chela dashboard`)"
