"""Every model call passes one gate (SPEC §9.5 "Model calls"), and a key goes only to the
endpoint it was configured for (§9.5 "Secrets"); issue 23 items 5 and 8.  End to end: fake
Telegram → daemon → fake LLM (chat, /audio/transcriptions, /audio/speech)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from aiohttp import web

from bot.cli import main as cli_main
from bot.agent.compaction import SUMMARY_INSTRUCTIONS
from bot.model.gate import GUEST_USED_UP
from tests.e2e import config_file, make_config, running, telegram_section
from tests.fakes.llm import FakeLLM, text
from tests.fakes.media_samples import ogg_opus
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (SPEC §12: one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")

OWNER, GUEST = 42, 77
AGENT_KEY = "sk-agent-key-never-elsewhere-1234"
STT_KEY = "sk-transcription-key-5678"
TTS_KEY = "sk-speech-key-9012"


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("TEST_AGENT_KEY", AGENT_KEY)
    monkeypatch.setenv("TEST_STT_KEY", STT_KEY)
    monkeypatch.setenv("TEST_TTS_KEY", TTS_KEY)


def cfg_for(tmp_path, llm, tg, *, agent: dict | None = None, media: dict | None = None):
    """Guests are anyone writing a DM (dm_policy open); the owner is 42."""
    return make_config(
        tmp_path,
        llm,
        agent={"guest_daily_cost_limit_usd": 0.01, **(agent or {})},
        channels=telegram_section(tg, dm_policy="open"),
        media=media or {},
    )


def spend_guest_budget(d, key: str = "guest-elsewhere") -> None:
    """Guests spent $1 today (the limit is $0.01): rows as the gate writes them."""
    d.store.add_usage(
        key, "t", "openai/fake-model", cost_usd=1.0, kind="chat", trust="guest", agent="main"
    )


def summary_requests(llm) -> list[dict]:
    return [r for r in llm.requests if r["messages"][0]["content"] == SUMMARY_INSTRUCTIONS]


def stored_user_turns(cfg) -> list[str]:
    with sqlite3.connect(cfg.db_path) as db:
        rows = [json.loads(r[0]) for r in db.execute("SELECT data FROM messages")]
    return [m["content"] for m in rows if m.get("role") == "user"]


async def say(tg, who: int, words: str, n: int, **kw) -> str:
    tg.inject_message(who, words, from_id=who, **kw)
    sent = await tg.wait_for_sent(n, timeout=20)
    return sent[n - 1].visible_text


# ------------------------------------------------------------------ item 5: /compact
async def test_guest_compact_over_budget_makes_no_model_call(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    async with running(cfg) as d:
        assert (await say(tg, GUEST, "hello there", 1)).startswith("ok")
        # twin: under its budget a guest's /compact compacts (a summary request)
        assert "Compacted" in await say(tg, GUEST, "/compact", 2)
        assert len(summary_requests(llm)) == 1
        assert (await say(tg, GUEST, "and more", 3)).startswith("ok")
        spend_guest_budget(d)
        before = len(llm.requests)
        answer = await say(tg, GUEST, "/compact", 4)
        assert answer == GUEST_USED_UP
        assert len(llm.requests) == before  # no summary request, no model call at all
        # twin: the owner's /compact is not the guests' budget
        assert (await say(tg, OWNER, "owner talk", 5)).startswith("ok")
        assert "Compacted" in await say(tg, OWNER, "/compact", 6)
    assert len(summary_requests(llm)) == 2


async def test_guest_turn_over_budget_does_not_compact_first(tmp_path, llm, tg):
    """A guest's turn that would compact its history: over the budget the summary call
    is refused like the turn's own, not made before the refusal."""
    cfg = cfg_for(tmp_path, llm, tg, agent={"compaction": {"context_window": 2000}})
    async with running(cfg) as d:
        for i in range(1, 4):
            await say(tg, GUEST, f"message {i} " + "words " * 250, i)
        spend_guest_budget(d)
        before = len(llm.requests)
        assert await say(tg, GUEST, "one more " + "words " * 250, 4) == GUEST_USED_UP
        assert len(llm.requests) == before  # neither a summary nor a flush nor the turn


def d_key(d) -> str:
    return f"agent:{d.cfg.agent.id}:telegram:direct:{GUEST}"


# -------------------------------------------------------------- item 5: voice notes
async def test_guest_voice_note_over_budget_is_not_transcribed(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, media={"transcription_model": "openai/whisper-1"})
    async with running(cfg) as d:
        spend_guest_budget(d)
        answer = await say(tg, GUEST, "", 1, voice=ogg_opus(7), duration=7)
    assert answer == GUEST_USED_UP  # the loop refuses the turn, as before
    assert llm.transcriptions == [] and llm.requests == []
    [turn] = stored_user_turns(cfg)
    assert "[voice note 0:07, not transcribed: the budget for model calls is used up" in turn


async def test_guest_voice_note_under_budget_is_transcribed_and_its_cost_recorded(
    tmp_path, llm, tg, capsys
):
    cfg = cfg_for(
        tmp_path,
        llm,
        tg,
        agent={"guest_daily_cost_limit_usd": 5.0},
        media={"transcription_model": "openai/whisper-1"},
    )
    llm.transcript = "call me back"
    async with running(cfg) as d:
        await say(tg, GUEST, "", 1, voice=ogg_opus(12), duration=12)
        rows = d.store.usage_rows(0)
    assert len(llm.transcriptions) == 1
    assert "[voice note 0:12, transcribed] call me back" in stored_user_turns(cfg)[0]
    [stt] = [r for r in rows if r["kind"] == "transcription"]
    assert stt["trust"] == "guest" and stt["session_key"] == d_key(d)
    assert stt["model"] == "openai/whisper-1"
    assert stt["cost_usd"] == pytest.approx(12 * 0.0001)  # whisper-1: $0.0001 per second
    path = config_file(
        tmp_path / "c.toml", llm, workspace=cfg.agent.workspace, state_dir=cfg.agent.state_dir
    )
    capsys.readouterr()
    assert cli_main(["usage", "--config", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [row] = [r for r in report["rows"] if r["model"] == "openai/whisper-1"]
    assert row["calls"] == 1 and row["cost_usd"] == pytest.approx(0.0012)


# ------------------------------------------------------------ item 8: whose key where
@pytest.fixture
async def other():
    """A second OpenAI-compatible server: a transcription service of its own."""
    async with FakeLLM() as f:
        yield f


async def transcribe_once(tmp_path, llm, tg, media: dict) -> None:
    cfg = cfg_for(
        tmp_path,
        llm,
        tg,
        agent={"api_key_env": "TEST_AGENT_KEY"},
        media={"transcription_model": "openai/whisper-1", **media},
    )
    async with running(cfg):
        await say(tg, OWNER, "", 1, voice=ogg_opus(3), duration=3)


async def test_another_transcription_server_never_gets_the_agents_key(tmp_path, llm, tg, other):
    await transcribe_once(tmp_path, llm, tg, {"transcription_api_base": other.base_url})
    [t] = other.transcriptions
    assert AGENT_KEY not in t["authorization"]
    assert t["authorization"] == "Bearer sk-local"  # a placeholder, no secret
    assert llm.transcriptions == []


async def test_another_transcription_server_gets_its_own_key(tmp_path, llm, tg, other):
    media = {"transcription_api_base": other.base_url, "transcription_api_key_env": "TEST_STT_KEY"}
    await transcribe_once(tmp_path, llm, tg, media)
    assert [t["authorization"] for t in other.transcriptions] == [f"Bearer {STT_KEY}"]


async def test_the_agents_own_server_gets_the_agents_key(tmp_path, llm, tg):
    """The twin: transcription on the agent's endpoint (no base of its own) as before."""
    await transcribe_once(tmp_path, llm, tg, {})
    assert [t["authorization"] for t in llm.transcriptions] == [f"Bearer {AGENT_KEY}"]


class SpeechServer(FakeLLM):
    """The fake LLM, remembering who /audio/speech was sent with."""

    def __init__(self) -> None:
        super().__init__()
        self.speech_auth: list[str] = []

    async def _speech(self, request: web.Request) -> web.Response:
        self.speech_auth.append(request.headers.get("Authorization", ""))
        return await super()._speech(request)


@pytest.mark.parametrize(
    ("own_env", "expected"), [("", "Bearer sk-local"), ("TEST_TTS_KEY", f"Bearer {TTS_KEY}")]
)
async def test_a_speech_server_of_its_own_gets_only_its_own_key(
    tmp_path, llm, tg, own_env, expected
):
    async with SpeechServer() as tts:
        media = {"tts_model": "openai/tts-1", "tts_api_base": tts.base_url}
        if own_env:
            media["tts_api_key_env"] = own_env
        cfg = cfg_for(tmp_path, llm, tg, agent={"api_key_env": "TEST_AGENT_KEY"}, media=media)
        llm.script(text("[[audio_as_voice]] hello in voice"))
        async with running(cfg) as d:
            await say(tg, OWNER, "say it", 1)
            await tg.wait_for(lambda: tts.speech_auth, timeout=10)
            rows = d.store.usage_rows(0)
    assert tts.speech_auth == [expected]
    [speech] = [r for r in rows if r["kind"] == "speech"]
    assert speech["trust"] == "owner" and speech["cost_usd"] > 0  # tts-1 is priced per character


def test_a_key_env_must_name_a_variable(tmp_path, llm):
    from bot.config import ConfigError

    with pytest.raises(ConfigError, match="media.transcription_api_key_env"):
        make_config(tmp_path, llm, media={"transcription_api_key_env": "sk-pasted-key-value"})
    make_config(tmp_path, llm, media={"transcription_api_key_env": "TEST_STT_KEY"})  # the twin
