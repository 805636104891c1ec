"""A second account of Slack and of Discord is its own connection: each account's adapter
connects to its own server (its own fake here) with its own tokens, and answers there."""

from __future__ import annotations

from tests.e2e import make_config, running
from tests.e2e.harness import settled, slack_taken
from tests.fakes.llm import last_user_text, text
from tests.fakes.slack import FakeSlack

ALICE, DM = "UALICE", "DALICE"


def slack_account(sl: FakeSlack, monkeypatch, name: str) -> dict:
    monkeypatch.setenv(f"TEST_SLACK_BOT_{name}", sl.bot_token)
    monkeypatch.setenv(f"TEST_SLACK_APP_{name}", sl.app_token)
    return {
        "bot_token_env": f"TEST_SLACK_BOT_{name}",
        "app_token_env": f"TEST_SLACK_APP_{name}",
        "api_base": sl.api_base,
    }


async def test_a_second_slack_account_connects_to_its_own_workspace(tmp_path, llm, monkeypatch):
    async with (
        FakeSlack(bot_user_id="UHOME", bot_token="xoxb-home", app_token="xapp-home") as home,
        FakeSlack(bot_user_id="UWORK", bot_token="xoxb-work", app_token="xapp-work") as work,
    ):
        section = {"enabled": True, "allow_from": [ALICE], **slack_account(home, monkeypatch, "H")}
        section["accounts"] = {"work": slack_account(work, monkeypatch, "W")}
        cfg = make_config(tmp_path, llm, channels={"slack": section})
        llm.default = lambda req: text(
            "re: " + ("work" if "for work" in last_user_text(req) else "home")
        )
        async with running(cfg) as d:
            assert set(d.channels) == {"slack", "slack:work"}
            env = await work.push_event(
                work.message_event(DM, ALICE, "for work", channel_type="im")
            )
            await work.wait_for_ack(env)  # the work account's own socket took it
            posts = await work.wait_for_posts(1, timeout=15)
            assert home.posted == []  # not answered through the home workspace
            # twin: the home account answers its own workspace's message
            env = await home.push_event(
                home.message_event(DM, ALICE, "for home", channel_type="im")
            )
            await home.wait_for_ack(env)
            await home.wait_for_posts(1, timeout=15)
            await settled(d, slack_taken(work))
        assert [p["text"] for p in posts] == ["re: work"]
        assert [p["text"] for p in home.posted] == ["re: home"] and len(work.posted) == 1


async def test_a_second_discord_account_logs_in_with_its_own_token(tmp_path, llm, monkeypatch):
    from tests.fakes.discord import FakeDiscord

    home = FakeDiscord(bot_id=900000000000000001, bot_name="home", token="dc-home")
    work = FakeDiscord(bot_id=900000000000000002, bot_name="work", token="dc-work")
    await home.start()
    await work.start()
    try:
        monkeypatch.setenv("TEST_DC_HOME", "dc-home")
        monkeypatch.setenv("TEST_DC_WORK", "dc-work")
        section = {
            "enabled": True,
            "token_env": "TEST_DC_HOME",
            "api_base": home.api_base,
            "gateway_url": home.gateway_url,
            "allow_from": ["4242"],
            "accounts": {
                "work": {
                    "token_env": "TEST_DC_WORK",
                    "api_base": work.api_base,
                    "gateway_url": work.gateway_url,
                }
            },
        }
        cfg = make_config(tmp_path, llm, channels={"discord": section})
        llm.default = lambda req: text("re: " + last_user_text(req).split()[-1])
        async with running(cfg) as d:
            await work.wait_for_clients(1)  # the work account's own gateway connection
            await home.wait_for_clients(1)
            dm = work.add_dm_channel(4242, "alice")
            await work.inject_message(dm, "hello work", author_id=4242, username="alice")
            sent = await work.wait_for_sent(1, timeout=15)
            assert home.sent == []
            # twin: the home account answers what comes in on the home bot
            home_dm = home.add_dm_channel(4242, "alice")
            await home.inject_message(home_dm, "hello home", author_id=4242, username="alice")
            await home.wait_for_sent(1, timeout=15)
            await settled(d)
        assert [m["content"] for m in sent] == ["re: work"] and len(work.sent) == 1
        assert [m["content"] for m in home.sent] == ["re: home"]
    finally:
        await work.stop()
        await home.stop()
