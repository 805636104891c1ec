"""Why a send failed, for the outbox's retry decision: :func:`classify` reads an exception
chain (the platform SDKs' exception types, an HTTP status, a ``permanent`` flag, the error
text) and says whether the platform refused for good and how long it asked us to wait."""

from __future__ import annotations

import datetime
from typing import Any

# (substring of an error, lower case) → the platform refused for good: retrying cannot help
PERMANENT_MARKERS = (
    "chat not found",
    "bot was blocked",
    "blocked by the user",
    "bot was kicked",
    "user is deactivated",
    "not enough rights",
    "have no rights",
    "forbidden",
    "unknown channel",
    "unknown user",
    "missing access",
    "missing permissions",
    "cannot send messages to this user",
    "bad chat id",
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "account_inactive",
    "user_not_found",
    "cannot_dm_bot",
    "restricted_action",
    "unregistered user",
    "no open http request",
    "is not running",
)

# exception class names (from the platform SDKs) that mean a permanent refusal / a retry
_PERMANENT_TYPES = {"Forbidden", "BadRequest", "NotFound", "InvalidToken"}
_TRANSIENT_TYPES = {
    "RetryAfter",
    "TimedOut",
    "NetworkError",
    "DiscordServerError",
    "ClientError",
    "ServerDisconnectedError",
    "TimeoutError",
    "ConnectionError",
}


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out and len(out) < 10:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _seconds(value: Any) -> float | None:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v >= 0 else None


def classify(exc: BaseException) -> tuple[bool, float | None]:
    """(permanent, retry_after) for a failed send: the exception chain's types and HTTP
    status first (python-telegram-bot, discord.py, signal-cli's JSON-RPC), then the
    message text.  Anything unknown is worth a retry."""
    retry_after: float | None = None
    for e in _chain(exc):
        flag = getattr(e, "permanent", None)
        if isinstance(flag, bool):
            return flag, None
        # python-telegram-bot keeps the value in _retry_after (its property warns)
        ra = _seconds(getattr(e, "_retry_after", None) or getattr(e, "retry_after", None))
        if ra is not None:
            retry_after = ra if retry_after is None else max(retry_after, ra)
        names = {c.__name__ for c in type(e).__mro__}
        if names & _PERMANENT_TYPES:  # first: PTB's BadRequest is a NetworkError
            return True, None
        if names & _TRANSIENT_TYPES or isinstance(e, (TimeoutError, ConnectionError)):
            return False, retry_after
        status = getattr(e, "status", None)
        if isinstance(status, int) and 400 <= status < 600:
            return (status < 500 and status not in (408, 409, 425, 429)), retry_after
    text = " ".join(str(e) for e in _chain(exc)).lower()
    if retry_after is None and any(m in text for m in PERMANENT_MARKERS):
        return True, None
    return False, retry_after
