"""What ``DiscordChannel`` takes from ``[channels.discord]``, as one typed value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from channels.discord.adapter import DiscordChannel


@dataclass(frozen=True)
class DiscordSettings:
    token: str
    api_base: str
    gateway_url: str
    media_dir: Path
    chunk_limit: int
    account: str = "default"  # which account of the channel (its config section)

    def open(self) -> DiscordChannel:
        return DiscordChannel(
            token=self.token,
            api_base=self.api_base,
            gateway_url=self.gateway_url,
            media_dir=self.media_dir,
            chunk_limit=self.chunk_limit,
            account=self.account,
        )
