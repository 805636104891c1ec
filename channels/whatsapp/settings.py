"""What ``WhatsAppChannel`` takes from ``[channels.whatsapp]`` and the app, as one typed value."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from channels.base import ChannelError, FetchUrl
from channels.whatsapp.adapter import WhatsAppChannel
from channels.whatsapp.polling import Cursor
from channels.whatsapp.transport import Transport
from channels.whatsapp.transport.agent_platform import AgentPlatform


@dataclass(frozen=True)
class WhatsAppSettings:
    api_key: str = field(repr=False)  # never in a log line, even through a repr
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
    # a linked device (transport = "linked_device"): its session database
    # (<state_dir>/whatsapp/<account>.session.db) and the app's lock on it (one process per
    # session), where who wrote and which LID is which number are kept (the state
    # database), who may get a message without writing first (the owner's ids), which
    # groups are served, and the random wait added to each paced send; ``client_factory``
    # makes neonize's client (tests pass a fake one)
    session_db: Path | None = None
    session_lock: Any = None
    load_memory: Callable[[], Any] = dict
    save_memory: Callable[[dict[str, Any]], None] = lambda _: None
    owners: tuple[str, ...] = ()
    group_policy: str = "disabled"
    groups: tuple[str, ...] = ()
    send_jitter: float = 1.0
    client_factory: Callable[[str], Any] | None = None

    def open(self) -> WhatsAppChannel:
        if self.transport == "linked_device":
            return self._linked()
        if self.transport != "agent_platform":
            raise ChannelError(f"whatsapp: unknown transport {self.transport!r}")
        transport = AgentPlatform(
            self.api_key,
            self.api_base,
            per_window=self.per_window,
            polls_per_window=self.polls_per_window,
            window=self.window,
            fetch=self.fetch,
        )
        return self._channel(transport)

    def _channel(
        self, transport: Transport, inbound: Callable[..., Any] | None = None
    ) -> WhatsAppChannel:
        return WhatsAppChannel(
            transport=transport,
            cursor=Cursor(self.load_cursor, self.save_cursor),
            account=self.account,
            poll_timeout=self.poll_timeout,
            chunk_limit=self.chunk_limit,
            typing_every=self.typing_every,
            inbound=inbound,
        )

    def _linked(self) -> WhatsAppChannel:
        """A linked device (neonize is imported here, not before)."""
        if self.session_db is None or self.session_lock is None:
            raise ChannelError("whatsapp: a linked device needs its session database and lock")
        if self.client_factory is None:
            from channels.whatsapp.linked.session import require_neonize

            require_neonize()
        from channels.whatsapp.linked.guards import Memory
        from channels.whatsapp.linked.inbound import LinkedInbound
        from channels.whatsapp.transport.linked_device import LinkedDevice

        transport = LinkedDevice(
            self.session_db,
            lock=self.session_lock,
            memory=Memory(self.load_memory, self.save_memory),
            account=self.account,
            owners=self.owners,
            group_policy=self.group_policy,
            groups=self.groups,
            per_window=self.per_window,
            window=self.window,
            jitter=self.send_jitter,
            client_factory=self.client_factory,
        )
        return self._channel(transport, inbound=functools.partial(LinkedInbound, transport))
