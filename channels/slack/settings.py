"""What ``SlackChannel`` takes from ``[channels.slack]``, as one typed value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from channels.slack.adapter import SlackChannel


@dataclass(frozen=True)
class SlackSettings:
    mode: str  # "socket" or "http"
    bot_token: str
    app_token: str  # socket mode
    signing_secret: str  # HTTP mode
    api_base: str
    listen: str
    media_dir: Path
    chunk_limit: int
    account: str = "default"  # which account of the channel (its config section)

    def open(self) -> SlackChannel:
        return SlackChannel(
            mode=self.mode,
            bot_token=self.bot_token,
            app_token=self.app_token,
            signing_secret=self.signing_secret,
            api_base=self.api_base,
            listen=self.listen,
            media_dir=self.media_dir,
            chunk_limit=self.chunk_limit,
            account=self.account,
        )
