"""The owner's note after a downtime: one short message per start naming each
job whose occurrences were missed and their local due times.  Not a turn: no model call;
stored in the owner's main session with its outbox row in one transaction, then sent."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from datetime import datetime, tzinfo

from bot.conversation import owner_route
from bot.config import Config
from bot.delivery import send
from bot.delivery.outbox import Outbox, out_json
from bot.rules.admission import channel_policy
from bot.rules.keys import main_key
from bot.store import Store
from channels.base import Channel

log = logging.getLogger("chela.schedule")

SHOWN = 5  # due times named per job; more are counted
FIRST_ATTEMPT_WAIT = 10.0


def due_text(dues: list[float], tz: tzinfo | None, now: float) -> str:
    today = datetime.fromtimestamp(now, tz).date()
    parts = []
    for d in dues[-SHOWN:]:
        when = datetime.fromtimestamp(d, tz)
        parts.append(f"{when:%H:%M}" if when.date() == today else f"{when:%Y-%m-%d %H:%M}")
    more = len(dues) - SHOWN
    return ", ".join(parts) + (f" and {more} earlier" if more > 0 else "")


def note_text(missed: Mapping[str, list[float]], tz: tzinfo | None, now: float) -> str:
    items = [f"{name} (due {due_text(dues, tz, now)})" for name, dues in missed.items()]
    return "Missed while I was down: " + "; ".join(items)


def first_owner_route(cfg: Config, channels: Mapping[str, Channel]) -> dict | None:
    """The owner route of the first enabled channel that has one."""
    for name, ch in channels.items():
        if channel_policy(cfg, name) is None or not ch.capabilities.proactive:
            continue
        route = owner_route.first_owner(cfg, name)
        if route is not None:
            return route
    return None


def note_route(cfg: Config, store: Store, channels: Mapping[str, Channel]) -> dict | None:
    route = owner_route.last(store, cfg)
    if route is not None and route.get("channel") in channels:
        return route
    return first_owner_route(cfg, channels)


async def send_note(
    cfg: Config, store: Store, outbox: Outbox, channels: Mapping[str, Channel], text: str
) -> str:
    """Store the note in the owner's main session and send it: the delivery status, or
    ``no route`` (only the log is told)."""
    route = note_route(cfg, store, channels)
    if route is None:
        log.warning("%s (no owner route to tell)", text)
        return "no route"
    out = send.to_route(route, text)
    ids = store.commit_turn(
        main_key(cfg.agent.id),
        uuid.uuid4().hex,
        [{"role": "assistant", "content": text}],
        kind="note",
        channel=route["channel"],
        outbound=[out_json(out)],
        outbox_kind="note",
    )
    try:
        sent = await asyncio.wait_for(send.deliver_stored(outbox, ids), FIRST_ATTEMPT_WAIT)
    except TimeoutError:
        return "queued"
    log.info("%s (told the owner on %s)", text, route["channel"])
    return (sent or ["failed"])[0]
