"""Stopping in the pipeline, in memory: a /stop while the message's attachment is still being
fetched stops the turn before the model (the user message kept, with a note), and the session
answers the next message as usual; the events of a turn can be read as an async iterator; a
last route that cannot be recorded never fails a stored turn."""

from __future__ import annotations

import asyncio
import logging

from bot.conversation import commit
from channels.base import InboundMessage, MediaItem
from tests.unit.conversation.test_pipeline import (
    MemoryChannel,
    conv,  # noqa: F401 - the fixture
    dm,
    settle,
    statuses,
)


class HeldFetch(MemoryChannel):
    """A channel whose attachment download waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()
        self.release = asyncio.Event()

    async def fetch_media(self, item, dest_dir, max_bytes):
        self.asked.set()
        await self.release.wait()
        raise AssertionError("released only at the end")


async def test_stop_while_an_attachment_is_fetched_stops_before_the_model(conv):  # noqa: F811
    held = HeldFetch()
    conv.channels["telegram"] = conv.prepare.channels["telegram"] = held
    conv.outbox.channels["telegram"] = held
    photo = dm("what is this?")
    photo.attachments = [MediaItem(kind="image", target="", ref="file-1", name="cat.jpg")]
    await conv.on_inbound(photo)
    await asyncio.wait_for(held.asked.wait(), 5)
    key = "agent:main:main"
    assert conv.runner.running(key) and await conv.stop(key) is True
    await settle(conv)
    assert conv.agent.requests == [] and held.sent == [] and statuses(conv) == ["done"]
    (user,) = conv.store.history(key, limit=10, max_chars=10_000)
    assert "what is this?" in user["content"]
    assert "attachment not read: cat.jpg (image); the turn was stopped" in user["content"]
    conv.agent.replies.append("Answered")
    await conv.on_inbound(dm("and now?", n="2"))
    await settle(conv, 2)
    assert [m.text for m in held.sent] == ["Answered"]
    held.release.set()


async def test_the_events_of_a_turn_as_an_async_iterator(conv):  # noqa: F811
    with conv.events.subscribe() as sub:
        await conv.on_inbound(dm("hi"))
        kinds = []
        async for ev in sub:
            kinds.append(ev.kind)
            if ev.kind in ("final", "error"):
                break
    assert kinds[0] == "started" and kinds[-1] == "final"
    assert sub.get_nowait() is None


def test_a_last_route_that_cannot_be_recorded_is_logged(caplog, monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("no route today")

    monkeypatch.setattr(commit.owner_route, "changes", broken)
    msg = InboundMessage(channel="telegram", chat_id="42", sender_id="42", text="hi")
    with caplog.at_level(logging.WARNING):
        assert commit.OwnerChat(msg, "owner", True).changes() == {}
    assert "could not record the last route" in caplog.text
