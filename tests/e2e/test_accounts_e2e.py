"""Several accounts of one channel, end to end: two Telegram bots on one fake Bot API server
(each token its own updates and sent messages) → the daemon → the fake LLM.

Invariant 3: a reply (text, media, typing, a pairing code and the owner's notice, an exec
approval request) leaves through the account its message came in on.  Invariant 4: owners
and paired senders are per account.  Each refusal has its twin on the other account."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3

import pytest

from bot.cli import main as cli_main
from tests.e2e import eventually, make_config, running, telegram_section
from tests.e2e.harness import settled
from tests.fakes.llm import last_user_text, streamed, text, tool_calls
from tests.fakes.media_samples import image_bytes

OWNER, WORK_OWNER, STRANGER = 42, 99, 77
WORK_TOKEN = "777001:TEST-work-token"
WORK_ENV = "TEST_TG_WORK_TOKEN"


def with_work(tg, tmp_path, llm, *, work: dict | None = None, home: dict | None = None, **sections):
    """The config of two Telegram accounts (``default`` and ``work``), and the work bot."""
    bot = tg.add_bot(WORK_TOKEN, "work_bot")
    os.environ[WORK_ENV] = WORK_TOKEN
    channels = telegram_section(tg, **(home or {}))
    channels["telegram"]["accounts"] = {"work": {"token_env": WORK_ENV, **(work or {})}}
    return make_config(tmp_path, llm, channels=channels, **sections), bot


def toml_file(path, cfg) -> str:
    """``cfg``'s agent and Telegram tables (with the work account) as a config file."""
    t = cfg.channels.telegram
    work = t.accounts["work"]
    lines = [
        "[agent]",
        f"workspace = {json.dumps(str(cfg.agent.workspace))}",
        f"state_dir = {json.dumps(str(cfg.agent.state_dir))}",
        "[channels.telegram]",
        "enabled = true",
        f"token_env = {json.dumps(t.token_env)}",
        f"allow_from = {json.dumps(t.allow_from)}",
        "[channels.telegram.accounts.work]",
        f"token_env = {json.dumps(work.token_env)}",
        f"allow_from = {json.dumps(work.allow_from)}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def texts(bot, chat: int) -> list[str]:
    return [m.visible_text for m in bot.sent if m.chat_id == chat]


def taken(*bots):
    """Every update of every bot confirmed (for ``settled``)."""
    return lambda: all(not b.pending_updates for b in bots)


def echo(request: dict) -> str:
    """The fake model's answer names the words it answers (``re: <words>``)."""
    words = re.findall(r"\b(?:home|work|msg)-[\w-]+", last_user_text(request))
    return "re: " + (words[-1] if words else "?")


async def test_replies_and_typing_leave_through_the_account_they_came_in_on(tmp_path, llm, tg):
    cfg, work = with_work(tg, tmp_path, llm)
    llm.default = echo
    async with running(cfg) as d:
        assert set(d.channels) == {"telegram", "telegram:work"}
        work.inject_message(OWNER, "work-one", from_id=OWNER)
        await work.wait_for(lambda: texts(work, OWNER), timeout=15)
        assert texts(tg, OWNER) == []  # nothing left through the other bot
        assert [a[0] for a in work.chat_actions] and not tg.chat_actions
        # twin: the same owner on the default bot is answered by the default bot
        tg.inject_message(OWNER, "home-one", from_id=OWNER)
        await tg.wait_for(lambda: texts(tg, OWNER), timeout=15)
        await settled(d, taken(tg, work))
    assert texts(work, OWNER) == ["re: work-one"]
    assert texts(tg, OWNER) == ["re: home-one"]


async def test_media_leaves_through_the_account_of_the_message(tmp_path, llm, tg):
    cfg, work = with_work(tg, tmp_path, llm)
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "chart.png").write_bytes(image_bytes(8, 8))
    async with running(cfg) as d:
        llm.script(text("here it is [IMAGE:chart.png]"))
        work.inject_message(OWNER, "the chart please", from_id=OWNER)
        await work.wait_for(lambda: work.calls_of("sendPhoto"), timeout=15)
        llm.script(text("and here [IMAGE:chart.png]"))  # twin: the default bot's owner
        tg.inject_message(OWNER, "the chart please", from_id=OWNER)
        await tg.wait_for(lambda: tg.calls_of("sendPhoto"), timeout=15)
        await settled(d, taken(tg, work))
    assert len(work.calls_of("sendPhoto")) == 1 and len(tg.calls_of("sendPhoto")) == 1


async def test_a_stranger_on_one_account_is_answered_and_its_owner_told_there(tmp_path, llm, tg):
    cfg, work = with_work(tg, tmp_path, llm, work={"allow_from": [str(WORK_OWNER)]})
    async with running(cfg) as d:
        work.inject_message(STRANGER, "hello work bot", from_id=STRANGER, first_name="Eve")
        notice = await work.wait_for(lambda: texts(work, WORK_OWNER), timeout=15)
        await settled(d, taken(tg, work))
        code = notice[0].split("Code: ")[1][:8]
        assert "telegram:work" in notice[0]
        told = texts(work, STRANGER)[0]
        assert code in told and f"chela pairing approve telegram:work {code}" in told
        assert tg.sent == []  # neither the code nor the notice left through the default bot
        assert [r["channel"] for r in d.store.pairing_requests()] == ["telegram:work"]
        # twin: the same stranger on the default account: its own code, its owner told there
        tg.inject_message(STRANGER, "hello home bot", from_id=STRANGER, first_name="Eve")
        home = await tg.wait_for(lambda: texts(tg, OWNER), timeout=15)
        assert "Pairing request on telegram " in home[0] and code not in home[0]
    assert llm.requests == []


async def test_the_owner_of_one_account_is_a_stranger_on_the_other(tmp_path, llm, tg):
    """Invariant 4: allow_from is per account; the twin is the owner on their own account."""
    cfg, work = with_work(tg, tmp_path, llm, work={"allow_from": [str(WORK_OWNER)]})
    llm.default = echo
    async with running(cfg) as d:
        work.inject_message(OWNER, "work-hi", from_id=OWNER)  # 42 owns only the default bot
        told = await work.wait_for(lambda: texts(work, OWNER), timeout=15)
        assert "Pairing code:" in told[0]
        tg.inject_message(OWNER, "home-hi", from_id=OWNER)  # twin: served on their own bot
        await tg.wait_for(lambda: texts(tg, OWNER), timeout=15)
        work.inject_message(WORK_OWNER, "work-boss", from_id=WORK_OWNER)  # work's own owner
        await work.wait_for(lambda: texts(work, WORK_OWNER), timeout=15)
        await settled(d, taken(tg, work))
    assert texts(tg, OWNER) == ["re: home-hi"]
    notice, answer = texts(work, WORK_OWNER)  # work's owner is told of 42's request there
    assert notice.startswith("Pairing request on telegram:work") and answer == "re: work-boss"
    assert all("re:" not in t for t in texts(work, OWNER))
    assert "work-hi" not in str(llm.requests)


async def test_a_code_approved_on_one_account_admits_only_there(tmp_path, llm, tg, capsys):
    cfg, work = with_work(tg, tmp_path, llm, work={"allow_from": [str(WORK_OWNER)]})
    path = toml_file(tmp_path / "config.toml", cfg)
    llm.default = echo
    async with running(cfg) as d:
        work.inject_message(STRANGER, "work-first", from_id=STRANGER)
        tg.inject_message(STRANGER, "home-first", from_id=STRANGER)
        await work.wait_for(lambda: texts(work, STRANGER), timeout=15)
        await tg.wait_for(lambda: texts(tg, STRANGER), timeout=15)
        work_code = texts(work, STRANGER)[0].split("Pairing code: ")[1][:8]
        home_code = texts(tg, STRANGER)[0].split("Pairing code: ")[1][:8]
        # the work code is no code on the default account, and an unknown account is named
        assert cli_main(["pairing", "approve", "telegram", work_code, "--config", str(path)]) == 1
        assert "no pending pairing request on telegram" in capsys.readouterr().err
        assert (
            cli_main(["pairing", "approve", "telegram:play", work_code, "--config", str(path)]) == 2
        )
        assert "no account 'play'" in capsys.readouterr().err
        # twin: approved on its own account, it admits the stranger there
        assert (
            cli_main(["pairing", "approve", "telegram:work", work_code, "--config", str(path)]) == 0
        )
        await work.wait_for(lambda: "re: work-first" in texts(work, STRANGER), timeout=15)
        assert d.store.is_approved("telegram:work", str(STRANGER))
        assert not d.store.is_approved("telegram", str(STRANGER))
        # ... and only there: on the default bot they are still a stranger
        tg.inject_message(STRANGER, "home-again", from_id=STRANGER)
        await settled(d, taken(tg, work))
        assert [r["code"] for r in d.store.pairing_requests()] == [home_code]
    assert all("re:" not in t for t in texts(tg, STRANGER))
    assert "home-first" not in str(llm.requests) and "home-again" not in str(llm.requests)


@pytest.fixture
def sandbox():
    from bot.agent.tools.sandbox import probe

    status = probe()
    if not status.ok:
        pytest.skip(f"no sandbox here: {status.detail}")


async def test_an_approval_request_goes_out_through_the_turns_account(tmp_path, llm, tg, sandbox):
    tools = {"enabled": ["exec"], "exec": {"security": "ask"}}
    cfg, work = with_work(tg, tmp_path, llm, tools=tools)
    async with running(cfg) as d:
        llm.script(tool_calls([("exec", {"command": "touch marker.txt"})]), text("done"))
        work.inject_message(OWNER, "make the marker", from_id=OWNER)
        asked = await work.wait_for(
            lambda: [t for t in texts(work, OWNER) if "waiting for your approval" in t],
            timeout=15,
        )
        assert tg.sent == []  # not through the default bot
        code = asked[0].split("/deny ")[1][:6]
        work.inject_message(OWNER, f"/deny {code}", from_id=OWNER)  # answered on that bot
        await work.wait_for(lambda: "done" in texts(work, OWNER), timeout=15)
        await settled(d, taken(tg, work))
    assert tg.sent == []


async def test_two_hundred_replies_racing_across_two_accounts(tmp_path, llm, tg):
    """100 messages on each bot, from 10 senders each, interleaved: every reply leaves
    through the bot its message came in on, and answers that message."""
    owners = [str(1000 + i) for i in range(20)]
    cfg, work = with_work(
        tg,
        tmp_path,
        llm,
        work={"allow_from": owners[10:]},
        home={"allow_from": owners[:10]},
        session={"max_concurrent_turns": 8},
    )
    llm.default = echo
    async with running(cfg) as d:
        for i in range(100):
            home, other = int(owners[i % 10]), int(owners[10 + i % 10])
            tg.inject_message(home, f"home-{i}", from_id=home)
            work.inject_message(other, f"work-{i}", from_id=other)
        await tg.wait_for(lambda: len(tg.sent) >= 100, timeout=120)
        await work.wait_for(lambda: len(work.sent) >= 100, timeout=120)
        await settled(d, taken(tg, work))
    home_replies = sorted(m.visible_text for m in tg.sent)
    work_replies = sorted(m.visible_text for m in work.sent)
    assert home_replies == sorted(f"re: home-{i}" for i in range(100))
    assert work_replies == sorted(f"re: work-{i}" for i in range(100))
    for bot, first in ((tg, 0), (work, 10)):  # each reply to the chat that asked
        for m in bot.sent:
            i = int(m.visible_text.rsplit("-", 1)[1])
            assert m.chat_id == int(owners[first + i % 10])


async def test_status_names_each_account(tmp_path, llm, tg):
    from bot.cli.status import status_text

    cfg, _ = with_work(tg, tmp_path, llm)
    assert "channels enabled in the config: telegram:default, telegram:work" in status_text(cfg)
    async with running(cfg) as d:
        await eventually(lambda: len(d.up) == 2, timeout=15)
        assert sorted(d.up) == ["telegram:default", "telegram:work"]
        assert set(d.channel_states()) == {"telegram:default", "telegram:work"}


def two_agents(tmp_path, llm, tg):
    """Agent ``work`` answers the work bot (a binding); the default agent the other."""
    return with_work(
        tg,
        tmp_path,
        llm,
        work={"allow_from": [str(OWNER), str(WORK_OWNER)]},
        agents={"work": {"workspace": str(tmp_path / "ws-work")}},
        bindings=[{"agent": "work", "channel": "telegram", "account": "work"}],
    )


def tool_results(llm) -> list[str]:
    return [
        m.get("content", "") for r in llm.requests for m in r["messages"] if m.get("role") == "tool"
    ]


async def test_the_message_tool_refuses_an_account_not_bound_to_the_agent(tmp_path, llm, tg):
    cfg, work = two_agents(tmp_path, llm, tg)
    async with running(cfg) as d:
        # the default agent (on the default bot) tries to write through the work bot
        llm.script(
            tool_calls([("message", {"to": f"telegram:work:{WORK_OWNER}", "text": "psst"})]),
            text("tried"),
        )
        tg.inject_message(OWNER, "tell work's owner psst", from_id=OWNER)
        await tg.wait_for(lambda: texts(tg, OWNER), timeout=15)
        await settled(d, taken(tg, work))
    assert work.sent == [] and texts(tg, OWNER) == ["tried"]
    refusal = tool_results(llm)[-1]
    assert "telegram:work is not an account of agent 'main'" in refusal


async def test_the_message_tool_sends_through_an_account_bound_to_the_agent(tmp_path, llm, tg):
    """Twin: agent ``work`` (bound to the work bot) sends through it."""
    cfg, work = two_agents(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.script(
            tool_calls([("message", {"to": f"telegram:work:{WORK_OWNER}", "text": "psst"})]),
            text("sent it"),
        )
        work.inject_message(OWNER, "tell work's owner psst", from_id=OWNER)
        await work.wait_for(lambda: texts(work, OWNER), timeout=15)
        await settled(d, taken(tg, work))
    assert texts(work, WORK_OWNER) == ["psst"] and texts(work, OWNER) == ["sent it"]
    assert tg.sent == [] and tool_results(llm)[-1] == "sent"
    # every row it left in the outbox names the agent it was sent for, the tool's too
    db = sqlite3.connect(cfg.agent.state_dir / "chela.sqlite3")
    kinds = dict(db.execute("SELECT kind, agent FROM outbox ORDER BY id").fetchall())
    assert kinds == {"message": "work", "reply": "work"}


def edited(bot, words: str) -> bool:
    """The bot edited a message (its preview) into ``words``."""
    return any(e.get("text") == words for e in bot.calls_of("editMessageText"))


async def test_a_live_preview_is_shown_and_edited_through_the_turns_account(tmp_path, llm, tg):
    cfg, work = with_work(tg, tmp_path, llm, home={"streaming": "partial"})
    gate = asyncio.Event()
    async with running(cfg) as d:
        llm.script(streamed("Hello", " there from work", gate=gate))
        work.inject_message(OWNER, "stream please", from_id=OWNER)
        preview = await work.wait_for(lambda: work.calls_of("sendMessage"), timeout=15)
        assert preview[0]["text"] == "Hello"  # the preview, while the model still writes
        gate.set()
        await work.wait_for(lambda: edited(work, "Hello there from work"), timeout=15)
        # twin: a turn on the default bot previews there
        gate2 = asyncio.Event()
        llm.script(streamed("Hi", " from home", gate=gate2))
        tg.inject_message(OWNER, "stream please", from_id=OWNER)
        await tg.wait_for(lambda: tg.calls_of("sendMessage"), timeout=15)
        gate2.set()
        await tg.wait_for(lambda: edited(tg, "Hi from home"), timeout=15)
        await settled(d, taken(tg, work))
    assert len(work.calls_of("sendMessage")) == 1 and not edited(work, "Hi from home")
    assert len(tg.calls_of("sendMessage")) == 1 and not edited(tg, "Hello there from work")


async def test_pair_in_the_chat_decides_another_accounts_code_only_for_its_owner(tmp_path, llm, tg):
    """The default bot's owner (42) is no owner of the work bot (99 is): their /pair cannot
    admit a stranger there; twin: work's owner approves it from the work bot."""
    cfg, work = with_work(tg, tmp_path, llm, work={"allow_from": [str(WORK_OWNER)]})
    llm.default = echo
    async with running(cfg) as d:
        work.inject_message(STRANGER, "work-please", from_id=STRANGER)
        notice = await work.wait_for(lambda: texts(work, WORK_OWNER), timeout=15)
        code = notice[0].split("Code: ")[1][:8]
        tg.inject_message(OWNER, f"/pair approve {code}", from_id=OWNER)
        refused = await tg.wait_for(lambda: texts(tg, OWNER), timeout=15)
        assert refused == [
            f"Nothing done: code {code} was asked for on telegram:work, where you are not an owner."
        ]
        await settled(d, taken(tg, work))
        assert not d.store.is_approved("telegram:work", str(STRANGER))
        work.inject_message(WORK_OWNER, f"/pair approve {code}", from_id=WORK_OWNER)
        await work.wait_for(lambda: "re: work-please" in texts(work, STRANGER), timeout=15)
        assert d.store.is_approved("telegram:work", str(STRANGER))
        await settled(d, taken(tg, work))
    assert [m.chat_id for m in tg.sent] == [OWNER]


async def test_an_account_runs_when_its_channels_own_table_is_off(tmp_path, llm, tg):
    """``enabled = true`` on the account starts the work bot alone; the default bot is off."""
    cfg, work = with_work(tg, tmp_path, llm, home={"enabled": False}, work={"enabled": True})
    llm.default = echo
    async with running(cfg) as d:
        assert list(d.channels) == ["telegram:work"]
        work.inject_message(OWNER, "work-alone", from_id=OWNER)
        await work.wait_for(lambda: texts(work, OWNER), timeout=15)
        await settled(d, taken(work))
    assert texts(work, OWNER) == ["re: work-alone"] and tg.calls == []


async def test_doctor_checks_each_accounts_token(tmp_path, llm, tg, monkeypatch):
    from bot.cli.doctor import doctor

    cfg, _ = with_work(tg, tmp_path, llm)
    monkeypatch.setenv(WORK_ENV, "777001:WRONG")
    by = {f.subject: f for f in await doctor(cfg)}
    assert (
        by["channel telegram:work"].level == "FAIL" and WORK_ENV in by["channel telegram:work"].fix
    )
    assert by["channel telegram:default"].level == "OK"  # twin: the default bot's own token
    monkeypatch.setenv(WORK_ENV, WORK_TOKEN)  # twin: the work bot's right token
    by = {f.subject: f for f in await doctor(cfg)}
    assert (
        by["channel telegram:work"].level == "OK"
        and "@work_bot" in by["channel telegram:work"].detail
    )
