"""End to end on a linked device: the fake neonize client (tests/fakes/neonize_client.py)
→ the real WhatsAppChannel built by the app's own registry row from a ``transport =
"linked_device"`` config → the daemon → the fake LLM → a reply through the fake client.
Only the client factory is swapped in (the seam the transport takes); everything else is
what ``chela run`` builds."""

from __future__ import annotations

import dataclasses

from bot.app.channels import SPECS, Given
from tests.e2e import eventually, make_config, running
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
