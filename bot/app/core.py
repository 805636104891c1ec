"""The daemon, built top to bottom (:func:`build`): the store and the channels
(:mod:`bot.app.build`), then Outbox → Approvals → MCP → Agent → Conversation → Scheduled → Cron,
each handed what it uses.  Nothing is left ``None`` for a later start().
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.conversation import owner_route
from bot.agent.turn import Agent
from bot.app.build import configured_channels, open_store
from bot.conversation.approvals import Approvals
from bot.config import Config, agent_config, agent_ids
from bot.conversation.lanes import SessionLanes
from bot.conversation.pipeline import Conversation
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.memory import memory_index
from bot.reports.notices import Notices
from bot.schedule import Scheduled, ScheduleService
from bot.store import Store
from bot.triggers.events import Triggers
from bot.ui.context import UiContext
from channels.base import Channel

if TYPE_CHECKING:
    from bot.mcp.client import McpManager

log = logging.getLogger("chela.daemon")


@dataclass(frozen=True)
class Components:
    store: Store
    lanes: SessionLanes
    channels: dict[str, Channel]
    outbox: Outbox
    agent: Agent  # the default agent
    agents: dict[str, Agent]  # every agent by id, the default agent's first
    mcp: McpManager | None  # only when [[mcp.servers]] are configured
    conversation: Conversation
    scheduled: Scheduled
    cron: ScheduleService
    notices: Notices  # the one notice stream: channel states are published on it
    triggers: Triggers  # webhook and mail events, each run as one turn


def approvals_for(
    cfg: Config,
    store: Store,
    outbox: Outbox,
    channels: dict[str, Channel],
    notices: Notices | None = None,
) -> Approvals | None:
    """Exec security "ask": held commands wait for the owner, asked in a direct chat and
    listed in the Control UI's Inbox (with the UI on they wait there when no chat can ask)."""
    if all(agent_config(cfg, a).tools.exec.security != "ask" for a in agent_ids(cfg)):
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
    from bot.mcp.client import McpManager, default_log_dir

    return McpManager(cfg.mcp.servers, log_dir=default_log_dir(cfg), on_change=tools_changed)


def _ui_mounts(
    cfg: Config, ctx: Callable[[], UiContext]
) -> Callable[[], list[tuple[str, Any]]] | None:
    """The Control UI's sub-application, built afresh at each HTTP channel start."""
    if not (cfg.channels.http.enabled and cfg.ui.enabled):
        return None
    from bot.ui.app import not_served_reason, ui_mounts

    reason = not_served_reason(cfg)
    if reason:
        log.warning("the Control UI is not served: %s", reason)
    return lambda: ui_mounts(ctx())


def _mounts(
    cfg: Config, ctx: Callable[[], UiContext], triggers: Callable[[], Triggers]
) -> Callable[[], list[tuple[str, Any]]] | None:
    """The HTTP channel's sub-applications: the Control UI (first: ``/`` leads there) and
    the ``/hooks`` routes of ``[[hooks]]``."""
    ui = _ui_mounts(cfg, ctx)
    if not cfg.hooks:
        return ui
    from bot.triggers import hooks_mounts

    return lambda: [*(ui() if ui else []), *hooks_mounts(cfg, triggers)]


def build(
    cfg: Config,
    given_channels: dict[str, Channel] | None = None,
    channel_states: Callable[[], Mapping[str, Any]] | None = None,
    config_check: Callable[[Config], Any] | None = None,
) -> Components:
    """Every component, in dependency order.  ``given_channels`` (tests, one-shot commands)
    replace the configured ones.  Raises ``StoreError`` (dirs, database) or ``ConfigError`` (a
    plugin that cannot be loaded)."""
    from bot.prompt.hooks import load_plugins

    notices = Notices()  # what the owner may act on, for the UI's stream
    store = open_store(cfg, http_token=given_channels is None, publish=notices.publish)
    lanes = SessionLanes(cfg.session.max_concurrent_turns)
    hooks = load_plugins([p.module for p in cfg.plugins]) if cfg.plugins else None
    if given_channels is not None:
        channels = dict(given_channels)
    else:  # the HTTP channel serves the Control UI, whose context is made below
        channels = configured_channels(cfg, _mounts(cfg, lambda: ui, lambda: triggers), store=store)
    # everything that sends goes through the outbox: built before any of them
    outbox = Outbox(store, channels, max_age=cfg.delivery.max_age_seconds, notices=notices)
    approvals = approvals_for(cfg, store, outbox, channels, notices)

    # two cycles are closed by callables read at call time, never by setting attributes: MCP
    # tells the agent its tools changed (after start), and the agent's cron tool reaches the
    # cron service, which runs its jobs through the agent (agent → cron → scheduled → agent)
    def tools_changed() -> None:
        for agent in agents.values():
            agent.refresh_tools()

    mcp = _mcp(cfg, tools_changed)
    # one Agent per agent id, each with its own config view (workspace, model, tools, memory,
    # budgets), prompt cache, compaction and usage
    agents = {
        agent_id: Agent(
            agent_config(cfg, agent_id),
            store,
            hooks=hooks,
            send_message=send.message_tool(outbox, cfg, agent_id),  # its own accounts only
            approvals=approvals,
            mcp=mcp,
            cron=lambda: cron,  # the cron tool (when enabled) and /cron reach the schedule
            memory=memory_index(agent_config(cfg, agent_id), store),  # memory_search's
        )
        for agent_id in agent_ids(cfg)
    }
    conversation = Conversation(
        cfg, store, agents, lanes, channels, outbox, approvals=approvals, notices=notices
    )
    # heartbeat and cron turns go through the conversation's run stage (events, /stop, /model)
    scheduled = Scheduled(cfg, store, agents, lanes, outbox, channels, runner=conversation.runner)
    cron = ScheduleService(cfg, store, scheduled, notices=notices)  # schedule.run notices
    runner, outage = conversation.runner, conversation.outage  # event turns share both
    triggers = Triggers(cfg, store, agents, lanes, outbox, channels, runner=runner, outage=outage)
    ui = UiContext(
        cfg=cfg,
        store=store,
        conversation=conversation,
        outbox=outbox,
        notices=notices,
        turn_events=conversation.events,
        approvals=approvals,
        channel_states=channel_states or dict,
        mcp=mcp,
        started=time.time(),
        config_path=cfg.source,
        schedule=cron,  # the Schedule page's jobs, run now, pause, resume
        config_check=config_check,  # `chela check`'s verdict, for the Config page's Save
    )
    default = agents[cfg.agent.id]
    parts = (store, lanes, channels, outbox, default, agents, mcp, conversation, scheduled, cron)
    return Components(*parts, notices, triggers)
