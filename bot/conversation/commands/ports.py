"""What command handlers may reach (docs/architecture.md rule 4: ports, not the conversation)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.agent.turn import TurnRequest
from bot.conversation.pairing_requests import NoticesPort
from bot.config import Config
from bot.conversation.types import CommandCall
from bot.prompt.context import PromptContext
from bot.prompt.result import PromptResult
from bot.store import Store


class PromptCachePort(Protocol):
    def get(self, ctx: PromptContext) -> PromptResult: ...


class AgentPort(Protocol):
    """The agent's side of /status, /context and /compact (``bot.agent.turn.Agent``)."""

    @property
    def cache(self) -> PromptCachePort: ...

    def prompt_context(self, req: TurnRequest) -> PromptContext: ...

    async def context_usage(self, req: TurnRequest) -> dict[str, Any]: ...

    async def compact_now(self, req: TurnRequest, focus: str = "") -> str: ...


class ApprovalsPort(Protocol):
    """Held commands waiting for the owner (``bot.conversation.approvals.Approvals``)."""

    def answer(self, code: str, approve: bool) -> str: ...


class TurnsPort(Protocol):
    """The running turns (``bot.conversation.run.Run``), for /stop."""

    def started_by(self, key: str) -> str | None: ...

    async def stop(self, key: str) -> bool: ...


@dataclass(frozen=True)
class CommandPorts:
    cfg: Config
    store: Store
    agent: AgentPort
    # the session's turn request with no user turn (what the prompt and history are made of)
    turn_request: Callable[[CommandCall], TurnRequest]
    approvals: ApprovalsPort | None = None  # None unless some exec security is "ask"
    turns: TurnsPort | None = None  # the running turns (None: nothing can be stopped)
    notices: NoticesPort | None = None  # where /pair publishes its decisions (the UI reads)


Handler = Callable[[CommandCall, CommandPorts], Awaitable[str]]
