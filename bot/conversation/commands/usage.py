"""/usage: tokens and cost of today's model calls (the text is ``bot.reports.usage``'s)."""

from __future__ import annotations

from bot.conversation.commands.ports import CommandPorts
from bot.conversation.types import CommandCall


async def usage(call: CommandCall, ports: CommandPorts) -> str:
    from bot.reports.usage import usage_text

    return usage_text(ports.cfg, ports.store, call.key, call.verdict.trust or "guest")
