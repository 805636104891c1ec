"""The daemon's components, built in dependency order, each handed what it uses (its ports).

fs → Store → channels → Outbox → Approvals → MCP → Agent → Router → Scheduled → Cron.  Nothing is
left ``None`` for a later start(): what exists is built here, once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot import owner_route
from bot.agent.turn import Agent
from bot.agent.compaction import message_counter
from bot.app.channels import SecretMissing, build_channel, enabled_channels
from bot.approvals import Approvals
from bot.config import Config
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.reports.notices import Notices
from bot.schedule import ScheduleService, Scheduled
from bot.conversation.pipeline import Conversation as Router
from bot.conversation.lanes import SessionLanes
from bot.store import Store, StoreError
from bot.ui.context import UiContext
from channels.base import Channel

if TYPE_CHECKING:
    from bot.mcp import McpManager

log = logging.getLogger("chela.daemon")


@dataclass(frozen=True)
class Components:
    store: Store
    lanes: SessionLanes
    channels: dict[str, Channel]
    outbox: Outbox
    agent: Agent
    mcp: McpManager | None  # only when [[mcp.servers]] are configured
    router: Router
    scheduled: Scheduled
    cron: ScheduleService
    notices: Notices  # the one notice stream (SPEC §16.5): channel states are published on it


def prepare_dirs(cfg: Config) -> None:
    """The workspace (with its starter files when new), the state and media dirs."""
    from bot.private import private_dir
    from bot.prompt.init import init_workspace

    ws = cfg.agent.workspace
    try:
        if not ws.exists():
            created = init_workspace(ws)
            log.info("created workspace %s with %d starter file(s)", ws, len(created))
        private_dir(cfg.agent.state_dir)
        private_dir(cfg.media_dir)
    except OSError as e:
        where = e.filename or cfg.agent.state_dir
        raise StoreError(
            f"cannot create or use {where}: {e.strerror or e}. agent.workspace and "
            "agent.state_dir must be directories Chela can write"
        ) from None


def configured_channels(
    cfg: Config, mounts: Callable[[], list[tuple[str, Any]]] | None = None
) -> dict[str, Channel]:
    """The adapters of the enabled channels; one whose secret is missing is named and skipped.
    ``mounts``: the sub-applications the HTTP channel serves beside its API (the UI)."""
    built: dict[str, Channel] = {}
    for name in enabled_channels(cfg):
        try:
            ports = {"mounts": mounts} if name == "http" and mounts is not None else {}
            built[name] = build_channel(cfg, name, **ports)
        except SecretMissing as e:
            log.error("channel %s not started: %s", name, e)
    return built


def approvals_for(
    cfg: Config,
    store: Store,
    outbox: Outbox,
    channels: dict[str, Channel],
    notices: Notices | None = None,
) -> Approvals | None:
    """Exec security "ask": held commands wait for the owner, asked in a direct chat and
    listed in the Control UI's Inbox (with the UI on they wait there when no chat can ask)."""
    if cfg.tools.exec.security != "ask":
        return None
    return Approvals(
        send.notifier(outbox, kind="approval"),
        lambda route, trust: owner_route.ask_route(store, cfg, channels, route, trust),
        notices=notices,
        inbox=cfg.channels.http.enabled and cfg.ui.enabled,
    )


def _mcp(cfg: Config, tools_changed: Callable[[], None]) -> McpManager | None:
    if not cfg.mcp.servers:
        return None
    from bot.mcp import McpManager, default_log_dir

    return McpManager(cfg.mcp.servers, log_dir=default_log_dir(cfg), on_change=tools_changed)


def _ui_mounts(
    cfg: Config, ctx: Callable[[], UiContext]
) -> Callable[[], list[tuple[str, Any]]] | None:
    """The Control UI's sub-application, built afresh at each HTTP channel start (SPEC §16.1)."""
    if not (cfg.channels.http.enabled and cfg.ui.enabled):
        return None
    from bot.ui.app import not_served_reason, ui_mounts

    reason = not_served_reason(cfg)
    if reason:
        log.warning("the Control UI is not served: %s", reason)
    return lambda: ui_mounts(ctx())


def build(
    cfg: Config,
    given_channels: dict[str, Channel] | None = None,
    channel_states: Callable[[], Mapping[str, Any]] | None = None,
) -> Components:
    """Every component, in dependency order.  Raises ``StoreError`` (dirs) or ``ConfigError``."""
    from bot.prompt.hooks import load_plugins

    prepare_dirs(cfg)
    if given_channels is None and cfg.channels.http.enabled:
        from bot.app.http_token import ensure_http_token

        ensure_http_token(cfg)  # before the agent reads the secrets it scrubs
    # each stored message is counted once, with the model's tokenizer (SPEC §10)
    store = Store(cfg.db_path, token_counter=message_counter(cfg))
    lanes = SessionLanes(cfg.session.max_concurrent_turns)
    hooks = load_plugins([p.module for p in cfg.plugins]) if cfg.plugins else None
    notices = Notices()  # what the owner may act on, for the UI's event stream (SPEC §16.5)
    # the UI's sub-application, built when the HTTP channel starts (not for given channels)
    mounts = _ui_mounts(cfg, lambda: ui) if given_channels is None else None
    channels = configured_channels(cfg, mounts) if given_channels is None else dict(given_channels)
    # everything that sends goes through the outbox: built before any of them
    outbox = Outbox(store, channels, max_age=cfg.delivery.max_age_seconds, notices=notices)
    approvals = approvals_for(cfg, store, outbox, channels, notices)

    # two cycles are closed by callables read at call time, never by setting attributes: MCP
    # tells the agent its tools changed (after start), and the agent's cron tool reaches the
    # cron service, which runs its jobs through the agent (agent → cron → scheduled → agent)
    def tools_changed() -> None:
        agent.refresh_tools()

    mcp = _mcp(cfg, tools_changed)
    agent = Agent(
        cfg,
        store,
        hooks=hooks,
        send_message=send.message_tool(outbox),
        approvals=approvals,
        mcp=mcp,
        cron=lambda: cron,  # the cron tool (when enabled) and /cron reach the schedule
    )
    router = Router(
        cfg, store, agent, lanes, channels, outbox, approvals=approvals, notices=notices
    )
    # heartbeat and cron turns go through the conversation's run stage (events, /stop, /model)
    scheduled = Scheduled(cfg, store, agent, lanes, outbox, channels, runner=router.runner)
    cron = ScheduleService(cfg, store, scheduled, notices=notices)  # schedule.run notices
    ui = UiContext(
        cfg=cfg,
        store=store,
        conversation=router,
        outbox=outbox,
        notices=notices,
        turn_events=router.events,
        approvals=approvals,
        channel_states=channel_states or dict,
        mcp=mcp,
        started=time.time(),
        config_path=cfg.source,
        schedule=cron,  # the Schedule page's jobs, run now, pause, resume
    )
    return Components(store, lanes, channels, outbox, agent, mcp, router, scheduled, cron, notices)
