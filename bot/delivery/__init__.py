"""Delivery (docs/architecture.md "Layers", L4): everything on the way out to a platform.

* :mod:`bot.delivery.outbox` — the durable outbox: every outbound message a stored row, sent
  once in order per chat, retried through outages, recovered after a crash; and the storage
  alarm.
* :mod:`bot.delivery.failures` — why a send failed (``classify``): refused for good, or worth
  a retry (and after how long).
* :mod:`bot.delivery.previews` — live output while the model writes: chat
  previews edited in place and the HTTP API's token stream.

The daemon builds the :class:`Outbox` before anything that sends, and hands it to the conversation,
the scheduled turns, exec approvals and the ``message`` tool.
"""

from __future__ import annotations

from bot.delivery.failures import classify
from bot.delivery.outbox import (
    Outbox,
    StorageAlarm,
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
