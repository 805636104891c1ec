"""Inbound on a linked device: hand what the transport queued to the core, in order.

neonize pushes events; the transport turns them into ``InboundMessage`` values and state
changes (strings: ``connected``, ``pairing``, ``reconnecting: …``, ``logged_out: …``) on one
queue, which :meth:`LinkedInbound.run` reads through the transport's ``poll``.  A message is
handed to the sink (retried while the store fails) and then reported taken (read receipt);
a final state ends the loop, and the channel stays down until Chela restarts: a logged-out
or replaced session never reconnects in a loop.  There is no backlog to skip and no cursor:
what WhatsApp delivers after connecting (messages sent while Chela was down) is answered,
and the store drops a message it already has."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.base import InboundMessage, InboundSink
from channels.retry import Backoff
from channels.whatsapp.polling import store_until_taken

log = logging.getLogger("chela.channels.whatsapp")

FINAL = ("logged_out", "banned", "outdated")  # states after which the account stays down


class LinkedInbound:
    def __init__(
        self,
        transport: Any,
        *,
        account: str,
        poll_timeout: int,
        on_state: Callable[[str], None],
        on_taken: Callable[[InboundMessage], Awaitable[None]],
        backoff: Backoff,
    ) -> None:
        self.transport, self.account, self.poll_timeout = transport, account, poll_timeout
        self.on_state, self.on_taken, self.backoff = on_state, on_taken, backoff

    @property
    def agent_id(self) -> str:
        """The linked number's own JID (once connected)."""
        return str(self.transport.own_jid)

    async def skip_backlog(self) -> None:
        return None

    async def run(self, sink: InboundSink) -> None:
        """Until cancelled or a final state (logged out, banned, outdated)."""
        while True:
            for item in await self.transport.poll(None, self.poll_timeout) or []:
                if isinstance(item, str):
                    self.on_state(item)
                    if item.startswith(FINAL):
                        return
                else:
                    await self._hand(item, sink)

    async def _hand(self, msg: InboundMessage, sink: InboundSink) -> None:
        await store_until_taken(sink, msg, None, self.backoff, self.account)
        await self.on_taken(msg)
