"""/approve and /deny: the owner's answer to a held command (exec security "ask")."""

from __future__ import annotations

from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall


def _answer(call: CommandCall, ports: CommandPorts, *, approve: bool) -> str:
    if not call.on_arrival:  # from the lane (after a restart): the wait it answered is gone
        return "That approval code is no longer waiting."
    if ports.approvals is None:
        return "No command is waiting for approval."
    return ports.approvals.answer(call.args, approve=approve)


async def approve(call: CommandCall, ports: CommandPorts) -> str:
    return _answer(call, ports, approve=True)


async def deny(call: CommandCall, ports: CommandPorts) -> str:
    return _answer(call, ports, approve=False)
