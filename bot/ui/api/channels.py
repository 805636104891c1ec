"""``GET /ui/api/channels``: each channel's state, identity, last traffic and
outbox counts, and the MCP servers.

A channel waiting to be linked (a WhatsApp linked device before its QR code is scanned:
its adapter's ``pairing_qr()`` gives the code's current payload) carries ``pairing``: the
code as an SVG image (``data:`` URI, drawn with ``segno`` when it is installed, which the
``whatsapp`` extra brings), or ``{"qr": null}`` when it cannot be drawn here (the page then
says to run ``chela whatsapp login``).  The payload links a device to the account, so it
only goes to the logged-in owner's page, drawn, never as text and never logged."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from channels.base import labels, shown_state, split_account_key

from bot.ui.api.common import guarded, state
from bot.ui.context import UiContext


def _traffic(ctx: UiContext) -> dict[str, dict[str, Any]]:
    store = ctx.store
    out: dict[str, dict[str, Any]] = {}
    for ch, last in store.last_inbound_by_channel().items():
        out.setdefault(ch, {})["last_inbound"] = last
    for ch, last in store.last_sent_by_channel().items():
        out.setdefault(ch, {})["last_outbound"] = last
    for ch, counts in store.unsent_by_channel().items():
        out.setdefault(ch, {})["outbox"] = counts
    return out


def qr_image(payload: str) -> str | None:
    """``payload`` as a QR code (an SVG ``data:`` URI); None without ``segno``."""
    try:
        import segno
    except ImportError:
        return None
    return str(segno.make_qr(payload, error="l").svg_data_uri(scale=5, border=2))


def _pairing(adapter: Any) -> dict[str, Any] | None:
    """``{"qr": image or None}`` while ``adapter`` waits to be linked, else None."""
    current = getattr(adapter, "pairing_qr", None)
    payload = current() if callable(current) else None
    if not isinstance(payload, str) or not payload:
        return None
    return {"qr": qr_image(payload)}


def _channel(name: str, info: Any, traffic: dict[str, Any], adapter: Any = None) -> dict[str, Any]:
    detail = info if isinstance(info, dict) else {"state": info}
    st = str(detail.get("state") or "starting")
    counts = traffic.get("outbox", {})
    return {
        "id": name,
        "enabled": bool(detail.get("enabled", True)),
        "state": shown_state(st),
        "identity": detail.get("identity") or "",
        "last_inbound": traffic.get("last_inbound"),
        "last_outbound": traffic.get("last_outbound"),
        "error": detail.get("error") or None,
        "outbox": {k: int(counts.get(k, 0)) for k in ("queued", "sending", "failed")},
        "pairing": _pairing(adapter),
    }


def _mcp(ctx: UiContext) -> list[dict[str, Any]]:
    if ctx.mcp is None:
        return []
    return [
        {
            "name": s.name,
            "transport": s.transport,
            "state": s.state,
            "tools": [getattr(t, "name", str(t)) for t in s.tools],
            "error": s.error or None,
        }
        for s in ctx.mcp.statuses()
    ]


async def channels(request: web.Request) -> web.Response:
    """One row per channel account, named as ``chela status`` names it (``telegram``, or
    ``telegram:default`` and ``telegram:work`` for a channel with several accounts); the
    traffic columns are the channel's."""
    ctx = state(request).ctx
    states = dict(ctx.channel_states())
    adapters = {
        n: ctx.conversation.channels[k] for k, n in labels(ctx.conversation.channels).items()
    }
    for name in adapters:
        states.setdefault(name, "starting")
    traffic = _traffic(ctx)
    rows = [
        _channel(name, info, traffic.get(split_account_key(name)[0], {}), adapters.get(name))
        for name, info in sorted(states.items())
    ]
    return web.json_response({"channels": rows, "mcp": _mcp(ctx)})


def register(app: web.Application) -> None:
    app.router.add_get("/api/channels", guarded(channels))
