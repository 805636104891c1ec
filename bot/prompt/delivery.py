"""Per-channel delivery instructions that are sent *after* the user message.

They live outside the system prompt so the cached prompt stays identical across channels
that share a runtime context and so the instruction is fresh right next to the request.
Which platform has one, and its lines, is its config section's ``AFTER_USER``.
"""

from __future__ import annotations

from bot.config.channels import TelegramConfig, platform


def telegram_media_instructions() -> str:
    """System message appended after the user's message on Telegram."""
    return "\n".join(TelegramConfig.AFTER_USER)


def delivery_instructions(channel: str) -> str:
    """The post-user system message for ``channel`` or "" when it needs none."""
    section = platform(channel.strip().lower())
    return "\n".join(section.AFTER_USER) if section is not None else ""
