"""What the UI's routes read, built once by the app (bot/app/build.py) and handed to
:func:`bot.ui.app.build_ui_app`.  Types that live above ``ui`` (the scheduler, the MCP
manager) are named by the small protocols here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bot.conversation.approvals import Approvals
    from bot.config import Config
    from bot.conversation.events import TurnEvents
    from bot.conversation.pipeline import Conversation
    from bot.delivery.outbox import Outbox
    from bot.reports.notices import Notices
    from bot.store import Store


class Schedule(Protocol):
    """The heartbeat and cron jobs as the Schedule page drives them."""

    def jobs(self) -> list[dict[str, Any]]: ...

    def run_now(self, name: str) -> Any: ...

    def pause(self, name: str) -> Any: ...

    def resume(self, name: str) -> Any: ...

    def for_route(self, route: dict[str, Any]) -> Any:
        """The ``cron`` tool's own view (add, remove, preview): the page edits through it."""
        ...


def _no_states() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class UiContext:
    cfg: Config
    store: Store
    conversation: Conversation
    outbox: Outbox
    notices: Notices
    turn_events: TurnEvents
    approvals: Approvals | None = None
    schedule: Schedule | None = None  # None until the scheduler offers it
    # the channels' states now: {channel id: state or a dict of what §16.4 lists}
    channel_states: Callable[[], Mapping[str, Any]] = _no_states
    mcp: Any = None  # bot.mcp.client.McpManager when [[mcp.servers]] are configured
    started: float = 0.0  # time.time() when the daemon was built
    config_path: Path | None = None
    # ``chela check``'s verdict on a config (an object with ``errors`` and ``warnings``,
    # lists of lines); the command line hands it down, the Config page saves only on no error
    config_check: Callable[[Config], Any] | None = None
