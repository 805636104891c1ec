"""``CommandCall → Replies``: the one place a command is looked up, refused or answered."""

from __future__ import annotations

from bot.rules.admission import Verdict, is_owner_sender
from bot.config import Config
from bot.conversation.commands.ports import CommandPorts
from bot.conversation.commands.table import COMMANDS, CommandSpec
from bot.conversation.commands.unknown import UNKNOWN, unknown_word
from bot.conversation.types import CommandCall, Replies
from channels.base import InboundMessage


def parse_command(text: str) -> tuple[str, str] | None:
    """``/name@bot arg`` → (name, arg) when it is one of ours; None for ordinary text."""
    text = (text or "").strip()
    if not text.startswith("/"):
        return None
    first, _, rest = text.partition(" ")
    name = first[1:].split("@", 1)[0].lower()
    return (name, rest.strip()) if name in COMMANDS and name != UNKNOWN else None


def command_call(
    msg: InboundMessage, cfg: Config, key: str, verdict: Verdict, *, on_arrival: bool
) -> CommandCall | None:
    """The command an admitted message is, or None for ordinary text.  A ``/word`` that
    is no command is the unknown command (its answer says so), in a group only when it is
    addressed to this bot (``/word@thisbot`` or a mention)."""
    parsed = parse_command(msg.text)
    if parsed is None:
        word = unknown_word(msg.text, COMMANDS)
        if word is None or (msg.chat_type == "group" and not msg.mentioned):
            return None
        parsed = (UNKNOWN, word)
    name, args = parsed
    owner = is_owner_sender(msg, cfg)
    return CommandCall(name, args, msg, key, verdict, owner=owner, on_arrival=on_arrival)


def refusal(spec: CommandSpec, call: CommandCall) -> str | None:
    """Why this sender cannot use this command here; None when they can."""
    chat_type = call.msg.chat_type
    if spec.where == "group" and chat_type != "group":
        return f"/{spec.name} only applies in group chats."
    if spec.where == "direct" and chat_type != "direct":
        return f"/{spec.name} only works in a direct chat with me."
    if spec.owner_only and not call.owner:
        return f"Only the owner can use /{spec.name}."
    return None


async def run_command(call: CommandCall, ports: CommandPorts) -> Replies:
    """The answer to a parsed command (KeyError for a name that is not in the table)."""
    spec = COMMANDS[call.name]
    refused = refusal(spec, call)
    if refused is not None:
        return Replies.one(refused)
    return Replies.one(await spec.handler(call, ports))
