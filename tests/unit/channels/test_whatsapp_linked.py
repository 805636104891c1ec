"""The linked-device transport's guards (channels/whatsapp/transport/linked_device.py), each
with its twin, driven through the real ``WhatsAppChannel`` with neonize's own event objects
from the fake client (tests/fakes/neonize_client.py) and the daemon's side played by
tests/fakes/sink.py."""

from __future__ import annotations

import asyncio
import functools
import logging
import subprocess
import sys

import pytest

from channels.base import ChannelError, OutboundMessage
from channels.retry import Backoff
from channels.whatsapp.adapter import WhatsAppChannel
from bot.app.lock import StateLock
from channels.whatsapp.linked.guards import Breaker, Memory
from channels.whatsapp.linked.session import lock_name
from channels.whatsapp.linked.inbound import LinkedInbound
from channels.whatsapp.polling import Cursor
from channels.whatsapp.transport import ApiError
from channels.whatsapp.transport.linked_device import LinkedDevice
from tests.fakes import neonize_client as nz
from tests.fakes.sink import Sink

STRANGER = nz.jid("4915550000001")


def build(tmp_path, hub, **kw) -> WhatsAppChannel:
    """The channel as WhatsAppSettings builds it for a linked device: the app's lock
    (bot/app/lock.py) beside the session, who-wrote kept in ``hub.kept`` (the store's kv)."""
    kw = {"owners": (nz.OWNER,), "group_policy": "allowlist", "jitter": 0.0} | kw
    kw.setdefault("groups", (f"{nz.GROUP}@g.us",))
    db = tmp_path / "whatsapp" / "default.session.db"
    memory = Memory(lambda: hub.kept.get("memory"), lambda v: hub.kept.update(memory=v))
    transport = LinkedDevice(
        db,
        lock=StateLock(db.parent, lock_name(db)),
        memory=memory,
        client_factory=hub.factory,
        **kw,
    )
    return WhatsAppChannel(
        transport=transport,
        cursor=Cursor(lambda: None, lambda _: None),
        poll_timeout=1,
        inbound=functools.partial(LinkedInbound, transport),
    )


async def until(pred, timeout: float = 3.0) -> None:
    end = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


@pytest.fixture
def hub():
    return nz.FakeNeonize()


@pytest.fixture
async def up(tmp_path, hub):
    """A started channel whose client has connected; (channel, sink)."""
    ch = build(tmp_path, hub)
    sink = Sink()
    await ch.start(sink)
    await hub.client.emit(nz.ConnectedEv(status=True))
    await until(lambda: ch.state == "connected")
    yield ch, sink
    await ch.stop()


# ------------------------------------------------------------------ own echo
async def test_own_messages_and_echoes_are_dropped_another_persons_is_served(up, hub):
    ch, sink = up
    client = hub.client
    await client.emit(nz.message("hi bot", sender=STRANGER))
    await sink.wait(1)
    [sent_id] = await ch.send(OutboundMessage(chat_id="+4915550000001", text="hello"))
    # the echo of what we sent, and something typed on the phone into that chat: both ours
    echo = nz.message("hello", sender=nz.jid(nz.ME_PN), chat=STRANGER, from_me=True, msg_id=sent_id)
    await client.emit(echo)
    await client.emit(
        nz.message("typed on the phone", sender=nz.jid(nz.ME_PN), chat=STRANGER, from_me=True)
    )
    await client.emit(nz.message("second", sender=STRANGER))
    got = await sink.wait(2)
    assert [m.text for m in got] == ["hi bot", "second"]
    assert got[0].sender_id == got[0].chat_id == "+4915550000001"


async def test_the_owners_message_yourself_chat_is_input_but_our_reply_there_is_not(up, hub):
    ch, sink = up
    me = nz.jid(nz.ME_PN)
    await hub.client.emit(nz.message("note to self", sender=me, chat=me, from_me=True))
    [msg] = await sink.wait(1)
    assert msg.chat_id == msg.sender_id == f"+{nz.ME_PN}"
    [reply] = await ch.send(OutboundMessage(chat_id=msg.chat_id, text="noted"))
    await hub.client.emit(nz.message("noted", sender=me, chat=me, from_me=True, msg_id=reply))
    await hub.client.emit(nz.message("another note", sender=me, chat=me, from_me=True))
    assert [m.text for m in await sink.wait(2)] == ["note to self", "another note"]


async def test_a_contacts_status_update_is_not_a_message_to_answer(up, hub):
    _, sink = up
    status = nz.jid("status", "broadcast")
    await hub.client.emit(nz.message("my holiday photos", sender=STRANGER, chat=status))
    await hub.client.emit(nz.message("a real question", sender=STRANGER))
    assert [m.text for m in await sink.wait(1)] == ["a real question"]


async def test_messages_with_nothing_to_answer_are_logged_and_skipped_the_next_is_served(
    up, hub, caplog
):
    """Bad input on a linked device: a reaction, a poll, a protocol message (an edit or a
    revoke) and an empty message carry nothing to answer: each is skipped with a log line
    naming what it was, nothing stops, and the next message is served."""
    from neonize.proto.waE2E import WAWebProtobufsE2E_pb2 as e2e

    _, sink = up
    caplog.set_level(logging.DEBUG, logger="chela.channels.whatsapp")
    odd = [
        e2e.Message(reactionMessage=e2e.ReactionMessage(text="x")),
        e2e.Message(pollCreationMessage=e2e.PollCreationMessage(name="lunch?")),
        e2e.Message(protocolMessage=e2e.ProtocolMessage(type=e2e.ProtocolMessage.REVOKE)),
        e2e.Message(),
    ]
    for content in odd:
        await hub.client.emit(nz.message(sender=STRANGER, content=content))
    await hub.client.emit(nz.message("a real question", sender=STRANGER))
    assert [m.text for m in await sink.wait(1)] == ["a real question"]
    skipped = [r.getMessage() for r in caplog.records if "nothing to answer" in r.getMessage()]
    assert len(skipped) == 4
    assert "reactionMessage" in skipped[0] and "pollCreationMessage" in skipped[1]
    assert "protocolMessage" in skipped[2] and "empty" in skipped[3]


async def test_the_same_message_delivered_twice_is_taken_once(up, hub):
    """WhatsApp delivers a message again after a reconnect: taken (and marked read) once."""
    _, sink = up
    ev = nz.message("only once", sender=STRANGER, msg_id="3A0000000000000000DUP")
    await hub.client.emit(ev)
    await hub.client.emit(ev)
    await hub.client.emit(nz.message("next", sender=STRANGER))
    assert [m.text for m in await sink.wait(2)] == ["only once", "next"]
    await until(lambda: len(hub.client.reads) == 2)
    assert [i for i, _ in hub.client.reads] == [
        "3A0000000000000000DUP",
        sink.messages[1].message_id,
    ]


@pytest.mark.parametrize("fails", [1, 0], ids=["store-fails-once", "store-works"])
async def test_a_failed_store_is_retried_the_message_kept_once_and_read_only_then(
    tmp_path, hub, fails
):
    ch, sink = build(tmp_path, hub), Sink(fail_times=fails)
    await ch.start(sink)
    try:
        await hub.client.emit(nz.message("keep me", sender=STRANGER, msg_id="3A00000000000000KEEP"))
        await sink.wait(1)
        await until(lambda: hub.client.reads)
    finally:
        await ch.stop()
    assert sink.calls == fails + 1 and [m.text for m in sink.messages] == ["keep me"]
    assert [i for i, _ in hub.client.reads] == ["3A00000000000000KEEP"]


async def test_a_message_delivered_twice_at_once_is_taken_once(up, hub):
    """neonize runs each event's handler as its own task: two deliveries of one message can
    overlap (here while the sender's LID is looked up); it is still taken once."""
    _, sink = up
    hub.lid_to_pn["770000000071"] = "4915550000071"
    ev = nz.message("once", sender=nz.jid("770000000071", "lid"), msg_id="3A00000000000000TWIN")
    await asyncio.gather(hub.client.emit(ev), hub.client.emit(ev))
    await hub.client.emit(nz.message("next", sender=STRANGER))
    assert [m.text for m in await sink.wait(2)] == ["once", "next"]


async def test_messages_arriving_together_keep_their_order(up, hub):
    """The first waits on a LID lookup while neonize already runs the second's handler: the
    second still comes after it."""
    _, sink = up
    hub.lid_to_pn["770000000072"] = "4915550000072"
    first = nz.message("first", sender=nz.jid("770000000072", "lid"), msg_id="3A0000000000000ORD1")
    second = nz.message("second", sender=STRANGER, msg_id="3A0000000000000ORD2")
    await asyncio.gather(hub.client.emit(first), hub.client.emit(second))
    assert [m.text for m in await sink.wait(2)] == ["first", "second"]


# ------------------------------------------------------------------ LID ↔ phone number
async def test_a_sender_seen_by_lid_and_by_number_is_one_person(up, hub):
    _, sink = up
    lid = nz.jid("770000000042", "lid")
    pn = nz.jid("4915550000042")
    await hub.client.emit(nz.message("by number", sender=pn, alt=lid))
    await hub.client.emit(nz.message("by lid", sender=lid))  # no alt: learned before
    hub.lid_to_pn["770000000043"] = "4915550000043"  # neonize's own LID store knows this one
    await hub.client.emit(nz.message("lid known to neonize", sender=nz.jid("770000000043", "lid")))
    got = await sink.wait(3)
    assert [m.sender_id for m in got] == ["+4915550000042", "+4915550000042", "+4915550000043"]
    assert got[1].chat_id == "+4915550000042"  # a reply to the LID message goes to the number


async def test_two_lids_without_a_known_number_stay_two_people(up, hub):
    _, sink = up
    await hub.client.emit(nz.message("a", sender=nz.jid("770000000051", "lid")))
    await hub.client.emit(nz.message("b", sender=nz.jid("770000000052", "lid")))
    got = await sink.wait(2)
    assert [m.sender_id for m in got] == ["770000000051@lid", "770000000052@lid"]


async def test_the_lid_mapping_survives_a_restart(tmp_path, hub):
    lid, pn = nz.jid("770000000061", "lid"), nz.jid("4915550000061")
    for text, ev in (("first", nz.message("first", sender=pn, alt=lid)), ("later", None)):
        ch, sink = build(tmp_path, hub), Sink()
        await ch.start(sink)
        await hub.client.emit(ev or nz.message(text, sender=lid))
        [msg] = await sink.wait(1)
        assert msg.sender_id == "+4915550000061"
        await ch.stop()


# ------------------------------------------------------------------ groups
async def test_a_group_outside_the_allowlist_is_dropped_with_one_log_line(up, hub, caplog):
    _, sink = up
    caplog.set_level(logging.INFO, logger="chela.channels.whatsapp")
    other = nz.jid("120363000000000999", "g.us")
    for i in range(3):
        await hub.client.emit(nz.message(f"chatter {i}", sender=STRANGER, chat=other, group=True))
    await hub.client.emit(nz.message("direct", sender=STRANGER))
    assert [m.text for m in await sink.wait(1)] == ["direct"]
    lines = [r.getMessage() for r in caplog.records if "120363000000000999@g.us" in r.getMessage()]
    assert len(lines) == 1 and "dropped" in lines[0]


async def test_an_allowlisted_group_is_served_and_a_mention_of_our_lid_counts(up, hub):
    _, sink = up
    group = nz.jid(nz.GROUP, "g.us")
    content = nz.mention(f"@{nz.ME_LID} what time is it?", f"{nz.ME_LID}@lid")
    await hub.client.emit(nz.message(sender=STRANGER, chat=group, group=True, content=content))
    [msg] = await sink.wait(1)
    assert (msg.chat_type, msg.chat_id, msg.sender_id) == (
        "group",
        f"{nz.GROUP}@g.us",
        "+4915550000001",
    )
    assert msg.mentioned


@pytest.mark.parametrize(
    "ours",
    [f"{nz.ME_PN}@s.whatsapp.net", f"{nz.ME_PN}:7@s.whatsapp.net", f"{nz.ME_LID}@lid"],
    ids=["number", "number-device", "lid"],
)
async def test_a_group_mention_of_our_number_or_lid_counts_another_persons_does_not(up, hub, ours):
    _, sink = up
    group = nz.jid(nz.GROUP, "g.us")
    for who in (ours, "4915550000888@s.whatsapp.net", "770000000888@lid"):
        content = nz.mention(f"@{who.partition('@')[0]} hi", who)
        await hub.client.emit(nz.message(sender=STRANGER, chat=group, group=True, content=content))
    assert [m.mentioned for m in await sink.wait(3)] == [True, False, False]


@pytest.mark.parametrize(
    "ours", [f"{nz.ME_PN}@s.whatsapp.net", f"{nz.ME_LID}@lid"], ids=["number", "lid"]
)
async def test_a_reply_to_our_message_counts_a_reply_to_another_persons_does_not(up, hub, ours):
    ch, sink = up
    group = nz.jid(nz.GROUP, "g.us")
    await hub.client.emit(nz.message("question", sender=STRANGER, chat=group, group=True))
    [asked] = await sink.wait(1)
    [ours_id] = await ch.send(OutboundMessage(chat_id=asked.chat_id, text="an answer"))
    member = "4915550000888@s.whatsapp.net"
    for quoted, author in ((ours_id, ours), (asked.message_id, member)):
        content = nz.reply("and then?", quoted, author)
        await hub.client.emit(nz.message(sender=STRANGER, chat=group, group=True, content=content))
    _, to_us, to_member = await sink.wait(3)
    assert (to_us.reply_to_id, to_us.reply_to_bot) == (ours_id, True)
    assert (to_member.reply_to_id, to_member.reply_to_bot) == (asked.message_id, False)


async def test_when_our_own_ids_cannot_be_read_it_is_logged_and_the_next_connect_learns_them(
    tmp_path, hub, caplog
):
    """Without our own number and LID a mention of us would not count: that is said, not
    silent, and the next connect reads them again (twin: then the mention counts)."""
    caplog.set_level(logging.WARNING, logger="chela.channels.whatsapp")
    ch, sink = build(tmp_path, hub), Sink()
    hub.me_error = RuntimeError("store not ready")
    await ch.start(sink)
    try:
        await hub.client.emit(nz.ConnectedEv(status=True))
        await until(lambda: ch.state == "connected")
        assert any("own number" in r.getMessage() for r in caplog.records)
        hub.me_error = None
        await hub.client.emit(nz.DisconnectedEv(status=True))
        await hub.client.emit(nz.ConnectedEv(status=True))
        await until(lambda: ch.state == "connected")
        group = nz.jid(nz.GROUP, "g.us")
        content = nz.mention("@bot hi", f"{nz.ME_PN}@s.whatsapp.net")
        await hub.client.emit(nz.message(sender=STRANGER, chat=group, group=True, content=content))
        [msg] = await sink.wait(1)
        assert msg.mentioned
    finally:
        await ch.stop()


# ------------------------------------------------------------------ logged out / reconnect
@pytest.mark.parametrize(
    ("event", "state"),
    [
        (nz.logged_out(), "logged_out"),
        (nz.StreamReplacedEv(), "logged_out"),
        (nz.temporary_ban(), "banned"),
        (nz.ClientOutdatedEv(), "outdated"),
    ],
    ids=["logged_out", "440", "banned", "outdated"],
)
async def test_logged_out_or_replaced_stops_the_account_with_a_state_and_a_notice(
    up, hub, caplog, event, state
):
    ch, _ = up
    caplog.set_level(logging.ERROR, logger="chela.channels.whatsapp")
    await hub.client.emit(event)
    await until(lambda: ch.own_state().startswith(state))
    assert any("chela whatsapp login" in r.getMessage() for r in caplog.records)
    assert hub.client.stops >= 1
    with pytest.raises(TimeoutError):  # stays down: the daemon does not restart it in a loop
        await asyncio.wait_for(ch.wait_closed(), 0.5)
    assert hub.client.connects == 1 and len(hub.clients) == 1
    with pytest.raises(ApiError):
        await ch.send(OutboundMessage(chat_id=nz.OWNER, text="anyone?"))


async def test_a_dropped_connection_reconnects_and_messages_flow_again(up, hub):
    ch, sink = up
    await hub.client.emit(nz.DisconnectedEv(status=True))
    await until(lambda: ch.own_state().startswith("reconnecting"))
    assert hub.client.stops == 0  # neonize reconnects by itself
    await hub.client.emit(nz.ConnectedEv(status=True))
    await until(lambda: ch.state == "connected")
    await hub.client.emit(nz.message("back", sender=STRANGER))
    assert [m.text for m in await sink.wait(1)] == ["back"]


async def test_a_failed_connection_is_retried_with_backoff_then_the_breaker_pauses(tmp_path, hub):
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    ch = build(
        tmp_path,
        hub,
        backoff=Backoff(2.0, 60.0),
        breaker=Breaker(3, 600.0),
        cool_off=900.0,
        sleep=sleep,
    )
    await ch.start(Sink())
    try:
        for n in range(1, 4):
            await until(lambda n=n: hub.client.connects == n)
            hub.client.drop("connection refused")
        await until(lambda: hub.client.connects == 4)
        assert waits == [2.0, 4.0, 900.0]  # backoff, then the circuit opens: a long pause
        await until(lambda: ch.own_state().startswith("reconnecting"))
        # drops of a live connection trip it too: the client is stopped, not left looping
        for _ in range(3):
            await hub.client.emit(nz.DisconnectedEv(status=True))
        assert hub.client.stops == 1
        await until(lambda: hub.client.connects == 5)
        assert waits[-1] == 900.0
    finally:
        await ch.stop()


# ------------------------------------------------------------------ one process per session
async def test_a_second_process_on_the_same_session_is_refused_then_the_first_works(tmp_path, hub):
    db = tmp_path / "whatsapp" / "default.session.db"
    db.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from bot.app.lock import StateLock\n"
            "db = Path(sys.argv[1])\n"
            "StateLock(db.parent, db.name + '.lock').acquire()\n"
            "print('held', flush=True)\n"
            "time.sleep(30)\n",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        ch = build(tmp_path, hub)
        with pytest.raises(ChannelError) as err:
            await ch.start(Sink())
        assert f"pid {holder.pid}" in str(err.value) and "one process per session" in str(err.value)
        assert hub.clients == []  # neonize never opened the database
    finally:
        holder.kill()
        holder.wait()
    ch = build(tmp_path, hub)
    await ch.start(Sink())
    try:
        await until(lambda: hub.client.connects == 1)
    finally:
        await ch.stop()


async def test_the_session_database_is_private(up, tmp_path):
    db = tmp_path / "whatsapp" / "default.session.db"
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    assert oct(db.parent.stat().st_mode & 0o777) == "0o700"


# ------------------------------------------------------------------ never the first message
async def test_no_first_message_to_a_stranger_but_a_reply_to_a_sender_and_the_owner_go(up, hub):
    ch, sink = up
    with pytest.raises(ApiError) as err:
        await ch.send(OutboundMessage(chat_id="+4915550000777", text="hi, remember me?"))
    assert err.value.permanent and hub.client.sent == []
    await hub.client.emit(nz.message("hello?", sender=nz.jid("4915550000777")))
    await sink.wait(1)
    await ch.send(OutboundMessage(chat_id="+4915550000777", text="**hi** back"))
    await ch.send(OutboundMessage(chat_id=nz.OWNER, text="a heartbeat for the owner"))
    to = [(j.User, j.Server) for j, _, _ in hub.client.sent]
    assert to == [("4915550000777", "s.whatsapp.net"), ("491700000099", "s.whatsapp.net")]
    assert hub.client.sent[0][1].conversation == "*hi* back"


# ------------------------------------------------------------------ pacing
async def test_sends_are_paced(tmp_path, hub):
    ch = build(tmp_path, hub, per_window=2, window=0.6)
    await ch.start(Sink())
    try:
        for i in range(3):
            await ch.send(OutboundMessage(chat_id=nz.OWNER, text=f"n{i}"))
        times = [t for _, _, t in hub.client.sent]
        assert times[2] - times[0] >= 0.55  # the third waited for the window
        assert times[1] - times[0] < 0.3  # within the budget nothing waits
    finally:
        await ch.stop()


@pytest.mark.parametrize("jitter", [0.5, 0.0])
async def test_each_send_waits_a_random_jitter_within_the_setting(tmp_path, hub, jitter):
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    ch = build(tmp_path, hub, jitter=jitter, sleep=sleep)
    await ch.start(Sink())
    try:
        for i in range(5):
            await ch.send(OutboundMessage(chat_id=nz.OWNER, text=f"n{i}"))
    finally:
        await ch.stop()
    assert len(hub.client.sent) == 5
    if jitter:
        assert len(waits) == 5 and all(0 <= w <= jitter for w in waits)
        assert len(set(waits)) > 1  # random, not one fixed delay
    else:
        assert waits == []


# ------------------------------------------------------------------ receipts, quotes, files, QR
async def test_read_receipt_typing_quote_and_an_image_in_and_out(up, hub, tmp_path):
    ch, sink = up
    content = hub.image(b"\xff\xd8 tiny jpeg", caption="what is this?")
    await hub.client.emit(nz.message(sender=STRANGER, content=content))
    [msg] = await sink.wait(1)
    assert msg.text == "what is this?" and msg.attachments[0].kind == "image"
    await until(lambda: hub.client.reads)
    assert hub.client.reads[0][0] == msg.message_id
    await ch.typing(msg.chat_id)
    assert hub.client.presence and hub.client.presence[0].User == "4915550000001"
    item = await ch.fetch_media(msg.attachments[0], tmp_path, 1000)
    assert open(item.target, "rb").read() == b"\xff\xd8 tiny jpeg"
    png = tmp_path / "out.png"
    png.write_bytes(b"\x89PNG fake")
    from channels.base import MediaItem

    out = OutboundMessage(
        chat_id=msg.chat_id,
        text="a cat",
        reply_to_id=msg.message_id,
        reply_mode="first",
        media=[MediaItem(kind="image", target=str(png), mime="image/png")],
    )
    await ch.send(out)
    (_, text, _), (_, image, _) = hub.client.sent
    assert text.extendedTextMessage.contextInfo.stanzaID == msg.message_id
    assert image.imageMessage.fileLength == len(b"\x89PNG fake")
    assert hub.client.uploads[0][0] == b"\x89PNG fake"


async def test_an_oversized_inbound_file_is_refused_before_download(up, hub, tmp_path):
    from channels.base import MediaTooLarge

    ch, sink = up
    await hub.client.emit(nz.message(sender=STRANGER, content=hub.image(b"x" * 5000)))
    [msg] = await sink.wait(1)
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(msg.attachments[0], tmp_path, 100)
    assert list(tmp_path.glob("whatsapp-*")) == []


async def test_a_file_that_understates_its_size_is_cut_off_at_the_cap(up, hub, tmp_path):
    """The sender declares 10 bytes and sends 5000: the cap still holds, nothing is left on
    disk, and the refusal is the same one as for an honest oversized file (twin: a file
    within the cap, declared honestly, is fetched whole)."""
    from channels.base import MediaTooLarge

    ch, sink = up
    liar = hub.image(b"y" * 5000)
    liar.imageMessage.fileLength = 10
    await hub.client.emit(nz.message(sender=STRANGER, content=liar))
    await hub.client.emit(nz.message(sender=STRANGER, content=hub.image(b"z" * 50)))
    lying, honest = await sink.wait(2)
    with pytest.raises(MediaTooLarge):
        await ch.fetch_media(lying.attachments[0], tmp_path, 100)
    assert list(tmp_path.glob("whatsapp-*")) == []
    item = await ch.fetch_media(honest.attachments[0], tmp_path, 100)
    assert item.size == 50 and open(item.target, "rb").read() == b"z" * 50


async def test_the_qr_code_is_shown_while_pairing_and_gone_once_paired(tmp_path, hub, caplog):
    caplog.set_level(logging.DEBUG)
    ch = build(tmp_path, hub)
    await ch.start(Sink())
    try:
        await hub.client.show_qr("2@first,code")
        await until(lambda: ch.own_state().startswith("pairing"))
        assert ch.pairing_qr() == "2@first,code"
        await hub.client.show_qr("2@second,code")  # WhatsApp rotates it
        assert ch.pairing_qr() == "2@second,code"
        # the payload links a phone to this session: shown to the owner, never logged
        assert ",code" not in ch.own_state() and ",code" not in caplog.text
        await hub.client.emit(nz.paired())
        await hub.client.emit(nz.ConnectedEv(status=True))
        await until(lambda: ch.state == "connected")
        assert ch.pairing_qr() is None
        assert ch.bot_identity == {"id": f"{nz.ME_PN}@s.whatsapp.net"}
    finally:
        await ch.stop()


async def test_stop_ends_the_inbound_loop_even_when_an_event_arrives_with_it(tmp_path, hub):
    """A state queued in the very tick the channel is stopped must not swallow the stop."""
    for _ in range(20):
        ch = build(tmp_path, hub)
        await ch.start(Sink())
        await asyncio.sleep(0.01)  # the inbound loop waits on the queue
        ch.transport.queue.put_nowait("connected")
        await asyncio.wait_for(ch.stop(), 5)
