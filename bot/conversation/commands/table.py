"""The chat commands: answered by the core, never by the model.

One row per command; the conversation's parser, the refusals (``runner``), /help and the Telegram
command menu are all read from this table, in its order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.conversation.commands import approvals, controls, cron, pair, session, usage
from bot.conversation.commands.help import help_text
from bot.conversation.commands.ports import CommandPorts, Handler
from bot.conversation.commands.unknown import UNKNOWN, unknown_answer
from bot.conversation.types import CommandCall

Where = Literal["any", "group", "direct"]


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    help: str
    handler: Handler
    where: Where = "any"  # the kind of chat it applies in
    owner_only: bool = False  # the *sender* must be the owner (by id)
    immediate: bool = False  # answered on arrival, outside the session lane
    alias_of: str = ""  # another name of that command (shown on its line in /help)


async def _help(call: CommandCall, ports: CommandPorts) -> str:
    return help_text(TABLE, call.owner)


async def _unknown(call: CommandCall, ports: CommandPorts) -> str:
    return unknown_answer(call.args, TABLE, call.owner)


TABLE: tuple[CommandSpec, ...] = (
    CommandSpec("new", "/new", "start a fresh conversation", session.new_conversation),
    CommandSpec(
        "reset", "/reset", "start a fresh conversation", session.new_conversation, alias_of="new"
    ),
    CommandSpec("status", "/status", "model, session and usage", session.status),
    CommandSpec(
        "context",
        "/context [list|detail|json]",
        "what the system prompt is made of",
        session.context,
    ),
    CommandSpec(
        "compact",
        "/compact [focus]",
        "summarize the older part of this conversation now",
        session.compact,
    ),
    CommandSpec(
        "activation",
        "/activation mention|always",
        "in a group, answer only when mentioned, or to everything",
        session.activation,
        where="group",
        owner_only=True,
    ),
    CommandSpec(
        "approve",
        "/approve CODE",
        "run a held command once",
        approvals.approve,
        where="direct",
        owner_only=True,
        immediate=True,
    ),
    CommandSpec(
        "deny",
        "/deny CODE",
        "refuse a held command",
        approvals.deny,
        where="direct",
        owner_only=True,
        immediate=True,
    ),
    CommandSpec(
        "stop", "/stop", "stop the answer being written now", controls.stop, immediate=True
    ),
    CommandSpec(
        "model",
        "/model [name|default]",
        "list the models, or switch this chat to one",
        controls.model,
        owner_only=True,
    ),
    CommandSpec(
        "think",
        "/think [off|minimal|low|medium|high]",
        "how hard the model thinks in this chat",
        controls.think,
        owner_only=True,
    ),
    CommandSpec(
        "pair",
        "/pair [approve|deny CODE]",
        "pairing requests: list them, admit a sender or refuse",
        pair.pair,
        where="direct",
        owner_only=True,
        immediate=True,
    ),
    CommandSpec(
        "cron",
        "/cron [list|pause|resume|run|remove NAME]",
        "scheduled jobs: list them, pause, resume, run now or remove one",
        cron.cron,
        owner_only=True,
        immediate=True,
    ),
    CommandSpec("usage", "/usage", "tokens and cost of today's model calls", usage.usage),
    CommandSpec("help", "/help", "this list", _help),
)

COMMANDS: dict[str, CommandSpec] = {c.name: c for c in TABLE}
# a /word that is no command: the same answer everywhere (not in /help nor the menu)
COMMANDS[UNKNOWN] = CommandSpec(UNKNOWN, "", "an unknown command", _unknown)


def menu() -> list[tuple[str, str]]:
    """The chat's command menu (Telegram ``setMyCommands``): every command, in table order."""
    return [(c.name, c.help) for c in TABLE]
