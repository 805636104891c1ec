"""The one way to do something that may fail without stopping what comes after it.

``with best_effort(log, "closing the stream"):`` runs the block; if it raises an
``Exception`` the failure is logged once, naming the action, and the caller carries on.
Cancellation, ``KeyboardInterrupt`` and ``SystemExit`` are not ``Exception`` and pass
through.  It is for side steps (a typing indicator, an acknowledgement reaction, closing a
file, a courtesy message); a step whose failure the caller must act on catches the specific
error itself.  Lives at the bottom (``channels/`` imports nothing of ``bot/``) so both
sides use the same one."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def best_effort(log: logging.Logger, what: str, *, level: int = logging.DEBUG) -> Iterator[None]:
    """Run the block; log an ``Exception`` from it at ``level`` (``what`` names the action)
    instead of raising it."""
    try:
        yield
    except Exception as e:
        log.log(level, "%s failed (carrying on): %s: %s", what, type(e).__name__, e)
