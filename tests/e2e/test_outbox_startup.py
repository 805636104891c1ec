"""Start-up (SPEC §4.5): messages waiting when the daemon starts (left unanswered by the last
run, or arriving while it starts) are answered once each, oldest first, on Signal and
Discord; and the HTTP API's replies stay the response to their request.
"""

from __future__ import annotations


import pytest

from bot.store import Store
from channels.base import InboundMessage
from tests.e2e import eventually, make_config, running
from tests.e2e.harness import settled, signal_taken
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import last_user_text, text
from tests.fakes.signal import FakeSignalCli

BOT = "+15550000000"
ALICE = "+15550001111"
DC_TOKEN = "discord-test-token"
DC_BOT = 900000000000000001
DC_ALICE = 4242


def echo(request: dict):
    return text("re " + last_user_text(request).strip().splitlines()[-1][-12:])


def left_over(cfg, channel: str, chat_id: str, sender: str, body: str, mid: str) -> None:
    """A message the last run stored and never answered (main session, dm_scope "main")."""
    msg = InboundMessage(
        channel=channel, chat_id=chat_id, sender_id=sender, text=body, message_id=mid
    )
    s = Store(cfg.db_path)
    s.add_inbound(channel, "default", chat_id, mid, "agent:main:main", msg.to_json())
    s.close()


@pytest.fixture
async def sig():
    f = FakeSignalCli(account=BOT, keepalive=0.3)
    await f.start()
    yield f
    await f.stop()


async def test_signal_messages_waiting_at_start_up_are_answered_once_in_order(tmp_path, llm, sig):
    llm.default = echo
    section = {"enabled": True, "account": BOT, "http_url": sig.url, "allow_from": [ALICE]}
    cfg = make_config(tmp_path, llm, channels={"signal": section})
    left_over(cfg, "signal", ALICE, ALICE, "message zero", "1")
    # queued at signal-cli while nothing listens: delivered the moment the channel connects,
    # before the daemon has recovered the stored one
    sig.inject_message(ALICE, "message one")
    sig.inject_message(ALICE, "message two")
    async with running(cfg) as d:
        await sig.wait_for_sent(3, timeout=30)
        await settled(d, signal_taken(d, sig))
    assert [s["message"] for s in sig.sent] == [
        "re message zero",
        "re message one",
        "re message two",
    ]
    assert len(llm.requests) == 3


@pytest.fixture
async def dc():
    f = FakeDiscord(bot_id=DC_BOT, bot_name="chela", token=DC_TOKEN)
    await f.start()
    yield f
    await f.stop()


async def test_discord_messages_waiting_at_start_up_are_answered_once_in_order(
    tmp_path, llm, dc, monkeypatch
):
    llm.default = echo
    monkeypatch.setenv("TEST_DC_TOKEN", DC_TOKEN)
    section = {
        "enabled": True,
        "token_env": "TEST_DC_TOKEN",
        "api_base": dc.api_base,
        "gateway_url": dc.gateway_url,
        "allow_from": [str(DC_ALICE)],
    }
    cfg = make_config(tmp_path, llm, channels={"discord": section})
    dm = dc.add_dm_channel(DC_ALICE, "alice")
    left_over(cfg, "discord", f"user:{DC_ALICE}", str(DC_ALICE), "message zero", "1")
    async with running(cfg) as d:
        await dc.wait_for_clients(1, timeout=30)
        await dc.inject_message(dm, "message one", author_id=DC_ALICE, username="alice")
        await dc.wait_for_sent(2, timeout=30)
        # Discord's gateway has no acknowledgement to wait for: both messages are stored
        # (the waiting one and message one, answered), so the daemon idle means done
        await eventually(lambda: len(d.store.inbound_with_status("done")) == 2)
        await settled(d)
    assert [m["content"] for m in dc.sent] == ["re message zero", "re message one"]
    assert all(m["body"].get("nonce") and m["body"].get("enforce_nonce") for m in dc.sent)
    assert len({m["body"]["nonce"] for m in dc.sent}) == 2
    assert len(llm.requests) == 2
