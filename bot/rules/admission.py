"""Admission: who is served, and at which trust level.

A pure function of the message, the config and the stored pairing approvals.  It runs
once per inbound message, before anything else looks at it; the trust level it returns
decides the session, the tools, the file root and the Project Context files, and nothing
downstream decides it again (the model never does).

Identity is by immutable platform id only: ``allow_from``, ``owner.numbers`` and
``owner_groups`` are compared with ``sender_id`` / ``chat_id``, never with a display
name or username (anyone can pick the username ``1234`` or rename themselves).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from collections.abc import Container

from bot.config import ChannelPolicy, Config, channel_accounts
from bot.rules.keys import session_key_for
from channels.base import DEFAULT_ACCOUNT, InboundMessage, account_key

Trust = Literal["owner", "guest"]
Action = Literal["serve", "pair", "drop"]


@dataclass(frozen=True)
class Verdict:
    action: Action  # serve | pair (unknown DM sender under dm_policy "pairing") | drop
    trust: Trust | None = None  # set when served
    reason: str = ""  # for the log

    @property
    def served(self) -> bool:
        return self.action == "serve"


# the policy of an account the config does not have (or has turned off): nobody is
# served there, not even the owner
NOBODY = ChannelPolicy(dm_policy="disabled", group_policy="disabled")


def channel_policy(
    cfg: Config, channel: str, account: str = DEFAULT_ACCOUNT
) -> ChannelPolicy | None:
    """The DM/group policy section of a messaging channel's account (another account's is
    its table merged over the channel's, ``allow_from`` included); None for the terminal
    and the HTTP API, whose callers are the owner by construction (a local user at the
    keyboard; a caller that presented the API token)."""
    pol = getattr(cfg.channels, channel, None)
    if not isinstance(pol, ChannelPolicy):
        return None
    if account in ("", DEFAULT_ACCOUNT):
        return pol
    merged = channel_accounts(cfg, channel).get(account)
    return merged if isinstance(merged, ChannelPolicy) else NOBODY


def is_owner_sender(msg: InboundMessage, cfg: Config) -> bool:
    """The sender is the owner on this channel account: by id, in the account's
    ``allow_from`` or ``owner.numbers``.  Says nothing about the *turn*: in a group that is
    not an owner group, even the owner's message runs as a guest turn."""
    pol = channel_policy(cfg, msg.channel, msg.account)
    if pol is None:
        return True
    sid = msg.sender_id.strip()
    if not sid or pol is NOBODY:
        return False
    return pol.owner_only() or sid in pol.allow_from or sid in cfg.owner.numbers


def admit(msg: InboundMessage, cfg: Config, approved: Container[tuple[str, str]]) -> Verdict:
    """The verdict for one inbound message.  ``approved`` holds the (account key, sender
    id) pairs the owner approved with ``chela pairing approve`` (the key names the
    channel's account: ``telegram``, ``telegram:work``; one account's guests are nobody
    on another)."""
    if msg.sender_is_bot:
        return Verdict("drop", reason="sent by a bot")
    pol = channel_policy(cfg, msg.channel, msg.account)
    if pol is None:
        return Verdict("serve", "owner", "local or token-authenticated channel")
    if pol is NOBODY:
        return Verdict("drop", reason=f"unknown account {msg.account!r}")
    if msg.chat_type == "group":
        return _admit_group(msg, pol)
    return _admit_direct(msg, cfg, pol, approved)


def _admit_group(msg: InboundMessage, pol: ChannelPolicy) -> Verdict:
    if pol.group_policy == "disabled":
        return Verdict("drop", reason="groups disabled")
    if msg.chat_id in pol.owner_groups:
        return Verdict("serve", "owner", "owner group")
    if pol.group_policy == "allowlist" and "*" not in pol.groups and msg.chat_id not in pol.groups:
        return Verdict("drop", reason="group not allowlisted")
    return Verdict("serve", "guest", "group")


def _admit_direct(
    msg: InboundMessage, cfg: Config, pol: ChannelPolicy, approved: Container[tuple[str, str]]
) -> Verdict:
    if is_owner_sender(msg, cfg):
        return Verdict("serve", "owner", "owner id")
    if pol.dm_policy == "disabled":
        return Verdict("drop", reason="direct messages disabled")
    if pol.dm_policy == "open":
        return Verdict("serve", "guest", "open direct messages")
    if (account_key(msg.channel, msg.account), msg.sender_id) in approved:
        return Verdict("serve", "guest", "paired")
    if pol.dm_policy == "pairing":
        return Verdict("pair", reason="unknown sender (pairing)")
    return Verdict("drop", reason="sender not allowlisted")


def session_key(msg: InboundMessage, cfg: Config, trust: Trust | None) -> str:
    """with §9: an owner's DM follows ``session.dm_scope``; anyone else's DM is
    always their own ``agent:<id>:<channel>:direct:<peer>`` session."""
    if msg.api:
        # the OpenAI-compatible API: ``user`` names a server-side session; a
        # request without it is stateless, in a throw-away session of its own (never
        # the owner's main conversation)
        if msg.api.get("stateless") or not msg.sender_id:
            return f"agent:{cfg.agent.id}:{msg.channel}-stateless:{msg.chat_id}"
        return f"agent:{cfg.agent.id}:{msg.channel}:{msg.sender_id}"
    scope = cfg.session.dm_scope if trust == "owner" else "per-channel-peer"
    return session_key_for(cfg.agent.id, scope, msg)


def guest_dir(cfg: Config, key: str) -> Path:
    """A guest session's own file root: ``<state_dir>/guests/<hash of the session key>``."""
    return cfg.guests_dir / hashlib.sha256(key.encode()).hexdigest()[:16]
