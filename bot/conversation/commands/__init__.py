"""The command table (docs/architecture.md, stage ``commands``: ``CommandCall → Replies``)."""

from bot.conversation.commands.ports import CommandPorts
from bot.conversation.commands.runner import command_call, parse_command, refusal, run_command
from bot.conversation.commands.table import COMMANDS, TABLE, CommandSpec, menu

__all__ = [
    "COMMANDS",
    "TABLE",
    "CommandPorts",
    "CommandSpec",
    "command_call",
    "menu",
    "parse_command",
    "refusal",
    "run_command",
]
