"""The values a turn is asked with and answers with: ``TurnRequest`` (built by the
conversation's one builder, the heartbeat and cron) and ``TurnResult``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.rules.admission import Trust


@dataclass
class TurnRequest:
    session_key: str
    user_text: str  # the full user turn (metadata block included)
    # the agent that runs the turn: chosen once (a chat message's binding at intake, a
    # heartbeat's or cron job's agent) and carried to the commit; "" only outside a daemon
    agent: str = ""
    kind: str = "chat"  # chat | heartbeat | cron | subagent
    session_kind: str = "main"  # PromptContext.session_kind
    channel: str = ""
    account: str = ""
    chat_type: str = ""
    group_id: str = ""
    group_title: str = ""
    extra_context: str = ""
    capabilities: tuple[str, ...] = ()
    reactions: str = "off"
    after_user_system: str = ""  # e.g. Telegram delivery instructions (not stored)
    route: dict = field(default_factory=dict)  # where the turn came from (for tools)
    message_text: str = ""  # the raw user text (for hooks)
    trust: Trust = "owner"  # decided by admission, never by the model
    # a trigger turn (webhook, mail): exactly these of the agent's tools; None = by trust
    tools: tuple[str, ...] | None = None
    file_root: Path | None = None  # a guest's own directory; None = the workspace
    media: list[dict] = field(default_factory=list)  # image references of the user turn (bot.media)
    # an HTTP API client's request: its system/developer messages, added after
    # the (cached, unchanged) system prompt as a "## Client Instructions" block
    client_instructions: str = ""
    # the client's messages this server has not seen yet, before the user turn (model
    # message dicts); stored with the turn
    prior: list[dict] = field(default_factory=list)
    # False: the request continues a turn with the results of the client's tools (they end
    # ``prior``): no user message is added
    user_turn: bool = True
    client_tools: list[dict] = field(default_factory=list)  # OpenAI tool schemas
    params: dict[str, Any] = field(default_factory=dict)  # max_tokens, tool_choice, …


@dataclass
class TurnResult:
    text: str  # final model text (before reply processing)
    to_store: list[dict]  # user + assistant/tool messages of the turn
    error: str | None = None
    error_kind: str | None = None  # model | config | budget, with error
    usage: dict = field(default_factory=dict)
    client_calls: list[dict] = field(default_factory=list)  # see LoopResult.client_calls
    finish_reason: str = "stop"
    turn_id: str = ""
    system_prompt: str = ""
    duration: float = 0.0
