"""Per-channel delivery instructions that are sent *after* the user message (SPEC §2.7).

They live outside the system prompt so the cached prompt stays identical across channels
that share a runtime context and so the instruction is fresh right next to the request.
"""

from __future__ import annotations

from . import texts


def telegram_media_instructions() -> str:
    """System message appended after the user's message on Telegram."""
    return "\n".join(texts.TELEGRAM_MEDIA_LINES)


def delivery_instructions(channel: str) -> str:
    """The post-user system message for ``channel`` or "" when it needs none."""
    if channel.strip().lower() == "telegram":
        return telegram_media_instructions()
    return ""
