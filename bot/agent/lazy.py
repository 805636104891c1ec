"""What a turn uses from modules ``bot.agent.turn`` does not import at its own import (the
loop brings in bot.media and the delivery previews: ~25 ms a CLI command that only builds
an agent never needs), imported at the first turn and then looked up in a dict: an import
statement inside the turn cost a few µs on every turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from bot.agent.loop import LoopResult
    from bot.agent.tools import ToolContext
    from bot.media import MediaPolicy
    from bot.prompt.hooks import HookResult


class TurnParts(NamedTuple):
    run_agent_loop: Callable[..., Awaitable[LoopResult]]
    policy_for: Callable[[Any], MediaPolicy]
    apply_system: Callable[[str, HookResult], str]
    apply_user: Callable[[str, HookResult], str]
    tool_context: type[ToolContext]
    with_origin: Callable[[Any, dict], Any]


_loaded: dict[str, TurnParts] = {}


def turn_parts() -> TurnParts:
    parts = _loaded.get("turn")
    if parts is None:
        from bot.agent.loop import run_agent_loop
        from bot.agent.tools import ToolContext
        from bot.agent.tools.session import with_origin
        from bot.media import policy_for
        from bot.prompt.hooks import apply_system, apply_user

        parts = _loaded["turn"] = TurnParts(
            run_agent_loop, policy_for, apply_system, apply_user, ToolContext, with_origin
        )
    return parts
