"""``[[bindings]]``: which agent answers which messages, and the checks a set of bindings must
pass at load (an unknown agent or account, two bindings that tie).

A binding names a ``channel`` (required) and optionally an ``account``, a ``chat`` and a
``peer``; the most specific one that matches a message wins (``bot/rules/routing.py``).
Specificity, highest first: chat + peer, chat, peer, account, channel only.  A binding that
also names an account ranks by its chat/peer and matches only messages of that account.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from .base import Model, ids_only
from .channels import MESSAGING

# a binding's specificity, by which of chat/peer it names (an account only matters when
# neither is named: then it outranks a channel-only binding)
CHAT_AND_PEER, CHAT, PEER, ACCOUNT, CHANNEL = 4, 3, 2, 1, 0


class Binding(Model):
    """One ``[[bindings]]`` entry; "" = not named (any value matches)."""

    agent: str
    channel: str
    account: str = ""
    chat: str = ""
    peer: str = ""

    @field_validator("chat", "peer", mode="before")
    @classmethod
    def _str(cls, v: Any) -> Any:
        # ids are often written as TOML integers
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("chat", "peer")
    @classmethod
    def _ids(cls, v: str) -> str:
        return ids_only([v], "bindings")[0] if v.strip() else ""

    @field_validator("account", "agent")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        if v not in MESSAGING:
            raise ValueError(f"unknown channel {v!r}: use one of {', '.join(MESSAGING)}")
        return v

    @property
    def rank(self) -> int:
        """The specificity: a higher rank beats a lower one."""
        if self.chat and self.peer:
            return CHAT_AND_PEER
        if self.chat:
            return CHAT
        if self.peer:
            return PEER
        return ACCOUNT if self.account else CHANNEL

    def overlaps(self, other: Binding) -> bool:
        """Both could match one message at the same specificity (a tie)."""
        return (
            self.rank == other.rank
            and self.channel == other.channel
            and (not self.account or not other.account or self.account == other.account)
            and self.chat == other.chat
            and self.peer == other.peer
        )

    def describe(self) -> str:
        """``channel=telegram account=work chat=42`` (the keys it names)."""
        keys = ("channel", "account", "chat", "peer")
        return " ".join(f"{k}={getattr(self, k)}" for k in keys if getattr(self, k))


def binding_errors(
    bindings: list[Binding], agents: list[str], accounts: dict[str, list[str]]
) -> list[str]:
    """Every problem of ``bindings`` as ``key: message`` lines: an unknown agent, an account
    its channel does not have (``accounts``: channel → account names, "default" included), and
    each pair that ties."""
    out = []
    for i, b in enumerate(bindings):
        if b.agent not in agents:
            out.append(
                f"bindings[{i}].agent: unknown agent {b.agent!r} (agents: {', '.join(agents)})"
            )
        have = accounts.get(b.channel, ["default"])
        if b.account and b.account not in have:
            out.append(
                f"bindings[{i}].account: channels.{b.channel} has no account {b.account!r} "
                f"(accounts: {', '.join(have)})"
            )
    for i, b in enumerate(bindings):
        for j in range(i + 1, len(bindings)):
            if b.overlaps(bindings[j]):
                narrower = b if b.account else bindings[j]
                out.append(
                    f"bindings[{i}] and bindings[{j}]: both match {narrower.describe()} "
                    f"with the same specificity (agents {b.agent!r} and {bindings[j].agent!r}); "
                    "make one more specific or remove one (the first is never preferred)"
                )
    return out
