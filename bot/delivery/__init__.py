"""Delivery (ARCHITECTURE.md "Folders", L4): everything on the way out to a platform.

* :mod:`bot.delivery.outbox` — the durable outbox: every outbound message a stored row, sent
  once in order per chat, retried through outages, recovered after a crash; its error classes
  (``classify``) and the storage alarm.
* :mod:`bot.delivery.previews` — live output while the model writes (SPEC §12): chat
  previews edited in place and the HTTP API's token stream.

The daemon builds the :class:`Outbox` before anything that sends, and hands it to the router,
the scheduled turns, exec approvals and the ``message`` tool.
"""

from __future__ import annotations

from bot.delivery.outbox import (
    Outbox,
    StorageAlarm,
    classify,
    out_from_json,
    out_json,
)
from bot.delivery.previews import (
    PREVIEW_INTERVAL,
    Preview,
    StreamEvent,
    StreamText,
    visible_text,
)

__all__ = [
    "PREVIEW_INTERVAL",
    "Outbox",
    "Preview",
    "StorageAlarm",
    "StreamEvent",
    "StreamText",
    "classify",
    "out_from_json",
    "out_json",
    "visible_text",
]
