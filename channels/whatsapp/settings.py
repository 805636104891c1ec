"""What ``WhatsAppChannel`` takes from ``[channels.whatsapp]`` and the app, as one typed value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from channels.base import ChannelError, FetchUrl
from channels.whatsapp.adapter import WhatsAppChannel
from channels.whatsapp.polling import Cursor
from channels.whatsapp.transport.agent_platform import AgentPlatform


@dataclass(frozen=True)
class WhatsAppSettings:
    api_key: str
    api_base: str
    load_cursor: Callable[[], int | None]  # the account's stored update offset
    save_cursor: Callable[[int], None]  # store it durably
    transport: str = "agent_platform"
    poll_timeout: int = 20
    chunk_limit: int = 4096
    per_window: int = 12  # sends (messages, statuses, media each) per window
    polls_per_window: int = 15
    window: float = 60.0  # seconds
    typing_every: float = 20.0  # the platform shows typing for 25 s per call
    account: str = "default"
    fetch: FetchUrl | None = None  # the app's guarded fetch (bot.net) for media downloads

    def open(self) -> WhatsAppChannel:
        if self.transport != "agent_platform":
            raise ChannelError(f"whatsapp: transport {self.transport!r} is not available yet")
        transport = AgentPlatform(
            self.api_key,
            self.api_base,
            per_window=self.per_window,
            polls_per_window=self.polls_per_window,
            window=self.window,
            fetch=self.fetch,
        )
        return WhatsAppChannel(
            transport=transport,
            cursor=Cursor(self.load_cursor, self.save_cursor),
            account=self.account,
            poll_timeout=self.poll_timeout,
            chunk_limit=self.chunk_limit,
            typing_every=self.typing_every,
        )
