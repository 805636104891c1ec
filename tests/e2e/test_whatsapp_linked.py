"""End to end on a linked device: the fake neonize client (tests/fakes/neonize_client.py)
→ the real WhatsAppChannel built by the app's own registry row from a ``transport =
"linked_device"`` config → the daemon → the fake LLM → a reply through the fake client.
Only the client factory is swapped in (the seam the transport takes); everything else is
what ``chela run`` builds."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys

from bot.app.channels import SPECS, Given
from tests.e2e import eventually, make_config, running, telegram_section
from tests.e2e.harness import TG_TOKEN
from tests.e2e.harness import settled
from tests.fakes import neonize_client as nz
from tests.fakes.llm import text


def linked_channel(cfg, hub):
    spec = SPECS["whatsapp"]
    given = Given(cfg, spec.section_of(cfg), {}, cfg.media_dir)
    settings = dataclasses.replace(
        spec.make_settings(given), client_factory=hub.factory, send_jitter=0.0
    )
    return settings.open()


def section(**kw) -> dict:
    return {
        "whatsapp": {
            "enabled": True,
            "transport": "linked_device",
            "allow_from": [nz.OWNER],
            "poll_timeout": 1,
            **kw,
        }
    }


async def test_the_owners_message_is_answered_and_a_stranger_gets_a_pairing_reply(tmp_path, llm):
    cfg = make_config(tmp_path, llm, channels=section())
    hub = nz.FakeNeonize()
    ch = linked_channel(cfg, hub)
    llm.script(text("Hello **owner**, all _fine_."))
    async with running(cfg, channels={"whatsapp": ch}, scheduler=False) as d:
        await eventually(lambda: hub.clients and hub.client.connects, timeout=10)
        await hub.client.emit(nz.ConnectedEv(status=True))
        owner = nz.jid(nz.OWNER.lstrip("+"))
        await hub.client.emit(nz.message("hi there", sender=owner))
        await eventually(lambda: len(hub.client.sent) == 1, timeout=10)
        stranger = nz.jid("4915550000321")
        await hub.client.emit(nz.message("who are you?", sender=stranger))
        # the stranger gets a pairing code, the owner a notice of it (never a first message)
        await eventually(lambda: len(hub.client.sent) == 3, timeout=10)
        await settled(d)
    (to, reply, _), *rest = hub.client.sent
    assert (to.User, reply.conversation) == ("491700000099", "Hello *owner*, all _fine_.")
    assert "hi there" in llm.requests[0]["messages"][-2]["content"]
    assert len(llm.requests) == 1  # the stranger is not served: a pairing reply, no turn
    by = {j.User: m.conversation for j, m, _ in rest}
    assert set(by) == {"4915550000321", "491700000099"}
    code = by["491700000099"].split("Code: ")[1].split()[0]
    assert code in by["4915550000321"]
    assert hub.client.reads and hub.client.presence  # read receipt, typing while it ran
    # the session database the app placed in the state dir, private
    db = cfg.agent.state_dir / "whatsapp" / "default.session.db"
    assert oct(db.stat().st_mode & 0o777) == "0o600"


async def test_a_group_is_answered_only_when_allowlisted_and_addressed(tmp_path, llm):
    group = f"{nz.GROUP}@g.us"
    cfg = make_config(tmp_path, llm, channels=section(group_policy="allowlist", groups=[group]))
    hub = nz.FakeNeonize()
    ch = linked_channel(cfg, hub)
    llm.script(text("It is noon."))
    async with running(cfg, channels={"whatsapp": ch}, scheduler=False) as d:
        await eventually(lambda: hub.clients and hub.client.connects, timeout=10)
        await hub.client.emit(nz.ConnectedEv(status=True))
        member = nz.jid("4915550000400")
        other = nz.jid("120363000000000777", "g.us")
        await hub.client.emit(nz.message("ignored", sender=member, chat=other, group=True))
        content = nz.mention(f"@{nz.ME_PN} what time is it?", f"{nz.ME_PN}@s.whatsapp.net")
        g = nz.jid(nz.GROUP, "g.us")
        await hub.client.emit(nz.message(sender=member, chat=g, group=True, content=content))
        await eventually(lambda: len(hub.client.sent) == 1, timeout=10)
        await settled(d)
    [(to, reply, _)] = hub.client.sent
    assert (to.User, to.Server, reply.conversation) == (nz.GROUP, "g.us", "It is noon.")
    assert len(llm.requests) == 1


def telegram_channel(cfg):
    spec = SPECS["telegram"]
    given = Given(cfg, spec.section_of(cfg), {"token_env": TG_TOKEN}, cfg.media_dir)
    return spec.make_settings(given).open()


async def test_a_logged_out_device_stops_and_the_owner_is_told_on_another_channel(
    tmp_path, llm, tg
):
    cfg = make_config(tmp_path, llm, channels={**section(), **telegram_section(tg)})
    hub = nz.FakeNeonize()
    wa = linked_channel(cfg, hub)
    channels = {"whatsapp": wa, "telegram": telegram_channel(cfg)}
    async with running(cfg, channels=channels, scheduler=False) as d:
        await eventually(lambda: hub.clients and hub.client.connects, timeout=10)
        await hub.client.emit(nz.ConnectedEv(status=True))
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "connected")
        await hub.client.emit(nz.logged_out())
        [note] = await tg.wait_for_sent(1, timeout=10)
        states = d.channel_states()
        await settled(d)
    assert note.chat_id == 42
    assert "whatsapp" in note.text and "logged out" in note.text
    assert "chela whatsapp login" in note.text
    assert states["whatsapp"]["state"] == "failed" and "logged_out" in states["whatsapp"]["error"]
    assert len(hub.clients) == 1 and hub.client.connects == 1  # never reconnected
    assert not llm.requests  # a note, not a turn


async def test_a_dropped_connection_reconnects_and_tells_the_owner_nothing(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels={**section(), **telegram_section(tg)})
    hub = nz.FakeNeonize()
    wa = linked_channel(cfg, hub)
    channels = {"whatsapp": wa, "telegram": telegram_channel(cfg)}
    async with running(cfg, channels=channels, scheduler=False) as d:
        await eventually(lambda: hub.clients and hub.client.connects, timeout=10)
        await hub.client.emit(nz.ConnectedEv(status=True))
        await hub.client.emit(nz.DisconnectedEv(status=True))
        reconnecting = await eventually(
            lambda: d.channel_states()["whatsapp"]["state"] == "reconnecting"
        )
        await hub.client.emit(nz.ConnectedEv(status=True))  # neonize reconnects by itself
        await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "connected")
        await settled(d)
        await asyncio.sleep(0.3)  # a note would be on its way by now
        stops = hub.client.stops
    assert reconnecting and not tg.sent
    assert stops == 0  # the client was kept, not stopped


async def test_a_second_chela_on_the_same_session_waits_with_a_clear_state_then_connects(
    tmp_path, llm, caplog
):
    """Another process holds the session database (a second Chela, or `chela whatsapp
    login`): neonize is never opened on it, the channel's state names the holder and the
    daemon keeps running; once the other process is gone the channel starts and answers."""
    cfg = make_config(tmp_path, llm, channels=section())
    db = cfg.agent.state_dir / "whatsapp" / "default.session.db"
    db.parent.mkdir(parents=True, exist_ok=True)
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
            "time.sleep(60)\n",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    hub = nz.FakeNeonize()
    ch = linked_channel(cfg, hub)
    llm.script(text("back again"))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        async with running(cfg, channels={"whatsapp": ch}, scheduler=False) as d:
            await eventually(lambda: d.channel_states()["whatsapp"]["state"] == "retrying")
            error = d.channel_states()["whatsapp"]["error"]
            assert f"pid {holder.pid}" in error and "one process per session" in error
            assert hub.clients == []  # neonize never opened the database
            holder.kill()
            holder.wait()
            await eventually(lambda: hub.clients and hub.client.connects, timeout=15)
            await hub.client.emit(nz.ConnectedEv(status=True))
            await hub.client.emit(nz.message("still there?", sender=nz.jid(nz.OWNER[1:])))
            await eventually(lambda: len(hub.client.sent) == 1, timeout=10)
            await settled(d)
    finally:
        holder.kill()
        holder.wait()
    assert hub.client.sent[0][1].conversation == "back again"
    assert len(hub.clients) == 1
    assert "in use by another process" in caplog.text
