"""The old home of the conversation pipeline: ``Router`` is now
``bot.conversation.pipeline.Conversation`` (ARCHITECTURE.md move 5). These names stay
importable while callers (the daemon, benches, tests) move."""

from __future__ import annotations

from bot.conversation.commands import COMMANDS
from bot.conversation.commands.runner import parse_command
from bot.conversation.pipeline import Conversation, help_text, valid_text

Router = Conversation

__all__ = ["COMMANDS", "Conversation", "Router", "help_text", "parse_command", "valid_text"]
