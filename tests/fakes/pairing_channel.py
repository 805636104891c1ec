"""A test-only channel waiting to be linked, as a WhatsApp linked device is before its QR code
is scanned: ``pairing_qr()`` gives the code's current payload (``qr``; set it to rotate the
code, None once linked).  Nothing else: it sends nowhere and receives nothing."""

from __future__ import annotations

from channels.base import Channel, InboundSink, OutboundMessage


class PairingChannel(Channel):
    name = "linked"

    def __init__(self, qr: str | None) -> None:
        self.qr = qr

    def pairing_qr(self) -> str | None:
        return self.qr

    async def start(self, sink: InboundSink) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, msg: OutboundMessage) -> list[str]:
        return []
