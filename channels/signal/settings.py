"""What ``SignalChannel`` takes from ``[channels.signal]``, as one typed value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from channels.signal.adapter import SignalChannel


@dataclass(frozen=True)
class SignalSettings:
    account: str  # the bot's number
    http_url: str  # signal-cli's HTTP daemon
    media_dir: Path
    chunk_limit: int
    account_name: str = "default"  # which account of the channel (its config section)

    def open(self) -> SignalChannel:
        return SignalChannel(
            account=self.account,
            http_url=self.http_url,
            media_dir=self.media_dir,
            chunk_limit=self.chunk_limit,
            account_name=self.account_name,
        )
