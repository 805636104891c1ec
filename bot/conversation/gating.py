"""Group gating (docs/architecture.md "dispatch"): is a group message addressed to the agent?

Pure decisions: the session's stored activation or the channel's ``require_mention``, and
whether the message mentions the agent (a platform mention, a reply to it, or its name as
a word).  Decided once per message by the pipeline."""

from __future__ import annotations

import re
from typing import Literal

from bot.config import ChannelPolicy
from channels.base import InboundMessage

Activation = Literal["mention", "always"]


def name_pattern(name: str) -> re.Pattern[str] | None:
    """The agent's name as a whole word, any case; None without a name."""
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE) if name else None


def activation(stored: str | None, pol: ChannelPolicy | None) -> Activation:
    """The session's ``/activation`` when set, else the channel's ``require_mention``."""
    if stored == "always":
        return "always"
    if stored == "mention":
        return "mention"
    return "mention" if (pol is None or pol.require_mention) else "always"


def mentioned(msg: InboundMessage, name_re: re.Pattern[str] | None) -> bool:
    if msg.mentioned or msg.reply_to_bot:
        return True
    return bool(name_re and name_re.search(msg.text or ""))


def addressed(msg: InboundMessage, act: Activation, name_re: re.Pattern[str] | None) -> bool:
    """A group message the agent answers (others only join the group's pending history)."""
    return act == "always" or mentioned(msg, name_re)
