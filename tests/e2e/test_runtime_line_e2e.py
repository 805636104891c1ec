"""The prompt's Runtime line names the session's model and thinking level (SPEC §17.2,
§17.3), through the real daemon, the fake Telegram and the fake LLM; another session at
the same time keeps the defaults.  /help lists the owner-only commands (/pair with them)
to the owner only."""

from __future__ import annotations

from tests.e2e import make_config, running, system_prompt, telegram_section
from tests.fakes.llm import text

OWNER, GUEST = 42, 555


def cfg_for(tmp_path, llm, tg):
    section = telegram_section(tg, dm_policy="open")
    agent = {"models": {"fast": "openai/fast-model"}}
    return make_config(tmp_path, llm, channels=section, agent=agent)


async def _say(tg, n: int, chat: int, words: str) -> str:
    tg.inject_message(chat, words, from_id=chat)
    return (await tg.wait_for_sent(n, timeout=15))[n - 1].visible_text


def runtime(request: dict) -> str:
    return next(x for x in system_prompt(request).splitlines() if x.startswith("Runtime: "))


async def test_the_runtime_line_names_the_sessions_model_and_thinking(tmp_path, llm, tg):
    llm.script(text("owner answer"), text("guest answer"), text("owner again"))
    async with running(cfg_for(tmp_path, llm, tg)):
        await _say(tg, 1, OWNER, "/model fast")
        await _say(tg, 2, OWNER, "/think high")
        await _say(tg, 3, OWNER, "hello")
        await _say(tg, 4, GUEST, "hi")  # another session: the defaults
        await _say(tg, 5, OWNER, "/model default")
        await _say(tg, 6, OWNER, "and now?")
    owner, guest, back = (runtime(r) for r in llm.requests)
    assert "| model=openai/fast-model |" in owner and owner.endswith("thinking=high")
    assert "default_model=openai/fake-model" in owner
    assert "| model=openai/fake-model |" in guest and guest.endswith("thinking=off")
    assert "| model=openai/fake-model |" in back and back.endswith("thinking=high")
    assert [r["model"] for r in llm.requests] == ["fast-model", "fake-model", "fake-model"]


async def test_help_shows_owner_only_commands_to_the_owner_only(tmp_path, llm, tg):
    async with running(cfg_for(tmp_path, llm, tg)):
        owner = await _say(tg, 1, OWNER, "/help")
        guest = await _say(tg, 2, GUEST, "/help")
    owner_only = ("/pair", "/model", "/think", "/approve", "/deny", "/activation")
    for name in owner_only:
        assert f"\n{name} " in owner and name not in guest
    for name in ("/new or /reset", "/status", "/stop", "/help"):
        assert name in owner and name in guest
    assert llm.requests == []
