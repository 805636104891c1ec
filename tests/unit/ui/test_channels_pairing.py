"""What the Channels answer says of a channel waiting to be linked (bot/ui/api/channels.py):
its QR code drawn, or only that it waits when segno is missing; nothing for other channels."""

from __future__ import annotations

import sys

from bot.ui.api.channels import _pairing
from tests.fakes.pairing_channel import PairingChannel

PAYLOAD = "2@ref,aGVsbG8,aWRlbnRpdHk,YWR2"


def test_a_waiting_channel_gets_its_code_drawn_not_spelled():
    got = _pairing(PairingChannel(PAYLOAD))
    assert got is not None and got["qr"].startswith("data:image/svg+xml")
    assert PAYLOAD not in got["qr"]


def test_without_segno_the_page_is_told_it_waits(monkeypatch):
    monkeypatch.setitem(sys.modules, "segno", None)  # an install without the whatsapp extra
    assert _pairing(PairingChannel(PAYLOAD)) == {"qr": None}


def test_a_linked_or_other_channel_has_no_pairing():
    assert _pairing(PairingChannel(None)) is None
    assert _pairing(object()) is None
