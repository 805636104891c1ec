"""The conversation's agents: which one answers a message, and what each one's turns are made
with (docs/architecture.md "several agents").

The agent is chosen once, at intake (:func:`choose`): an HTTP API request names it with its
model (``chela/<id>``), any other message goes by the ``[[bindings]]`` (``bot.rules.routing``,
the most specific binding wins, none: the default agent).  From there the id travels in the
turn's values; each agent's :class:`AgentParts` (its config view, its ``Agent``, its prepare
stage and command ports) are looked up by that id, never by a session key."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from bot.agent.turn import Agent
from bot.config import Config, agent_config
from bot.conversation import gating
from bot.conversation.commands import CommandPorts
from bot.conversation.prepare import Prepare
from bot.conversation.types import CommandCall
from bot.delivery import send
from bot.delivery.outbox import Outbox
from bot.rules.routing import route
from bot.store import Store
from channels.base import Channel, InboundMessage, OutboundMessage, adapter_for

API_PREFIX = "chela/"  # an HTTP API model naming an agent: chela/<agent id>


@dataclass(frozen=True)
class AgentParts:
    """One agent as the conversation uses it: ``cfg`` is that agent's view of the config
    (its ``[agent]``, tools, heartbeat; the daemon's channels)."""

    id: str
    cfg: Config
    agent: Agent
    prepare: Prepare
    commands: CommandPorts
    name_re: re.Pattern[str] | None


def choose(cfg: Config, msg: InboundMessage, known: Mapping[str, object]) -> str | None:
    """The agent that answers ``msg``; None for an HTTP API request whose model names an
    agent that is not one of ``known`` (answered ``model_not_found``, no model call)."""
    model = msg.api.get("model") if msg.api else None
    if isinstance(model, str) and model.startswith(API_PREFIX):
        wanted = model[len(API_PREFIX) :]
        return wanted if wanted in known else None
    if msg.api:  # any other model name: the default agent, as with one agent
        return cfg.agent.id
    return route(cfg.bindings, cfg.agent.id, msg.channel, msg.account, msg.chat_id, msg.sender_id)


async def unknown_model(
    outbox: Outbox, channels: dict[str, Channel], msg: InboundMessage, known: Mapping[str, object]
) -> None:
    """Answer an HTTP API request for an agent there is not (HTTP 404 ``model_not_found``);
    nothing is stored and no model is called."""
    served = ", ".join(API_PREFIX + a for a in known)
    text = f"the model {msg.api.get('model')!r} does not exist; this server serves {served}"
    out = OutboundMessage(chat_id=msg.chat_id, text=text, error="model_not_found")
    await send.deliver(outbox, msg.channel, out, kind="reply")
    channel = adapter_for(channels, msg.channel, msg.account)
    if channel is not None:  # the request's answer is complete
        await channel.turn_done(msg.chat_id, msg.message_id)


def build_parts(
    cfg: Config,
    store: Store,
    agents: Mapping[str, Agent],
    channels: dict[str, Channel],
    ports: dict,
) -> dict[str, AgentParts]:
    """Each agent's parts; ``ports``: what every agent's command ports share (approvals,
    the running turns, the notices)."""
    out: dict[str, AgentParts] = {}
    for agent_id, agent in agents.items():
        own = agent_config(cfg, agent_id)
        prepare = Prepare(own, agent, channels, store)

        def turn_request(call: CommandCall, prepare: Prepare = prepare):
            return prepare.request(call.msg, call.key, "", call.verdict, include_intro=False)

        commands = CommandPorts(own, store, agent, turn_request=turn_request, **ports)
        name_re = gating.name_pattern(own.agent.name)
        out[agent_id] = AgentParts(agent_id, own, agent, prepare, commands, name_re)
    return out
