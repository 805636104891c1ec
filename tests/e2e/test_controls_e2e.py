"""Control from the chat (SPEC §17.1-17.3, issue 26) through the real daemon, python-telegram-bot
against the fake Bot API, and the fake LLM: /stop, /think and /model.  Each refusal has its
twin: the owner's (or the guest's own) legitimate use."""

from __future__ import annotations

import logging
from pathlib import Path

from bot.model import choice
from tests.e2e import eventually, make_config, running, telegram_section
from tests.fakes.llm import delay, error, text, tool_calls
from tests.e2e.test_stop_e2e import alive
from tests.e2e.harness import settled, tg_taken

OWNER, GUEST, GROUP = 42, 555, -1001
SLOW = 4  # seconds the slow model call would take (the fake server waits it out at teardown)
OWNER_KEY = "agent:main:main"


def cfg_for(tmp_path, llm, tg, agent: dict | None = None, **kw):
    section = telegram_section(tg, dm_policy="open", groups=[str(GROUP)])
    return make_config(tmp_path, llm, channels=section, agent=agent or {}, **kw)


def sent_texts(tg) -> list[str]:
    return [m.visible_text for m in tg.sent]


def history(d, key):
    return d.store.history(key, limit=100, max_chars=1_000_000)


async def _say(tg, n: int, chat: int, words: str, sender: int | None = None, **kw) -> str:
    tg.inject_message(chat, words, from_id=sender or chat, **kw)
    return (await tg.wait_for_sent(n, timeout=15))[n - 1].visible_text


# ------------------------------------------------------------------------------- /stop
async def test_stop_during_a_slow_model_call_answers_stopped_and_nothing_else(tmp_path, llm, tg):
    llm.script(delay(SLOW, then=text("too late")), text("Here you are"))
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.inject_message(OWNER, "write me an essay", from_id=OWNER)
        await llm.wait_for_requests(1, timeout=15)
        assert await _say(tg, 1, OWNER, "/stop") == "Stopped."
        await settled(d, tg_taken(tg))
        assert sent_texts(tg) == ["Stopped."]
        assert [m["role"] for m in history(d, OWNER_KEY)] == ["user"]
        assert not d.conversation.runner.running(OWNER_KEY)
        # the twin: the next message is answered as usual
        assert await _say(tg, 2, OWNER, "second question") == "Here you are"
    assert len(llm.requests) == 2
    second = str(llm.requests[1]["messages"])
    assert "write me an essay" in second and "too late" not in second


async def test_stop_kills_the_running_exec(tmp_path, llm, tg):
    llm.script(tool_calls([("exec", {"command": "echo $$ > pid.txt; exec sleep 30"})]), text("no"))
    tools = {"enabled": ["exec"], "exec": {"security": "full", "sandbox": "off"}}
    cfg = cfg_for(tmp_path, llm, tg, tools=tools)
    pid_file = Path(cfg.agent.workspace) / "pid.txt"
    async with running(cfg) as d:
        tg.inject_message(OWNER, "run the long job", from_id=OWNER)
        await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=15)
        pid = int(pid_file.read_text())
        assert alive(pid)
        assert await _say(tg, 1, OWNER, "/stop") == "Stopped."
        assert not alive(pid)  # gone by the time the answer went out
        await settled(d, tg_taken(tg))
        assert sent_texts(tg) == ["Stopped."] and len(llm.requests) == 1


async def test_stop_with_nothing_running_says_so(tmp_path, llm, tg):
    async with running(cfg_for(tmp_path, llm, tg)):
        assert await _say(tg, 1, OWNER, "/stop") == "Nothing is running right now."
    assert llm.requests == []


async def test_a_guests_stop_never_touches_the_owners_turn(tmp_path, llm, tg):
    llm.script(delay(SLOW, then=text("too late")))
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.inject_message(OWNER, "a long question", from_id=OWNER)
        await llm.wait_for_requests(1, timeout=15)
        assert await _say(tg, 1, GUEST, "/stop") == "Nothing is running right now."
        assert d.conversation.runner.running(OWNER_KEY)  # still running
        # the twin: the owner's own /stop stops it
        assert await _say(tg, 2, OWNER, "/stop") == "Stopped."


async def test_a_guest_stops_its_own_turn(tmp_path, llm, tg):
    # the twin: the guest's /stop stops the turn of the guest's own session
    llm.script(delay(SLOW, then=text("too late")))
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        tg.inject_message(GUEST, "a long question", from_id=GUEST)
        await llm.wait_for_requests(1, timeout=15)
        assert await _say(tg, 1, GUEST, "/stop") == "Stopped."
        await settled(d, tg_taken(tg))
    assert sent_texts(tg) == ["Stopped."]


MENTION = {"chat_type": "supergroup", "title": "G"}


async def test_in_a_group_a_guest_cannot_stop_someone_elses_turn(tmp_path, llm, tg):
    llm.script(delay(SLOW, then=text("too late")))
    async with running(cfg_for(tmp_path, llm, tg)) as d:
        await _say(tg, 1, GROUP, "/activation always", sender=OWNER, **MENTION)
        tg.inject_message(GROUP, "owner asks something long", from_id=OWNER, **MENTION)
        await llm.wait_for_requests(1, timeout=15)
        got = await _say(tg, 2, GROUP, "/stop", sender=GUEST, **MENTION)
        assert got == "Only the owner or whoever started it can stop the turn running here."
        key = d.conversation.session_key(_group_msg(OWNER))
        assert d.conversation.runner.running(key)
        # the twin: the owner stops it
        assert await _say(tg, 3, GROUP, "/stop", sender=OWNER, **MENTION) == "Stopped."


def _group_msg(sender: int):
    from channels.base import InboundMessage

    return InboundMessage(
        channel="telegram", chat_id=str(GROUP), sender_id=str(sender), text="", chat_type="group"
    )


# ------------------------------------------------------------------------------ /think
async def test_think_is_sent_as_reasoning_effort_and_off_removes_it(tmp_path, llm, tg):
    llm.script(text("a"), text("b"), text("c"))
    async with running(cfg_for(tmp_path, llm, tg)):
        assert await _say(tg, 1, OWNER, "/think high") == "Thinking set to high."
        await _say(tg, 2, OWNER, "think hard")
        assert await _say(tg, 3, OWNER, "/think") == (
            "Thinking: high. Levels: off, minimal, low, medium, high."
        )
        assert "Thinking: high" in await _say(tg, 4, OWNER, "/status")
        assert await _say(tg, 5, OWNER, "/think off") == "Thinking is off."
        await _say(tg, 6, OWNER, "think less")
        assert (await _say(tg, 7, OWNER, "/think hardest")).startswith("There is no thinking level")
    assert llm.requests[0]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in llm.requests[1]
    assert len(llm.requests) == 2


async def test_a_guests_think_is_refused(tmp_path, llm, tg):
    llm.script(text("guest answer"))
    async with running(cfg_for(tmp_path, llm, tg)):
        assert await _say(tg, 1, GUEST, "/think high") == "Only the owner can use /think."
        await _say(tg, 2, GUEST, "hello")
    assert "reasoning_effort" not in llm.requests[0]


async def test_agent_thinking_is_the_default_and_a_think_survives_a_restart(tmp_path, llm, tg):
    llm.script(text("a"), text("b"))
    cfg = cfg_for(tmp_path, llm, tg, agent={"thinking": "low"})
    async with running(cfg):
        await _say(tg, 1, OWNER, "first")
        await _say(tg, 2, OWNER, "/think medium")
    async with running(cfg):
        await _say(tg, 3, OWNER, "after the restart")
    assert [r.get("reasoning_effort") for r in llm.requests] == ["low", "medium"]


# ------------------------------------------------------------------------------ /model
def models(llm) -> dict:
    return {
        "fallbacks": [{"model": "openai/backup-model", "api_base": llm.base_url}],
        "models": {"fast": "openai/fast-model"},
    }


async def test_model_lists_switches_survives_a_restart_and_returns_to_default(tmp_path, llm, tg):
    llm.script(text("a"), text("b"), text("c"))
    cfg = cfg_for(tmp_path, llm, tg, agent=models(llm))
    async with running(cfg):
        listing = await _say(tg, 1, OWNER, "/model")
        assert listing.splitlines()[1:] == [
            "1. openai/fake-model (default)  ← current",
            "2. openai/backup-model",
            "3. fast → openai/fast-model",
        ]
        assert await _say(tg, 2, OWNER, "/model fast") == "Now using openai/fast-model."
        await _say(tg, 3, OWNER, "hello")
        assert "Model: openai/fast-model" in await _say(tg, 4, OWNER, "/status")
    async with running(cfg):
        await _say(tg, 5, OWNER, "after the restart")
        got = await _say(tg, 6, OWNER, "/model default")
        assert got == "Back to the default model: openai/fake-model."
        await _say(tg, 7, OWNER, "and now")
    assert [r["model"] for r in llm.requests] == ["fast-model", "fast-model", "fake-model"]


async def test_an_unknown_model_is_refused_with_the_choices(tmp_path, llm, tg):
    llm.script(text("a"))
    async with running(cfg_for(tmp_path, llm, tg, agent=models(llm))):
        got = await _say(tg, 1, OWNER, "/model gpt-9000")
        assert got.startswith("There is no model called 'gpt-9000' here.")
        assert "3. fast → openai/fast-model" in got
        await _say(tg, 2, OWNER, "hello")
    assert llm.requests[0]["model"] == "fake-model"


async def test_a_guests_model_is_refused_and_the_owners_works(tmp_path, llm, tg):
    llm.script(text("guest"), text("owner"))
    async with running(cfg_for(tmp_path, llm, tg, agent=models(llm))):
        assert await _say(tg, 1, GUEST, "/model fast") == "Only the owner can use /model."
        await _say(tg, 2, GUEST, "hello")
        assert await _say(tg, 3, OWNER, "/model 2") == "Now using openai/backup-model."
        await _say(tg, 4, OWNER, "hello")
    assert [r["model"] for r in llm.requests] == ["fake-model", "backup-model"]


async def test_help_lists_the_controls_per_trust_level(tmp_path, llm, tg):
    async with running(cfg_for(tmp_path, llm, tg)):
        owner = await _say(tg, 1, OWNER, "/help")
        guest = await _say(tg, 2, GUEST, "/help")
    for line in ("/stop:", "/model [name|default]:", "/think [off|minimal|low|medium|high]:"):
        assert line in owner
    assert "/stop:" in guest and "/model" not in guest and "/think" not in guest


async def test_agent_fallbacks_follow_the_sessions_model(tmp_path, llm, tg):
    # the chosen model fails (500, after its one retry): the fallback answers, not agent.model
    llm.script(error(500), error(500), text("from the backup"))
    async with running(cfg_for(tmp_path, llm, tg, agent=models(llm))):
        await _say(tg, 1, OWNER, "/model fast")
        assert await _say(tg, 2, OWNER, "hello") == "from the backup"
    assert [r["model"] for r in llm.requests] == ["fast-model", "fast-model", "backup-model"]


async def test_a_model_without_reasoning_gets_the_call_without_it(tmp_path, llm, tg, caplog):
    # gpt-4o-mini is in the price table without reasoning: the effort is dropped, one log line
    choice._told.discard("openai/gpt-4o-mini")  # told once per process: maybe by another test
    caplog.set_level(logging.INFO, logger="bot.model.client")
    llm.script(text("a"), text("b"), text("c"))
    agent = {"models": {"mini": "openai/gpt-4o-mini", "o3": "openai/o3-mini"}}
    async with running(cfg_for(tmp_path, llm, tg, agent=agent)):
        await _say(tg, 1, OWNER, "/think high")
        await _say(tg, 2, OWNER, "/model mini")
        assert await _say(tg, 3, OWNER, "hello") == "a"
        assert await _say(tg, 4, OWNER, "again") == "b"
        await _say(tg, 5, OWNER, "/model fake-model")
        await _say(tg, 6, OWNER, "and now")  # the twin: a model the table does not know
    assert [r.get("reasoning_effort") for r in llm.requests] == [None, None, "high"]
    told = [r for r in caplog.records if "does not take reasoning_effort" in r.getMessage()]
    assert len(told) == 1 and "openai/gpt-4o-mini" in told[0].getMessage()


async def test_a_model_alias_table_uses_its_own_endpoint_and_key(tmp_path, llm, tg, monkeypatch):
    """`[agent.models]` takes a table like a fallback (SPEC §17.2): `/model local` sends the
    session's calls to the alias's own api_base with the key from its own api_key_env; the
    default model keeps its endpoint (the twin: before the switch, and after `/model default`)."""
    from tests.fakes.llm import FakeLLM

    monkeypatch.setenv("LOCAL_LLM_KEY", "sk-local-alias-key")
    async with FakeLLM() as local:
        local.script(text("from the local model"))
        llm.script(text("from the default"), text("default again"))
        alias = {"model": "openai/local-model", "api_base": local.base_url}
        agent = {"models": {"local": alias | {"api_key_env": "LOCAL_LLM_KEY"}}}
        async with running(cfg_for(tmp_path, llm, tg, agent=agent)):
            assert await _say(tg, 1, OWNER, "first") == "from the default"
            assert await _say(tg, 2, OWNER, "/model local") == "Now using openai/local-model."
            assert await _say(tg, 3, OWNER, "second") == "from the local model"
            await _say(tg, 4, OWNER, "/model default")
            assert await _say(tg, 5, OWNER, "third") == "default again"
    assert [r["model"] for r in local.requests] == ["local-model"]
    assert local.headers[0]["Authorization"] == "Bearer sk-local-alias-key"
    assert [r["model"] for r in llm.requests] == ["fake-model", "fake-model"]
