"""Memory search by meaning, end to end: the fake Telegram server → the daemon → the fake LLM,
scripted to call ``memory_search``, and the fake ``/v1/embeddings`` (tests/fakes/embeddings.py),
whose vectors put synonyms on one dimension and which records every text it embedded.

Each behaviour beside its twin: a question with no word in common with the note finds it by
meaning (full-text alone does not); unchanged chunks are never embedded again (restart,
reindex) and an edit re-embeds only its chunks; removed text leaves the results; with the
endpoint down full-text answers (one log line); embeddings are usage rows of the agent; a
guest's turn makes no embedding call; two agents' indexes never mix."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.cli import main as cli_main
from tests.e2e import make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.embeddings import FakeEmbeddings
from tests.fakes.llm import text, tool_calls

OWNER, WORK_OWNER, GROUP = 42, 43, -100777
QUESTION = "When is the celebration for the kid?"
NOTES = {
    "memory/family.md": "# Family\n\nAnna's birthday party: 12 March.\n",
    "memory/car.md": "# Car\n\nCar service booked for Tuesday at the garage.\n",
    "memory/food.md": "# Food\n\nTry the new pizza place near the office.\n",
}


@pytest.fixture
async def emb():
    async with FakeEmbeddings() as fake:
        yield fake


def config(tmp_path, llm, tg, emb, *, meaning: bool = True, **sections):
    memory = {"embedding_model": "openai/fake-embed", "embedding_api_base": emb.base_url}
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(
            tg, allow_from=[str(OWNER), str(WORK_OWNER)], groups=[str(GROUP)]
        ),
        **({"memory": memory} if meaning else {}),
        **sections,
    )
    write(cfg.agent.workspace, NOTES)
    return cfg


def write(ws, files: dict[str, str]) -> None:
    for rel, body in files.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)


async def indexed(d, agent: str = "main", timeout: float = 20.0) -> None:
    """Every chunk text of the agent has its vector."""
    index = d.agents[agent].memory
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        s = index.status()
        if s.texts and s.vectors == s.texts:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not indexed in time: {s}")
        await asyncio.sleep(0.05)


async def search(d, tg, llm, query: str, chat: int = OWNER) -> str:
    """One owner turn whose model calls memory_search(query): the tool's result."""
    llm.script(tool_calls([("memory_search", {"query": query})]), text("ok"))
    before = len(llm.requests)
    tg.inject_message(chat, "look it up", from_id=chat)
    await llm.wait_for_requests(before + 2, timeout=20)
    await settled(d, tg_taken(tg))
    return tool_result(llm.requests[before + 1])


def tool_result(request: dict) -> str:
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"][-1]


# ------------------------------------------------------------------- by meaning
async def test_a_question_with_no_shared_word_finds_the_note_by_meaning(tmp_path, llm, tg, emb):
    cfg = config(tmp_path, llm, tg, emb)
    async with running(cfg) as d:
        await indexed(d)
        out = await search(d, tg, llm, QUESTION)
        # the embeddings are usage rows of the agent, under the embedding model
        rows = [r for r in d.store.usage_rows(0) if r["kind"] == "embedding"]
    assert out.splitlines()[0].startswith("memory/family.md:"), out
    assert "12 March" in out and "words only" not in out
    assert rows and {(r["model"], r["agent"]) for r in rows} == {("openai/fake-embed", "main")}
    assert sum(r["prompt_tokens"] for r in rows) > 0


async def test_twin_full_text_alone_does_not_find_it(tmp_path, llm, tg, emb):
    cfg = config(tmp_path, llm, tg, emb, meaning=False)
    async with running(cfg) as d:
        out = await search(d, tg, llm, QUESTION)
    assert "family.md" not in out, out  # no word in common
    assert emb.inputs == []  # without embedding_model nothing is embedded


# ------------------------------------------------------------------- embedded once
async def test_unchanged_chunks_are_never_embedded_again_and_an_edit_only_its_own(
    tmp_path, llm, tg, emb, capsys
):
    cfg = config(tmp_path, llm, tg, emb)
    async with running(cfg) as d:
        await indexed(d)
    first = list(emb.inputs)
    assert len(first) == len(NOTES)
    async with running(cfg) as d:  # a restart reads the files again: nothing to embed
        await indexed(d)
        await asyncio.sleep(2.5)  # one more look at the files
        assert emb.inputs == first
        write(cfg.agent.workspace, {"memory/car.md": "# Car\n\nCar sold last week.\n"})
        await _until(lambda: emb.count("Car sold"))
        await indexed(d)
        assert emb.inputs[len(first) :] == ["# Car\n\nCar sold last week."]
        (cfg.agent.workspace / "memory/food.md").unlink()
        await asyncio.sleep(0.1)
        out = await search(d, tg, llm, "pizza")
        assert "food.md" not in out and "pizza" not in out, out  # removed text leaves
    # chela memory reindex embeds nothing that has its vector; --force embeds all again
    n = len(emb.inputs)
    assert (
        await asyncio.to_thread(cli_main, ["--config", _toml(cfg, tmp_path), "memory", "reindex"])
        == 0
    )
    assert len(emb.inputs) == n  # every chunk text has its vector: nothing to embed
    assert (
        await asyncio.to_thread(
            cli_main, ["--config", _toml(cfg, tmp_path), "memory", "reindex", "--force"]
        )
        == 0
    )
    assert sorted(emb.inputs[n:]) == sorted([*first[1:2], "# Car\n\nCar sold last week."])
    capsys.readouterr()


async def _until(predicate, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def _toml(cfg, tmp_path) -> str:
    import json

    a = cfg.agent
    lines = [
        "[agent]",
        f"workspace = {json.dumps(str(a.workspace))}",
        f"state_dir = {json.dumps(str(a.state_dir))}",
        f"model = {json.dumps(a.model)}",
        f"api_base = {json.dumps(a.api_base)}",
        "[memory]",
        f"embedding_model = {json.dumps(cfg.memory.embedding_model)}",
        f"embedding_api_base = {json.dumps(cfg.memory.embedding_api_base)}",
    ]
    path = tmp_path / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# ------------------------------------------------------------------- outage
async def test_endpoint_down_full_text_answers_with_one_log_line(tmp_path, llm, tg, emb, caplog):
    cfg = config(tmp_path, llm, tg, emb)
    caplog.set_level(logging.INFO, logger="chela.memory")
    async with running(cfg) as d:
        await indexed(d)
        emb.go_down()
        out1 = await search(d, tg, llm, "pizza")
        out2 = await search(d, tg, llm, "garage")
        emb.come_up()
        # twin: once it answers again (and the pause after the failure is over), a search is
        # by meaning again
        await _until(lambda: not d.agents["main"].memory.embedder.resting())
        out3 = await search(d, tg, llm, QUESTION)
    assert out1.startswith("memory/food.md:") and "searched by words only" in out1
    assert out2.startswith("memory/car.md:") and "searched by words only" in out2
    assert out3.startswith("memory/family.md:") and "words only" not in out3
    down = [r for r in caplog.records if "does not answer" in r.getMessage()]
    assert len(down) == 1, [r.getMessage() for r in caplog.records]


# ------------------------------------------------------------------- guests
async def test_a_guest_turn_makes_no_embedding_call(tmp_path, llm, tg, emb):
    cfg = config(tmp_path, llm, tg, emb, tools={"guest": ["session_status"]})
    async with running(cfg) as d:
        await indexed(d)
        n = len(emb.inputs)
        llm.script(tool_calls([("memory_search", {"query": QUESTION})]), text("ok"))
        tg.inject_message(
            GROUP,
            "@chela_bot when is the party?",
            from_id=OWNER,  # in a group even the owner's turn is a guest's
            chat_type="supergroup",
            title="Friends",
            entities=[{"type": "mention", "offset": 0, "length": 10}],
        )
        await llm.wait_for_requests(2, timeout=20)
        await settled(d, tg_taken(tg))
        guest_result = tool_result(llm.requests[1])
        assert len(emb.inputs) == n, emb.inputs[n:]
        assert "12 March" not in guest_result
        # twin: the owner's same call embeds the question
        out = await search(d, tg, llm, QUESTION)
    assert emb.inputs[n:] == [QUESTION]
    assert out.startswith("memory/family.md:")


# ------------------------------------------------------------------- two agents
async def test_two_agents_indexes_never_mix(tmp_path, llm, tg, emb):
    cfg = config(
        tmp_path,
        llm,
        tg,
        emb,
        agents={"work": {"workspace": str(tmp_path / "ws-work")}},
        bindings=[{"agent": "work", "channel": "telegram", "chat": str(WORK_OWNER)}],
    )
    write(
        tmp_path / "ws-work",
        {"MEMORY.md": "# Work\n\nQuarterly project meeting with colleagues.\n"},
    )
    async with running(cfg) as d:
        await indexed(d, "main")
        await indexed(d, "work")
        work_out = await search(d, tg, llm, QUESTION, chat=WORK_OWNER)
        main_out = await search(d, tg, llm, "office meeting", chat=OWNER)
        work_twin = await search(d, tg, llm, "office meeting", chat=WORK_OWNER)
    assert "family.md" not in work_out and "March" not in work_out, work_out
    assert "MEMORY.md" not in main_out and "Quarterly" not in main_out, main_out
    assert work_twin.startswith("MEMORY.md:") and "Quarterly" in work_twin  # its own note
