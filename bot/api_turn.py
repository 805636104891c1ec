"""The HTTP API turn now lives in ``bot.conversation.api`` (ARCHITECTURE.md move 8); these
names stay importable while callers move."""

from __future__ import annotations

from bot.conversation.api import (
    NO_RESULT,
    SEEN_MAX,
    ApiTurn,
    answer,
    digest,
    model_message,
    plan,
    remember,
    seen_count,
    state_key,
    usage_of,
)

__all__ = [
    "NO_RESULT",
    "SEEN_MAX",
    "ApiTurn",
    "answer",
    "digest",
    "model_message",
    "plan",
    "remember",
    "seen_count",
    "state_key",
    "usage_of",
]
