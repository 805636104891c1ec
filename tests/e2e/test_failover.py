"""Fallback chain, cooldown and retries (SPEC §12) through the real litellm against two fake
OpenAI-compatible servers on 127.0.0.1.  Time is a fake clock; waits are recorded, not slept."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from bot.model import LLMClient, LLMError, ModelTarget
from bot.conversation.outage import NOTICE
from tests.e2e import make_config, running, telegram_section
from tests.fakes.llm import FakeLLM, always, drop, error, text, tool_calls
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (SPEC §12: one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")

MSGS = [{"role": "user", "content": "hi"}]
OWNER = 42


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:  # a retry's wait passes at once
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
async def backup():
    """The second fake provider (the fallback)."""
    async with FakeLLM() as f:
        yield f


def chain(primary: FakeLLM, backup: FakeLLM, clock: Clock, **kw) -> LLMClient:
    kw.setdefault("max_retries", 2)
    return LLMClient(
        "openai/primary-model",
        api_base=primary.base_url,
        api_key="sk-primary-secret-123456",
        fallbacks=[
            ModelTarget("openai/backup-model", backup.base_url, "sk-backup", "agent.fallbacks[0]")
        ],
        cooldown=300,
        clock=clock,
        sleep=clock.sleep,
        backoff_base=0.01,
        **kw,
    )


async def test_long_retry_after_fails_over_then_cooldown_then_primary_again(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock)
    llm.script(error(429, retry_after=3600))
    backup.default = always(text("from the backup"))
    comp = await c.complete(MSGS)
    assert comp.text == "from the backup" and comp.model == "openai/backup-model"
    assert len(llm.requests) == 1  # a one-hour Retry-After is not waited for, nor retried
    assert clock.waits == []
    assert backup.requests[0]["model"] == "backup-model"

    # during the cooldown the primary is skipped: no request reaches it
    clock.now += 299
    assert (await c.complete(MSGS)).text == "from the backup"
    assert len(llm.requests) == 1 and len(backup.requests) == 2

    # after the cooldown (shorter than the Retry-After asked) it is tried again, and answers
    clock.now += 2
    llm.script(text("primary is back"))
    comp = await c.complete(MSGS)
    assert comp.text == "primary is back" and comp.model == "openai/primary-model"
    assert len(llm.requests) == 2 and len(backup.requests) == 2
    # and stays in use (its cooldown was cleared)
    llm.script(text("still primary"))
    assert (await c.complete(MSGS)).text == "still primary"


async def test_short_retry_after_is_waited_then_primary_answers(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock)
    llm.script(error(429, retry_after=2), text("primary after a wait"))
    comp = await c.complete(MSGS)
    assert comp.text == "primary after a wait"
    assert clock.waits == [2.0]
    assert backup.requests == []


async def test_repeated_retry_after_fails_over(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock, max_retries=5)
    llm.default = always(error(429, retry_after=1))
    backup.script(text("backup"))
    assert (await c.complete(MSGS)).text == "backup"
    assert len(llm.requests) == 2  # the second 429 in a row: another model can answer
    assert clock.waits == [1.0]


async def test_401_fails_over_with_an_operator_log_line(llm, backup, caplog):
    clock = Clock()
    c = chain(llm, backup, clock)
    llm.script(
        error(
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: sk-primary-secret-123456",
                    "type": "invalid_request_error",
                }
            },
        )
    )
    backup.script(text("backup answered"))
    with caplog.at_level(logging.INFO, logger="bot.model.client"):
        assert (await c.complete(MSGS)).text == "backup answered"
    assert len(llm.requests) == 1  # a rejected key is not retried
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert (
        "primary-model" in logged and "Incorrect API key provided" in logged
    )  # the provider's words
    assert "sk-primary-secret-123456" not in logged  # ... with the key redacted
    assert "key rejected (HTTP 401)" in logged and "skipped for 300s" in logged


async def test_5xx_is_retried_on_the_primary_before_failing_over(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock, max_retries=2)
    llm.default = always(error(503))
    backup.script(text("backup"))
    assert (await c.complete(MSGS)).text == "backup"
    assert len(llm.requests) == 3  # 1 + 2 retries, backoff waits recorded, not slept
    assert len(clock.waits) == 2


async def test_connection_refused_and_dropped_fail_over(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock, max_retries=1)
    llm.default = always(drop())
    backup.script(text("backup"))
    assert (await c.complete(MSGS)).text == "backup"
    assert len(llm.requests) == 2


async def test_all_models_down_gives_one_sentence_naming_each(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock, max_retries=0)
    llm.default = always(error(503))
    backup.default = always(error(429))
    with pytest.raises(LLMError) as ei:
        await c.complete(MSGS)
    msg = ei.value.user_message
    assert msg.startswith("None of the configured models answered")
    assert "openai/primary-model: HTTP 503" in msg and "openai/backup-model: rate-limited" in msg
    assert msg.count(".") <= 2 and "rephras" not in msg
    # every model is cooling down now: the next call still tries them rather than none
    llm.default = always(text("recovered"))
    assert (await c.complete(MSGS)).text == "recovered"


async def test_a_bad_request_does_not_fail_over(llm, backup):
    clock = Clock()
    c = chain(llm, backup, clock)
    llm.script(error(400))
    with pytest.raises(LLMError) as ei:
        await c.complete(MSGS)
    assert ei.value.status == 400 and not ei.value.failover
    assert backup.requests == []  # another model would get the same bad request


async def test_unroutable_model_string_is_named_and_the_fallback_answers(backup):
    clock = Clock()
    single = LLMClient("llama3.2", clock=clock, sleep=clock.sleep)
    with pytest.raises(LLMError) as ei:
        await single.complete(MSGS)
    msg = ei.value.user_message
    assert "'llama3.2'" in msg and "agent.model" in msg and "provider prefix" in msg
    assert "rephras" not in msg.lower() and ei.value.kind == "config"

    c = LLMClient(
        "llama3.2",
        fallbacks=[
            ModelTarget("openai/backup-model", backup.base_url, "sk-b", "agent.fallbacks[0]")
        ],
        clock=clock,
        sleep=clock.sleep,
    )
    backup.script(text("routed"))
    assert (await c.complete(MSGS)).text == "routed"


# ----------------------------------------------------------------------------- end to end
def _chain_cfg(tmp_path, llm, backup, tg=None, **agent):
    channels = {"http": {"enabled": True, "listen": "127.0.0.1:0"}}
    if tg is not None:
        channels.update(telegram_section(tg))
    return make_config(
        tmp_path,
        llm,
        agent={
            "fallbacks": [{"model": "openai/backup-model", "api_base": backup.base_url}],
            "cooldown": "5m",
            **agent,
        },
        channels=channels,
    )


async def test_daemon_primary_down_fallback_answers_then_cooldown(tmp_path, llm, backup, tg):
    cfg = _chain_cfg(tmp_path, llm, backup, tg)
    llm.default = always(error(503))
    backup.default = always(text("the backup says hi"))
    async with running(cfg) as d:
        clock = Clock()
        d.agent.llm.clock, d.agent.llm.sleep = clock, clock.sleep
        tg.inject_message(OWNER, "hello", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        assert tg.sent[0].visible_text == "the backup says hi"
        assert len(llm.requests) == 2  # the primary: 1 + llm_max_retries (1)
        tg.inject_message(OWNER, "again", from_id=OWNER)
        await tg.wait_for_sent(2, timeout=15)
        assert len(llm.requests) == 2  # cooling down: skipped
        clock.now += 301
        llm.default = always(text("the primary is back"))
        tg.inject_message(OWNER, "and now?", from_id=OWNER)
        await tg.wait_for_sent(3, timeout=15)
        assert tg.sent[2].visible_text == "the primary is back"
        rows = d.store.usage_rows(0)
    assert [r["model"] for r in rows] == [
        "openai/backup-model",
        "openai/backup-model",
        "openai/fake-model",
    ]


async def test_daemon_all_down_the_message_is_kept_and_http_gets_502(tmp_path, llm, backup, tg):
    """No model of the chain answers: a chat message is kept for when one does (SPEC §24;
    tests/e2e/test_outage_e2e.py), an HTTP API caller gets 502 with the combined reason."""
    cfg = _chain_cfg(tmp_path, llm, backup, tg, llm_max_retries=0)
    cfg.outage.probe_initial = cfg.outage.probe_max = "50ms"
    llm.default = always(error(503))
    backup.default = always(error(500, {"error": {"message": "backend exploded"}}))
    async with running(cfg) as d:
        tg.inject_message(OWNER, "hello?", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        told = tg.sent[0].visible_text
        assert told == NOTICE
        assert d.store.history("agent:main:main", limit=50, max_chars=100_000) == []

        port = d.channels["http"].bound_port
        token = cfg.http_token_path.read_text().strip()
        async with aiohttp.ClientSession() as s:
            async with s.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}], "user": "bob"},
                headers={"Authorization": f"Bearer {token}"},
            ) as r:
                assert r.status == 502
                body = await r.json()
        assert body["error"]["code"] == "model_error"
        assert "None of the configured models answered" in body["error"]["message"]

        # the twin: the provider is back, the kept message is answered and stored
        llm.default = always(text("back online"))
        await tg.wait_for_sent(2, timeout=15)
        assert tg.sent[1].visible_text == "back online"
        history = d.store.history("agent:main:main", limit=50, max_chars=100_000)
    assert [m["role"] for m in history] == ["user", "assistant"]
    # the model's request does not carry the notice either
    assert told not in json.dumps(llm.requests[-1]["messages"])


async def test_a_tool_that_ran_is_not_run_again_after_a_retry(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    llm.script(
        tool_calls([("write", {"path": "note.txt", "content": "written once"})]),
        error(503),  # the model call after the tool fails once ...
        text("done"),  # ... and its retry answers
    )
    async with running(cfg):
        tg.inject_message(OWNER, "write the note", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
    assert tg.sent[0].visible_text == "done"
    assert len(llm.requests) == 3
    # the retry repeated that one model call, with the tool's result; not the turn
    assert llm.requests[1]["messages"] == llm.requests[2]["messages"]
    msgs = llm.requests[2]["messages"]
    assert sum(1 for m in msgs if m.get("role") == "tool") == 1
    assert sum(1 for m in msgs if m.get("tool_calls")) == 1
    assert (cfg.agent.workspace / "note.txt").read_text() == "written once"
