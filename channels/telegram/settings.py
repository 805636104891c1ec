"""What ``TelegramChannel`` takes from ``[channels.telegram]`` and the app, as one typed value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from channels.telegram.adapter import TelegramChannel


@dataclass(frozen=True)
class TelegramSettings:
    token: str
    api_base: str
    media_dir: Path
    poll_timeout: int
    chunk_limit: int
    commands: Callable[[], list[tuple[str, str]]] | None = None  # the chat's command menu
    account: str = "default"  # which account of the channel (its config section)

    def open(self) -> TelegramChannel:
        return TelegramChannel(
            token=self.token,
            api_base=self.api_base,
            media_dir=self.media_dir,
            poll_timeout=self.poll_timeout,
            chunk_limit=self.chunk_limit,
            account=self.account,
            commands=self.commands,
        )
