"""The old home of the conversation pipeline: ``Router`` is now
``bot.conversation.pipeline.Conversation`` (ARCHITECTURE.md move 5). These names stay
importable while callers (the daemon, benches, tests) move."""

from __future__ import annotations

from bot.conversation.commands import COMMANDS
from bot.conversation.commands.help import help_text as _help_text
from bot.conversation.commands.runner import parse_command
from bot.conversation.intake import valid_text
from bot.conversation.pipeline import Conversation

Router = Conversation


def help_text(owner: bool) -> str:
    """The /help text (the old name; bot.conversation.commands.help has it)."""
    return _help_text(COMMANDS.values(), owner)


__all__ = ["COMMANDS", "Conversation", "Router", "help_text", "parse_command", "valid_text"]
