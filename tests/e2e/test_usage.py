"""Usage and cost per model call, /usage, `chela usage`, daily cost limits (SPEC §12), and
`chela check` on model strings; end to end through fake Telegram / HTTP and the fake LLM."""

from __future__ import annotations

import json

import aiohttp
import pytest

from bot.cli import main as cli_main
from bot.store import Store
from bot.reports.usage import budget_refusal, day_start
from tests.e2e import config_file, make_config, running, telegram_section
from tests.fakes.llm import text, tool_calls, usage
from tests.model_paths import model_path  # noqa: F401 - the fixture, used below

# every test here runs on both model paths (SPEC §12: one contract, two paths)
pytestmark = pytest.mark.usefixtures("model_path")

OWNER = 42
PRICED = "openai/gpt-4o-mini"  # in litellm's local cost map


def _prices() -> tuple[float, float, float]:
    from bot.model.litellm_path import warm_up

    info = warm_up().get_model_info(model="gpt-4o-mini", custom_llm_provider="openai")
    return (
        info["input_cost_per_token"],
        info["output_cost_per_token"],
        info["cache_read_input_token_cost"],
    )


async def test_usage_rows_and_cost_per_model_call(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, agent={"model": PRICED}, channels=telegram_section(tg))
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "a.txt").write_text("apple")
    llm.script(
        tool_calls([("read", {"path": "a.txt"})], usage=usage(1000, 20)),
        text("it says apple", usage=usage(1200, 50, cached=1000)),
    )
    async with running(cfg) as d:
        tg.inject_message(OWNER, "what is in a.txt?", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        rows = d.store.usage_rows(0)
    inp, out, read = _prices()
    assert [(r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"]) for r in rows] == [
        (1000, 20, 0),
        (1200, 50, 1000),
    ]
    assert {r["model"] for r in rows} == {PRICED}
    assert {r["session_key"] for r in rows} == {"agent:main:main"}
    assert len({r["turn"] for r in rows}) == 1 and rows[0]["turn"]  # one turn, two calls
    assert rows[0]["cost_usd"] == pytest.approx(1000 * inp + 20 * out)
    assert rows[1]["cost_usd"] == pytest.approx(200 * inp + 1000 * read + 50 * out)
    assert rows[1]["cost_usd"] > 0 and read < inp  # cached tokens are cheaper


async def test_unknown_model_costs_zero_and_usage_command_answers(tmp_path, llm, tg):
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))  # openai/fake-model
    llm.script(text("hi", usage=usage(300, 7)))
    async with running(cfg) as d:
        tg.inject_message(OWNER, "hello", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(OWNER, "/usage", from_id=OWNER)
        await tg.wait_for_sent(2, timeout=15)
        rows = d.store.usage_rows(0)
    assert [(r["prompt_tokens"], r["cost_usd"]) for r in rows] == [(300, 0.0)]
    answer = tg.sent[1].visible_text
    assert "This conversation today: $0.0000 over 1 model call (300 prompt / 7 completion" in answer
    assert "All conversations today" in answer
    assert len(llm.requests) == 1  # /usage never calls the model


async def test_daily_limit_stops_calls_with_a_clear_message(tmp_path, llm, tg):
    cfg = make_config(
        tmp_path,
        llm,
        agent={"model": PRICED, "daily_cost_limit_usd": 0.001},
        channels={**telegram_section(tg), "http": {"enabled": True, "listen": "127.0.0.1:0"}},
    )
    # 10,000 prompt tokens of gpt-4o-mini cost $0.0015: over the limit after one call
    llm.script(text("first answer", usage=usage(10_000, 10)))
    async with running(cfg) as d:
        tg.inject_message(OWNER, "one", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        assert tg.sent[0].visible_text == "first answer"
        tg.inject_message(OWNER, "two", from_id=OWNER)
        await tg.wait_for_sent(2, timeout=15)
        refusal = tg.sent[1].visible_text
        assert "budget of $0.0010 (agent.daily_cost_limit_usd) is used up" in refusal
        assert "no more model calls until midnight" in refusal
        assert len(llm.requests) == 1  # the model was not called again
        history = d.store.history("agent:main:main", limit=50, max_chars=100_000)
        assert refusal not in json.dumps(history)

        port = d.channels["http"].bound_port
        token = cfg.http_token_path.read_text().strip()
        async with aiohttp.ClientSession() as s:
            async with s.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {token}"},
            ) as r:
                assert r.status == 429
                body = await r.json()
        assert body["error"]["code"] == "daily_cost_limit"
        assert len(llm.requests) == 1


async def test_below_the_daily_limit_answers(tmp_path, llm, tg):
    """The twin: the same spend under a higher limit is answered both times."""
    cfg = make_config(
        tmp_path,
        llm,
        agent={"model": PRICED, "daily_cost_limit_usd": 1.0},
        channels=telegram_section(tg),
    )
    llm.script(text("first", usage=usage(10_000, 10)), text("second", usage=usage(10_000, 10)))
    async with running(cfg):
        tg.inject_message(OWNER, "one", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        tg.inject_message(OWNER, "two", from_id=OWNER)
        await tg.wait_for_sent(2, timeout=15)
    assert [m.visible_text for m in tg.sent] == ["first", "second"]


def test_guest_limit_counts_guests_only_and_days_roll_over(tmp_path, llm):
    cfg = make_config(
        tmp_path, llm, agent={"guest_daily_cost_limit_usd": 0.5, "timezone": "Europe/Berlin"}
    )
    store = Store(":memory:")
    now = day_start(cfg) + 12 * 3600  # noon today
    store.add_usage(
        "agent:main:main", "t1", "m", cost_usd=2.0, trust="owner", created=now, agent="main"
    )
    assert budget_refusal(cfg, store, "guest", now) is None  # the owner's spend is not the guests'
    assert budget_refusal(cfg, store, "owner", now) is None  # no owner limit set
    # another agent's guests spend their agent's budget, not this one's
    store.add_usage("g:y", "t3", "m", cost_usd=0.5, trust="guest", created=now, agent="work")
    assert budget_refusal(cfg, store, "guest", now) is None
    store.add_usage("guest:x", "t2", "m", cost_usd=0.5, trust="guest", created=now, agent="main")
    refusal = budget_refusal(cfg, store, "guest", now)
    assert refusal and "guests" in refusal and "tomorrow" in refusal
    assert budget_refusal(cfg, store, "owner", now) is None
    tomorrow = day_start(cfg, now + 86400) + 60
    assert budget_refusal(cfg, store, "guest", tomorrow) is None


async def test_chela_usage_json_and_table(tmp_path, llm, tg, capsys):
    cfg = make_config(tmp_path, llm, agent={"model": PRICED}, channels=telegram_section(tg))
    llm.script(text("a", usage=usage(100, 10)), text("b", usage=usage(200, 20, cached=50)))
    async with running(cfg):
        for i, t in enumerate(("one", "two"), start=1):
            tg.inject_message(OWNER, t, from_id=OWNER)
            await tg.wait_for_sent(i, timeout=15)
    path = config_file(
        tmp_path / "c.toml",
        llm,
        workspace=cfg.agent.workspace,
        state_dir=cfg.agent.state_dir,
    )
    capsys.readouterr()
    assert cli_main(["usage", "--config", str(path), "--json", "--days", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["days"] == 3
    assert report["total"]["calls"] == 2
    assert report["total"]["prompt_tokens"] == 300 and report["total"]["cached_tokens"] == 50
    assert report["total"]["cost_usd"] > 0
    [row] = report["rows"]
    assert row["model"] == PRICED and row["completion_tokens"] == 30
    assert cli_main(["usage", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert PRICED in out and "total" in out


def test_chela_usage_rejects_a_bad_days_value(capsys):
    with pytest.raises(SystemExit):
        cli_main(["usage", "--days", "0"])
    assert "at least 1" in capsys.readouterr().err


def _check(tmp_path, model: str, capsys, **extra) -> tuple[int, str]:
    lines = [
        "[agent]",
        f'model = "{model}"',
        f'workspace = "{tmp_path / "ws"}"',
        f'state_dir = "{tmp_path / "state"}"',
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in extra.items()]
    (tmp_path / "c.toml").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    rc = cli_main(["check", "--config", str(tmp_path / "c.toml")])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_check_rejects_an_unroutable_model_naming_the_key(tmp_path, capsys):
    rc, out = _check(tmp_path, "llama3.2", capsys)
    assert rc == 1
    assert "error: agent.model = 'llama3.2': litellm cannot route" in out
    assert '"ollama/llama3.2"' in out
    rc, out = _check(tmp_path, "openai/gpt-4o-mini", capsys, fallbacks=["mystery-model"])
    assert rc == 1
    assert "agent.fallbacks[0] = 'mystery-model'" in out and "error: agent.model" not in out


def test_check_accepts_a_routable_model(tmp_path, capsys):
    rc, out = _check(tmp_path, "openai/gpt-4o-mini", capsys, fallbacks=["ollama/llama3.2"])
    assert rc == 0, out
    assert "cannot route" not in out
    assert "fallback 0: ollama/llama3.2" in out


async def test_compaction_summary_calls_are_recorded_too(tmp_path, llm, tg):
    """Every model call counts, not only the loop's: /compact's summary request too."""
    from bot.agent.compaction import SUMMARY_INSTRUCTIONS

    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))

    def model(req):
        if req["messages"][0]["content"] == SUMMARY_INSTRUCTIONS:
            return text("Summary: greetings.", usage=usage(900, 40))
        return text("hello " * 50, usage=usage(100, 60))

    llm.default = model
    async with running(cfg) as d:
        for i in range(1, 4):
            tg.inject_message(OWNER, f"message {i} " + "words " * 100, from_id=OWNER)
            await tg.wait_for_sent(i, timeout=15)
        tg.inject_message(OWNER, "/compact", from_id=OWNER)
        await tg.wait_for_sent(4, timeout=15)
        rows = d.store.usage_rows(0)
    assert "Compacted" in tg.sent[3].visible_text
    kinds = [(r["kind"], r["prompt_tokens"]) for r in rows]
    assert kinds[:3] == [("chat", 100)] * 3
    # the memory flush before compacting (the main model) and the summary request
    assert ("compaction", 900) in kinds[3:] and {k for k, _ in kinds[3:]} == {"compaction"}
    assert {r["session_key"] for r in rows} == {"agent:main:main"}
