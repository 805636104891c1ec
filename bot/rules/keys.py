"""Session keys: which conversation a message, a cron job or a sub-agent
belongs to.  Pure: a key is built from plain values.

- the owner's main conversation: ``agent:<id>:main``;
- a direct message, by ``session.dm_scope``: ``main`` (the main conversation), ``per-peer``
  (``agent:<id>:direct:<peer>``) or ``per-channel-peer``
  (``agent:<id>:<channel>:direct:<peer>``; always so for a message that names its own peer
  session, e.g. an HTTP API ``user``);
- a group: ``agent:<id>:<channel>:<group kind>:<chat>`` and ``:thread:<thread>`` in a thread;
- a cron job ``agent:<id>:cron:<job>``, a sub-agent ``agent:<id>:subagent:<uid>``."""

from __future__ import annotations

from channels.base import InboundMessage


def main_key(agent_id: str) -> str:
    return f"agent:{agent_id}:main"


def direct_key(agent_id: str, dm_scope: str, channel: str, peer: str) -> str:
    """A direct chat's session under ``dm_scope`` (an unknown scope: the main one)."""
    if dm_scope == "per-peer":
        return f"agent:{agent_id}:direct:{peer}"
    if dm_scope == "per-channel-peer":
        return f"agent:{agent_id}:{channel}:direct:{peer}"
    return main_key(agent_id)


def group_key(agent_id: str, channel: str, kind: str, chat_id: str, thread: str | None) -> str:
    key = f"agent:{agent_id}:{channel}:{kind or 'group'}:{chat_id}"
    return f"{key}:thread:{thread}" if thread else key


def session_key_for(agent_id: str, dm_scope: str, msg: InboundMessage) -> str:
    """The session of ``msg`` under ``dm_scope`` (trust is the caller's: ``admission``)."""
    if msg.chat_type == "direct":
        scope = "per-channel-peer" if msg.peer_session else dm_scope
        return direct_key(agent_id, scope, msg.channel, msg.sender_id)
    return group_key(agent_id, msg.channel, msg.group_kind, msg.chat_id, msg.thread_id)


def subagent_key(agent_id: str, uid: str) -> str:
    return f"agent:{agent_id}:subagent:{uid}"


def cron_key(agent_id: str, job: str) -> str:
    return f"agent:{agent_id}:cron:{job}"
