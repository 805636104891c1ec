"""/pair: the owner's pairing desk in the chat.

``/pair`` lists the pending requests of every channel; ``/pair approve CODE`` and
``/pair deny CODE`` (or ``CHANNEL CODE``) decide one through ``bot.conversation.pairing_requests.decide``, the
same function ``chela pairing approve`` and the Control UI use: an approved sender is
stored as a guest, and the daemon tells them and answers their waiting message.  Owner
only, in a direct chat, on arrival (the table's row says so)."""

from __future__ import annotations

import time

from bot.conversation import pairing_requests as pairing
from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall
from bot.rules.admission import is_owner_sender
from bot.rules.untrusted import quoted
from channels.base import DEFAULT_ACCOUNT, InboundMessage, split_account_key

USAGE = "Usage: /pair, /pair approve CODE or /pair deny CODE (CHANNEL CODE works too)."


def _age(seconds: float) -> str:
    minutes = int(max(0.0, seconds) // 60)
    return f"{minutes} min ago" if minutes else "just now"


def listing(ports: CommandPorts, now: float | None = None) -> str:
    now = time.time() if now is None else now
    rows = pairing.pending(ports.store, now)
    if not rows:
        return "No pairing requests are waiting."
    lines = ["Pairing requests waiting:"]
    for r in rows:
        lines.append(
            f"{r['channel']}: id {r['sender_id']}, {quoted(r['sender_name'], 80)}, "
            f"code {r['code']}, {_age(now - r['created'])}"
        )
    lines.append("Answer /pair approve CODE or /pair deny CODE.")
    return "\n".join(lines)


def _target(words: list[str]) -> tuple[str | None, str] | None:
    """``CODE`` or ``CHANNEL CODE`` → (channel or None, code); None when it is neither."""
    if len(words) == 1:
        return None, words[0]
    if len(words) == 2:
        return words[0].lower(), words[1]
    return None


def _not_an_owner_there(
    call: CommandCall, ports: CommandPorts, channel: str | None, code: str
) -> str | None:
    """A code asked for on another account of a channel (``telegram:work``) is decided only
    by an owner of that account: its guests are its owners' to admit."""
    try:
        row = pairing.find(ports.store, code, channel)
    except pairing.PairingError:
        return None  # decide() says why
    name, account = split_account_key(row["channel"])
    if account == DEFAULT_ACCOUNT:
        return None
    sender = call.msg.sender_id
    probe = InboundMessage(channel=name, chat_id=sender, sender_id=sender, text="", account=account)
    if is_owner_sender(probe, ports.cfg):
        return None
    where = row["channel"]
    return f"Nothing done: code {row['code']} was asked for on {where}, where you are not an owner."


async def pair(call: CommandCall, ports: CommandPorts) -> str:
    words = call.args.split()
    if not words:
        return listing(ports)
    action = words[0].lower()
    target = _target(words[1:])
    if action not in ("approve", "deny") or target is None:
        return USAGE
    channel, code = target
    decision: pairing.Decision = "approve" if action == "approve" else "deny"
    if refused := _not_an_owner_there(call, ports, channel, code):
        return refused
    try:
        row = pairing.decide(ports.store, channel, code, decision, notices=ports.notices)
    except pairing.PairingError as e:
        return f"Nothing done: {e}."
    who = f"{row['channel']} sender {row['sender_id']} ({quoted(row['sender_name'], 80)})"
    if action == "approve":
        return (
            f"Approved {row['code']}: {who} can talk to me now, as a guest. "
            "I'll tell them and answer their message."
        )
    return f"Denied {row['code']}: the request of {who} is dropped; they are not told."
