"""Our Agent Platform transport (channels/whatsapp/transport/agent_platform.py) against the
wire fake: what each answer of the platform becomes."""

from __future__ import annotations

import asyncio

import pytest

from bot.app.channel_ports import media_fetch
from channels.base import ChannelError, MediaTooLarge
from channels.whatsapp import translate
from channels.whatsapp.transport import ApiError
from channels.whatsapp.transport.agent_platform import AgentPlatform
from tests.fakes.whatsapp import CREATOR, FakeWhatsApp

KEY = "k-integration"


@pytest.fixture
async def wa():
    async with FakeWhatsApp(key=KEY) as f:
        yield f


@pytest.fixture
async def ap(wa):
    # the daemon's guarded fetch (bot.net), the fake's loopback host allowed as an owner would
    t = AgentPlatform(KEY, wa.api_base, fetch=media_fetch(["127.0.0.1"]))
    await t.open()
    yield t
    await t.close()


async def test_a_poll_returns_the_answer_then_nothing(wa, ap):
    wamid = wa.inject_text("hi")
    batch = translate.parse_updates(await ap.poll(0, 0))
    assert [m["id"] for m in batch.messages] == [wamid]
    assert await ap.poll(batch.next_offset, 0) is None  # 204: nothing after the cursor


async def test_a_second_poller_knocks_the_first_off_with_409(wa, ap):
    first = asyncio.ensure_future(ap.poll(0, 5))
    for _ in range(500):  # until the fake holds the first poll open (not a guessed delay)
        if wa.poll_waiting:
            break
        await asyncio.sleep(0.01)
    assert wa.poll_waiting
    other = AgentPlatform(KEY, wa.api_base)
    await other.open()
    try:
        second = asyncio.ensure_future(other.poll(0, 1))
        with pytest.raises(ApiError) as err:
            await first
        assert (err.value.status, err.value.code) == (409, 1752041)
        assert await second is None
    finally:
        await other.close()


async def test_a_revoked_key_is_answered_400_code_100(wa):
    bad = AgentPlatform("revoked", wa.api_base)
    await bad.open()
    try:
        with pytest.raises(ApiError) as err:
            await bad.poll(None, 0)
        assert (err.value.status, err.value.code) == (400, 100)
    finally:
        await bad.close()


async def test_send_upload_and_download_round_trip(wa, ap, tmp_path):
    wid = await ap.send_message(translate.text_payload(CREATOR, "hello"))
    assert wid.startswith("wamid.") and wa.sent[0].text == "hello"
    f = tmp_path / "a.pdf"
    f.write_bytes(b"%PDF-1.4 tiny")
    media_id = await ap.upload(f, "application/pdf")
    got_mime, size = await ap.download(media_id, tmp_path / "back.pdf", 1000)
    assert (got_mime, size) == ("application/pdf", len(b"%PDF-1.4 tiny"))
    assert (tmp_path / "back.pdf").read_bytes() == f.read_bytes()
    assert oct((tmp_path / "back.pdf").stat().st_mode & 0o777) == "0o600"


async def test_a_download_over_the_cap_leaves_no_file(wa, ap, tmp_path):
    wa.inject_media("document", b"x" * 5000, "application/pdf", filename="big.pdf")
    media_id = next(iter(wa.media))
    with pytest.raises(MediaTooLarge):
        await ap.download(media_id, tmp_path / "big.pdf", 1000)
    assert not (tmp_path / "big.pdf").exists() and wa.downloads == []


async def test_a_download_that_does_not_match_its_digest_is_refused(wa, ap, tmp_path):
    wa.inject_media("image", b"real bytes", "image/png")
    wa.corrupt = True
    with pytest.raises(ChannelError, match="SHA-256"):
        await ap.download(next(iter(wa.media)), tmp_path / "x.png", 1000)
    assert not (tmp_path / "x.png").exists()


async def test_refusals_carry_status_and_code(wa, ap, tmp_path):
    with pytest.raises(ApiError) as err:
        await ap.send_message(translate.text_payload("user:1", "to a stranger"))
    assert (err.value.status, err.value.code, err.value.permanent) == (403, 131005, True)
    gif = tmp_path / "a.gif"
    gif.write_bytes(b"GIF89a")
    with pytest.raises(ApiError) as err:
        await ap.upload(gif, "image/gif")
    assert err.value.code == 131053
    wa.fail_next("messages", 503, 131016)
    with pytest.raises(ApiError) as err:
        await ap.send_message(translate.text_payload(CREATOR, "x"))
    assert not err.value.permanent  # not accepted: certainly not sent, retried
    wa.fail_next("messages", 500, 2)
    with pytest.raises(ApiError) as err:
        await ap.send_message(translate.text_payload(CREATOR, "x"))
    assert err.value.permanent  # outcome unknown: not sent again


async def test_429_is_waited_out_and_the_call_made_once_more(wa, tmp_path):
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    t = AgentPlatform(KEY, wa.api_base, sleep=sleep)
    await t.open()
    try:
        wa.fail_next("messages", 429, 130429, retry_after=7)
        wa.fail_next("messages", 429, 130429)  # the fake always sends Retry-After; 60 s else
        await t.send_message(translate.text_payload(CREATOR, "once"))
    finally:
        await t.close()
    assert waits == [7.0, 60.0] and [s.text for s in wa.sent] == ["once"]


async def test_a_media_url_off_the_platform_hosts_is_not_fetched(wa, ap, tmp_path):
    wa.inject_media("image", b"img", "image/png")
    wa.media_url = "http://10.0.0.1/steal"
    with pytest.raises(ChannelError, match="outside the platform's hosts"):
        await ap.download(next(iter(wa.media)), tmp_path / "x.png", 1000)
    assert wa.downloads == []


async def test_a_download_to_a_private_host_the_owner_did_not_allow_is_refused(wa, tmp_path):
    """Media goes through bot.net's rule: the fake's 127.0.0.1 is loopback, refused unless
    allowed (``ap`` above allows it: the round trip is the twin); without a fetch, nothing."""
    wa.inject_media("image", b"img", "image/png")
    for fetch, why in ((media_fetch(), "blocked address"), (None, "no guarded fetch")):
        t = AgentPlatform(KEY, wa.api_base, fetch=fetch)
        await t.open()
        try:
            with pytest.raises(ChannelError, match=why):
                await t.download(next(iter(wa.media)), tmp_path / "x.png", 1000)
        finally:
            await t.close()
    assert wa.downloads == [] and not (tmp_path / "x.png").exists()


def _channel(wa: FakeWhatsApp, tmp_path):
    from channels.whatsapp.settings import WhatsAppSettings

    saved: list[int] = []
    return WhatsAppSettings(
        api_key=KEY,
        api_base=wa.api_base,
        load_cursor=lambda: saved[-1] if saved else None,
        save_cursor=saved.append,
        poll_timeout=1,
    ).open()


async def test_a_stale_quote_is_dropped_and_the_reply_still_sent(wa, tmp_path):
    from channels.base import OutboundMessage

    ch = _channel(wa, tmp_path)
    await ch.open_for_sending()
    try:
        real = wa.inject_text("quote me")
        await ch.send(OutboundMessage(CREATOR, "first", reply_to_id=real, reply_mode="first"))
        await ch.send(
            OutboundMessage(CREATOR, "second", reply_to_id="wamid.gone", reply_mode="first")
        )
    finally:
        await ch.stop()
    assert [s.text for s in wa.sent] == ["first", "second"]
    assert wa.sent[0].payload["context"] == {"message_id": real}  # twin: a good quote is kept
    assert "context" not in wa.sent[1].payload


async def test_typing_is_shown_once_per_stretch_not_at_every_refresh(wa, tmp_path):
    from channels.base import OutboundMessage

    received: list = []

    async def sink(msg, cursor=None) -> None:
        received.append(msg)

    ch = _channel(wa, tmp_path)
    await ch.start(sink)
    try:
        wa.inject_text("hello")
        for _ in range(200):
            if received and len(wa.statuses) >= 1:
                break
            await asyncio.sleep(0.02)
        for _ in range(5):  # the core refreshes every few seconds; the platform shows 25 s
            await ch.typing(CREATOR)
        await ch.send(OutboundMessage(CREATOR, "done"))
        await ch.typing(CREATOR)  # a message ended the indicator: the next turn shows it again
    finally:
        await ch.stop()
    typing = [b for _, b in wa.statuses if "typing_indicator" in b]
    assert len(typing) == 2 and all(b["message_id"] == received[0].message_id for b in typing)


async def test_a_batch_cursor_rides_with_its_last_message_or_is_saved_alone(wa, tmp_path):
    """The sink gets the batch's next offset with the last message it keeps (the core stores
    it in that row's transaction); a batch with nothing to keep saves it through the port."""
    from channels.whatsapp.settings import WhatsAppSettings

    saved: list[int] = [0]
    got: list[tuple[str, object]] = []

    async def sink(msg, cursor=None) -> None:
        got.append((msg.text, cursor))

    ch = WhatsAppSettings(
        api_key=KEY,
        api_base=wa.api_base,
        load_cursor=lambda: saved[-1],
        save_cursor=saved.append,
        poll_timeout=1,
    ).open()
    for text in ("one", "two", "three"):
        wa.inject_text(text)
    await ch.start(sink)
    try:
        for _ in range(200):
            if len(got) == 3:
                break
            await asyncio.sleep(0.02)
        assert got == [("one", None), ("two", None), ("three", ("cursor.whatsapp", 3))]
        assert saved == [0]  # not saved apart: it went with the row
        wa.inject_status(wa.world.updates[0][2]["id"])  # a receipt only: nothing to keep
        for _ in range(200):
            if saved[-1] == 4:
                break
            await asyncio.sleep(0.02)
    finally:
        await ch.stop()
    assert saved == [0, 4] and len(got) == 3


@pytest.mark.parametrize("fails", [1, 0], ids=["store-fails-once", "store-works"])
async def test_a_failed_store_is_retried_the_message_kept_once_and_read_only_then(
    wa, tmp_path, fails
):
    """The daemon's store is locked for a moment: the message is handed again (not skipped,
    not doubled) and marked read only once it is kept."""
    from tests.fakes.sink import Sink

    sink = Sink(fail_times=fails)
    ch = _channel(wa, tmp_path)
    await ch.start(sink)
    try:
        wamid = wa.inject_text("keep me")
        [msg] = await sink.wait(1)
        for _ in range(300):
            if wa.statuses:
                break
            await asyncio.sleep(0.02)
    finally:
        await ch.stop()
    assert msg.message_id == wamid and sink.calls == fails + 1 and len(sink.messages) == 1
    assert [b["message_id"] for _, b in wa.statuses] == [wamid]
