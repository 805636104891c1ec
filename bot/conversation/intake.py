"""The intake stage (docs/architecture.md "How a message flows"), first part: what an inbound message is before
it is stored.  Text fields made valid UTF-8 (SQLite cannot store lone surrogates), and the
stored pairing approvals as the container ``admit`` looks in.  (The store-first sink itself,
``on_inbound``, is still sequenced in ``pipeline.py``.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.store import Store
from bot.rules.untrusted import valid_utf8
from channels.base import InboundMessage


def valid_text(msg: InboundMessage) -> InboundMessage:
    """The message with lone UTF-16 surrogates (which some clients send, and which SQLite
    cannot store) replaced by U+FFFD in every text field; the same object when clean."""

    changed: dict[str, Any] = {}
    for f in (
        "text",
        "sender_name",
        "sender_username",
        "chat_title",
        "chat_id",
        "sender_id",
        "message_id",
    ):
        value = getattr(msg, f)
        if isinstance(value, str) and (fixed := valid_utf8(value)) is not value:
            changed[f] = fixed
    if msg.api and (api := _valid_data(msg.api)) != msg.api:  # the HTTP API's messages
        changed["api"] = api
    return dataclasses.replace(msg, **changed) if changed else msg


def _valid_data(v: Any) -> Any:
    """JSON data with every string made valid UTF-8 (``valid_utf8``)."""
    if isinstance(v, str):
        return valid_utf8(v)
    if isinstance(v, list):
        return [_valid_data(x) for x in v]
    if isinstance(v, dict):
        return {_valid_data(k): _valid_data(x) for k, x in v.items()}
    return v


def where(msg: InboundMessage) -> str:
    """Where a message came from, for the log."""
    return f"channel={msg.channel}:{msg.account} chat={msg.chat_id} sender={msg.sender_id}"


class Approved:
    """The stored pairing approvals, as the container ``admit`` looks in."""

    def __init__(self, store: Store):
        self.store = store

    def __contains__(self, item: object) -> bool:
        if not (isinstance(item, tuple) and len(item) == 2):
            return False
        channel, sender = item
        return bool(self.store.is_approved(str(channel), str(sender)))
