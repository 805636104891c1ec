"""Several agents in one daemon, end to end: the fake Telegram server → the daemon → the fake
LLM, which records every request (its system prompt, its history, its tool results).

Two owners write to one bot; a ``[[bindings]]`` entry gives chat 43 to agent ``work``, every
other chat goes to the default agent ``main``.  One test per invariant of what an agent owns,
each with its twin: the prompt and the tools see only the agent's own workspace (1), sessions
are per agent (2), heartbeats and cron jobs belong to an agent (5), usage is recorded per agent
(6), an agent whose model fails answers with its own error (7); the HTTP API chooses an agent by
its model name; 200 messages over two agents never cross."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re

import openai
import pytest

from bot.cli import main as cli_main
from tests.e2e import make_config, running, system_prompt, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.e2e.test_first_hour import chela
from tests.fakes.llm import last_user_text, text, tool_calls

MAIN_OWNER, WORK_OWNER = 42, 43
MAIN_SECRET = "MAIN-SECRET-heron"
WORK_NOTE = "WORK-NOTE-otter"
TOKEN = "test-api-token-0123456789"
RULES = {"main": "RULES-main-kestrel", "work": "RULES-work-badger"}  # each AGENTS.md


def two_agents(tmp_path, llm, tg=None, work: dict | None = None, **sections):
    """``main`` (workspace ws) and ``work`` (workspace ws-work), chat 43 bound to work; each
    workspace has a MEMORY.md of its own."""
    channels = sections.pop("channels", {})
    if tg is not None:
        channels = {**channels, **telegram_section(tg, allow_from=["42", "43"])}
    cfg = make_config(
        tmp_path,
        llm,
        channels=channels,
        agents={"work": {"workspace": str(tmp_path / "ws-work"), **(work or {})}},
        bindings=[{"agent": "work", "channel": "telegram", "chat": str(WORK_OWNER)}],
        **sections,
    )
    for ws, name in ((tmp_path / "ws", "main"), (tmp_path / "ws-work", "work")):
        ws.mkdir(parents=True, exist_ok=True)
        note = MAIN_SECRET if name == "main" else WORK_NOTE
        (ws / "MEMORY.md").write_text(f"# Memory\n\n{note}\n")
        (ws / "AGENTS.md").write_text(f"# Rules\n\nYou are {RULES[name]}.\n")
    return cfg


def texts(tg, chat: int) -> list[str]:
    return [m.visible_text for m in tg.sent if m.chat_id == chat]


def tool_results(request: dict) -> list[str]:
    return [m.get("content", "") for m in request["messages"] if m.get("role") == "tool"]


def seen(llm, word: str) -> list[dict]:
    """The model requests whose messages contain ``word``."""
    return [r for r in llm.requests if word in json.dumps(r["messages"])]


# ------------------------------------------------------------------- 1: workspace
async def test_each_agents_prompt_is_built_from_its_own_workspace(tmp_path, llm, tg):
    cfg = two_agents(tmp_path, llm, tg)
    async with running(cfg) as d:
        tg.inject_message(WORK_OWNER, "hello work", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=15)
        tg.inject_message(MAIN_OWNER, "hello main", from_id=MAIN_OWNER)
        await tg.wait_for(lambda: texts(tg, MAIN_OWNER), timeout=15)
        await settled(d, tg_taken(tg))
    work_req, main_req = llm.requests
    assert WORK_NOTE in system_prompt(work_req) and MAIN_SECRET not in json.dumps(work_req)
    # the twin: the default agent's prompt is made of its own workspace
    assert MAIN_SECRET in system_prompt(main_req) and WORK_NOTE not in json.dumps(main_req)


async def test_agent_work_cannot_read_mains_memory_by_path_or_search(tmp_path, llm, tg):
    cfg = two_agents(tmp_path, llm, tg)
    main_memory = tmp_path / "ws" / "MEMORY.md"
    llm.script(
        tool_calls(
            [
                ("read", {"path": str(main_memory)}),
                ("read", {"path": "../ws/MEMORY.md"}),
                ("memory_get", {"path": str(main_memory)}),
                ("memory_get", {"path": "../ws/MEMORY.md"}),
                ("memory_search", {"query": "heron"}),
            ]
        ),
        text("done"),
    )
    async with running(cfg) as d:
        tg.inject_message(WORK_OWNER, "look around", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=15)
        await settled(d, tg_taken(tg))
    results = tool_results(llm.requests[1])
    assert len(results) == 5
    assert all(MAIN_SECRET not in r for r in results), results
    assert texts(tg, WORK_OWNER) == ["done"]


async def test_agent_work_finds_its_own_notes(tmp_path, llm, tg):
    """The twin: the same tools find what is in work's own workspace."""
    cfg = two_agents(tmp_path, llm, tg)
    llm.script(
        tool_calls(
            [
                ("read", {"path": "MEMORY.md"}),
                ("memory_get", {"path": "MEMORY.md"}),
                ("memory_search", {"query": "otter"}),
            ]
        ),
        text("done"),
    )
    async with running(cfg) as d:
        tg.inject_message(WORK_OWNER, "look around", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=15)
        await settled(d, tg_taken(tg))
    results = tool_results(llm.requests[1])
    assert len(results) == 3, results
    assert all("WORK-NOTE" in r and "otter" in r for r in results), results  # search marks hits


# ------------------------------------------------------------------- 2: sessions
async def test_sessions_history_and_new_are_per_agent(tmp_path, llm, tg):
    cfg = two_agents(tmp_path, llm, tg)
    llm.default = lambda req: text("re: " + last_user_text(req).split()[-1])
    async with running(cfg) as d:
        for chat, word in ((MAIN_OWNER, "main-one"), (WORK_OWNER, "work-one")):
            tg.inject_message(chat, f"say {word}", from_id=chat)
            await tg.wait_for(lambda c=chat: texts(tg, c), timeout=15)
        tg.inject_message(WORK_OWNER, "/new", from_id=WORK_OWNER)  # work's session only
        await tg.wait_for(lambda: len(texts(tg, WORK_OWNER)) == 2, timeout=15)
        for chat, word in ((MAIN_OWNER, "main-two"), (WORK_OWNER, "work-two")):
            tg.inject_message(chat, f"say {word}", from_id=chat)
            await tg.wait_for(lambda c=chat: len(texts(tg, c)) >= 2 + (c == WORK_OWNER), 15)
        await settled(d, tg_taken(tg))
        keys = {r[0] for r in d.store.db.execute("SELECT key FROM sessions").fetchall()}
    assert {"agent:main:main", "agent:work:main"} <= keys
    main_two, work_two = seen(llm, "main-two")[0], seen(llm, "work-two")[0]
    # the default agent's history is still there after work's /new; work's is gone
    assert "main-one" in json.dumps(main_two["messages"])
    assert "work-one" not in json.dumps(work_two["messages"])
    # and neither ever saw the other's conversation
    assert all("work-" not in json.dumps(r["messages"]) for r in seen(llm, "main-"))
    assert all("main-" not in json.dumps(r["messages"]) for r in seen(llm, "work-"))


async def test_model_is_per_agent_session(tmp_path, llm, tg):
    """``/model`` in work's chat sets work's session only; the twin: main's keeps its model."""
    cfg = two_agents(tmp_path, llm, tg, work={"models": {"other": "openai/other-model"}})
    async with running(cfg) as d:
        tg.inject_message(WORK_OWNER, "/model other", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=15)
        for chat in (WORK_OWNER, MAIN_OWNER):
            tg.inject_message(chat, "hi", from_id=chat)
            await tg.wait_for(lambda c=chat: len(texts(tg, c)) >= 1 + (c == WORK_OWNER), 15)
        await settled(d, tg_taken(tg))
    models = {
        ("work" if WORK_NOTE in system_prompt(r) else "main"): r["model"] for r in llm.requests
    }
    assert models == {"work": "other-model", "main": "fake-model"}


# ------------------------------------------------------------------- 5: heartbeat, cron
async def test_heartbeats_and_cron_jobs_belong_to_an_agent(tmp_path, llm, tg):
    cfg = two_agents(
        tmp_path,
        llm,
        tg,
        cron=[
            {"name": "work-job", "every": "1h", "prompt": "work job", "agent": "work"},
            {"name": "main-job", "every": "1h", "prompt": "main job"},
        ],
    )
    (tmp_path / "ws-work" / "HEARTBEAT.md").write_text("- check the work inbox\n")
    async with running(cfg, scheduler=False) as d:
        # the owner's last direct chat, on an account bound to both agents
        tg.inject_message(WORK_OWNER, "hi", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=15)
        await settled(d, tg_taken(tg))
        llm.script(text("work heartbeat alert"))
        out = await d.scheduled.heartbeat(agent="work")
        assert out.status == "delivered", out.describe()
        await d.scheduled.run_cron("work-job", "work job", "last", "", "work")
        await d.scheduled.run_cron("main-job", "main job", "last", "")  # the twin: no agent
        await settled(d, tg_taken(tg))
        keys = {r[0] for r in d.store.db.execute("SELECT DISTINCT session_key FROM usage")}
        rows = d.store.db.execute("SELECT agent, kind FROM outbox ORDER BY id").fetchall()
    hb, work_job, main_job = llm.requests[1:]
    assert "check the work inbox" in json.dumps(hb) and RULES["work"] in system_prompt(hb)
    assert RULES["work"] in system_prompt(work_job) and RULES["main"] not in json.dumps(work_job)
    assert RULES["main"] in system_prompt(main_job) and RULES["work"] not in json.dumps(main_job)
    assert {"agent:work:main", "agent:work:cron:work-job", "agent:main:cron:main-job"} <= keys
    assert ("work", "heartbeat") in rows and ("work", "cron") in rows and ("main", "cron") in rows


async def test_each_agent_has_its_own_heartbeat_job(tmp_path, llm):
    cfg = two_agents(tmp_path, llm, work={"heartbeat": {"every": "2h"}}, heartbeat={"every": "30m"})
    async with running(cfg) as d:
        await asyncio.wait_for(d.cron.booted.wait(), 10)
        jobs = {j["name"]: j["schedule"] for j in d.cron.jobs()}
    assert jobs == {"heartbeat": "every 30m", "heartbeat:work": "every 2h"}


# ------------------------------------------------------------------- 6: usage
async def test_usage_is_recorded_and_reported_per_agent(tmp_path, llm, tg, capsys):
    cfg = two_agents(tmp_path, llm, tg)
    async with running(cfg) as d:
        for chat in (WORK_OWNER, MAIN_OWNER, MAIN_OWNER):
            tg.inject_message(chat, "hi", from_id=chat)
            await settled(d, tg_taken(tg))
        rows = d.store.usage_rows(0)
    assert sorted(r["agent"] for r in rows) == ["main", "main", "work"]
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'[agents.work]\nworkspace = "{tmp_path / "ws-work"}"\n'
    )
    capsys.readouterr()
    reports = {}
    for agent in ("work", "main"):
        assert cli_main(["usage", "--agent", agent, "--json", "--config", str(cfg_file)]) == 0
        reports[agent] = json.loads(capsys.readouterr().out)["total"]["calls"]
    assert reports == {"work": 1, "main": 2}
    # an unknown agent: exit 2 naming it, never everybody's usage
    assert cli_main(["usage", "--agent", "wrok", "--config", str(cfg_file)]) == 2
    assert "unknown agent 'wrok'" in capsys.readouterr().err


# ------------------------------------------------------------------- 7: failures
async def test_an_agent_whose_model_fails_answers_with_its_own_error(tmp_path, llm, tg):
    dead = "http://127.0.0.1:9"  # nothing listens on the discard port
    cfg = two_agents(
        tmp_path, llm, tg, work={"api_base": dead, "model": "openai/work-model", "fallbacks": []}
    )
    llm.default = lambda req: text("main's answer")
    async with running(cfg) as d:
        tg.inject_message(WORK_OWNER, "are you there?", from_id=WORK_OWNER)
        await tg.wait_for(lambda: texts(tg, WORK_OWNER), timeout=30)
        # the twin: the default agent still answers with its model
        tg.inject_message(MAIN_OWNER, "are you there?", from_id=MAIN_OWNER)
        await tg.wait_for(lambda: texts(tg, MAIN_OWNER), timeout=15)
        await settled(d, tg_taken(tg))
    (work_reply,) = texts(tg, WORK_OWNER)
    assert "main's answer" not in work_reply and "model" in work_reply.lower()
    assert texts(tg, MAIN_OWNER) == ["main's answer"]
    assert len(llm.requests) == 1 and MAIN_SECRET in system_prompt(llm.requests[0])


# ------------------------------------------------------------------- the HTTP API
@contextlib.asynccontextmanager
async def api(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("TEST_HTTP_TOKEN", TOKEN)
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    cfg = two_agents(tmp_path, llm, channels={"http": http})
    async with running(cfg) as d:
        base = f"http://127.0.0.1:{d.channels['http'].bound_port}/v1"
        client = openai.AsyncOpenAI(base_url=base, api_key=TOKEN, max_retries=0)
        try:
            yield d, client, base
        finally:
            await client.close()


async def test_the_http_api_chooses_the_agent_by_model(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_, client, _base):
        say = [{"role": "user", "content": "hi"}]
        for model in ("chela/work", "chela/main", "gpt-4o"):
            await client.chat.completions.create(model=model, messages=say)
        listed = [m.id for m in (await client.models.list()).data]
        assert (await client.models.retrieve("chela/work")).id == "chela/work"
    work, main, other = llm.requests
    assert WORK_NOTE in system_prompt(work) and MAIN_SECRET not in json.dumps(work)
    assert MAIN_SECRET in system_prompt(main)
    assert MAIN_SECRET in system_prompt(other)  # any other name: the default agent, as today
    assert listed == ["chela/main", "chela/work"]


async def test_an_unknown_agent_model_is_404_without_a_model_call(tmp_path, llm, monkeypatch):
    async with api(tmp_path, llm, monkeypatch) as (_, client, _base):
        with pytest.raises(openai.NotFoundError) as e:
            await client.chat.completions.create(
                model="chela/nobody", messages=[{"role": "user", "content": "hi"}]
            )
        assert e.value.code == "model_not_found" and "chela/nobody" in str(e.value)
        with pytest.raises(openai.NotFoundError):
            await client.models.retrieve("chela/nobody")
        # the twin: an agent that exists answers
        r = await client.chat.completions.create(
            model="chela/work", messages=[{"role": "user", "content": "hi"}]
        )
        assert r.choices[0].message.content == "ok"
    assert len(llm.requests) == 1 and WORK_NOTE in system_prompt(llm.requests[0])


# ------------------------------------------------------------------- chela chat --agent
async def test_chat_talks_to_the_agent_named(tmp_path, llm):
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        f'model = "openai/fake-model"\napi_base = "{llm.base_url}"\n[heartbeat]\nevery = "0m"\n'
        f'[agents.work]\nworkspace = "{tmp_path / "ws-work"}"\n'
    )
    (tmp_path / "ws-work").mkdir()
    (tmp_path / "ws-work" / "MEMORY.md").write_text(WORK_NOTE)
    done = await chela("chat", "--agent", "work", "-m", "hi", "--config", str(cfg_file))
    assert done.returncode == 0, done.stderr
    assert WORK_NOTE in system_prompt(llm.requests[-1])
    done = await chela("chat", "-m", "hi", "--config", str(cfg_file))  # the twin: main
    assert done.returncode == 0 and WORK_NOTE not in json.dumps(llm.requests[-1])
    done = await chela("chat", "--agent", "wrok", "-m", "hi", "--config", str(cfg_file))
    assert done.returncode == 2 and "unknown agent 'wrok'" in done.stderr
    assert len(llm.requests) == 2


# ------------------------------------------------------------------- load
async def test_two_hundred_messages_over_two_agents_never_cross(tmp_path, llm, tg):
    """Four chats (two per agent, bound by chat), 50 messages each, all at once: every model
    request carries the texts of its own agent's chats only, every chat gets its 50 answers."""
    chats = {44: "main", 45: "main", 46: "work", 47: "work"}
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, allow_from=[str(c) for c in chats]),
        agents={"work": {"workspace": str(tmp_path / "ws-work")}},
        bindings=[
            {"agent": "work", "channel": "telegram", "chat": str(c)}
            for c, a in chats.items()
            if a == "work"
        ],
        session={"dm_scope": "per-peer"},
    )
    (tmp_path / "ws-work").mkdir()
    (tmp_path / "ws-work" / "MEMORY.md").write_text(WORK_NOTE)
    llm.default = lambda req: text("re: " + last_user_text(req).split()[-1])
    async with running(cfg) as d:
        for i in range(50):
            for chat, agent in chats.items():
                tg.inject_message(chat, f"{agent}-{chat}-{i}", from_id=chat)
        await tg.wait_for(lambda: all(len(texts(tg, c)) == 50 for c in chats), timeout=120)
        await settled(d, tg_taken(tg))
    said = re.compile(r"(main|work)-\d+-\d+\s*$")  # a chat turn (not a compaction summary)
    turns = [r for r in llm.requests if said.search(last_user_text(r))]
    assert len(turns) == 200
    for r in llm.requests:  # compaction summaries too
        texts_in = re.findall(r"(main|work)-(\d+)-\d+", json.dumps(r["messages"]))
        agents = {a for a, _ in texts_in}
        assert len(agents) == (1 if r in turns else len(agents)) <= 1, agents  # one agent's
        for agent in agents:
            assert all(chats[int(c)] == agent for _, c in texts_in)  # only its own chats
            if r in turns:  # the agent's own prompt
                assert (WORK_NOTE in system_prompt(r)) == (agent == "work")
    for chat, agent in chats.items():
        assert sorted(texts(tg, chat)) == sorted(f"re: {agent}-{chat}-{i}" for i in range(50))


# ------------------------------------------------------------------- the Control UI
async def test_the_control_ui_shows_and_filters_sessions_and_usage_by_agent(tmp_path, llm, tg):
    from tests.e2e.ui_client import ui_daemon, ui_config

    cfg = ui_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, allow_from=["42", "43"]),
        agents={"work": {"workspace": str(tmp_path / "ws-work")}},
        bindings=[{"agent": "work", "channel": "telegram", "chat": str(WORK_OWNER)}],
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        for chat in (WORK_OWNER, MAIN_OWNER, MAIN_OWNER):
            tg.inject_message(chat, "hi", from_id=chat)
            await settled(ui.daemon, tg_taken(tg))
        every = (await (await c.get("/ui/api/sessions")).json())["sessions"]
        work = (await (await c.get("/ui/api/sessions?agent=work")).json())["sessions"]
        usage = await (await c.get("/ui/api/usage?days=1&by=agent")).json()
        work_usage = await (await c.get("/ui/api/usage?days=1&agent=work")).json()
        bad = await c.get("/ui/api/usage?agent=wrok")
    assert {(s["key"], s["agent"]) for s in every} == {
        ("agent:main:main", "main"),
        ("agent:work:main", "work"),
    }
    assert [s["key"] for s in work] == ["agent:work:main"]  # the filter, and its twin above
    assert [(r["key"], r["calls"]) for r in usage["rows"]] == [("main", 2), ("work", 1)]
    assert work_usage["total"]["calls"] == 1 and usage["total"]["calls"] == 3
    assert bad.status == 400


async def test_every_agents_workspace_is_made_with_its_starter_files(tmp_path, llm):
    cfg = make_config(tmp_path, llm, agents={"work": {"workspace": str(tmp_path / "ws-work")}})
    (tmp_path / "ws-work").mkdir()
    (tmp_path / "ws-work" / "AGENTS.md").write_text("mine")
    async with running(cfg):
        pass
    assert (tmp_path / "ws" / "AGENTS.md").is_file()  # made, as with one agent
    assert (tmp_path / "ws-work" / "AGENTS.md").read_text() == "mine"  # an existing one is kept
    cfg = make_config(tmp_path, llm, agents={"new": {"workspace": str(tmp_path / "ws-new")}})
    async with running(cfg):
        pass
    assert (tmp_path / "ws-new" / "AGENTS.md").is_file()


async def test_a_held_pairing_message_is_answered_by_the_agent_its_binding_chose(tmp_path, llm, tg):
    stranger = 77
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg),
        agents={"work": {"workspace": str(tmp_path / "ws-work")}},
        bindings=[{"agent": "work", "channel": "telegram", "chat": str(stranger)}],
    )
    (tmp_path / "ws-work").mkdir()
    (tmp_path / "ws-work" / "AGENTS.md").write_text(RULES["work"])  # a guest's prompt has it
    async with running(cfg) as d:
        tg.inject_message(stranger, "let me in", from_id=stranger)
        await tg.wait_for(lambda: texts(tg, stranger) and texts(tg, MAIN_OWNER), timeout=15)
        code = texts(tg, stranger)[0].split("Pairing code: ")[1][:8]
        assert llm.requests == []
        tg.inject_message(MAIN_OWNER, f"/pair approve {code}", from_id=MAIN_OWNER)
        await tg.wait_for(lambda: len(texts(tg, stranger)) >= 3, timeout=15)
        await settled(d, tg_taken(tg))
        rows = d.store.db.execute("SELECT session_key, agent FROM inbound WHERE chat_id='77'")
        held = {(k.split(":")[1], a) for k, a in rows.fetchall()}
    (req,) = llm.requests  # the held message, answered by agent work
    assert "let me in" in last_user_text(req) and RULES["work"] in system_prompt(req)
    assert held == {("work", "work")}
