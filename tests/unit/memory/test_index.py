"""One agent's index in a state database, against the meaning-aware fake /v1/embeddings:
embedded once per text and model, a model change re-embedded while full-text serves, a spent
budget searched by words (and the tool says so), two agents never mixed."""

from __future__ import annotations

import time

import pytest

from bot.agent.tools import ToolContext
from bot.agent.tools.memory import MEMORY_SEARCH
from bot.config import agent_config, parse_config
from bot.memory import memory_index
from bot.store import Store
from tests.fakes.embeddings import FakeEmbeddings

QUESTION = "When is the celebration for the kid?"
NOTES = {
    "MEMORY.md": "# Family\n\nAnna's birthday party: 12 March.\n",
    "memory/car.md": "# Car\n\nCar service booked for Tuesday at the garage.\n",
    "memory/2025/food.md": "# Food\n\nTry the new pizza place near the office.\n",
}


@pytest.fixture
async def emb():
    async with FakeEmbeddings() as fake:
        yield fake


def make(tmp_path, emb, model="openai/fake-embed", **agent):
    ws = tmp_path / "ws"
    for rel, body in NOTES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(body)
    cfg = parse_config(
        {
            "agent": {
                "workspace": str(ws),
                "state_dir": str(tmp_path / "state"),
                "model": "openai/chat",
                "api_base": "http://127.0.0.1:9/v1",
                **agent,
            },
            "memory": {"embedding_model": model, "embedding_api_base": emb.base_url},
        }
    )
    return cfg


async def test_each_text_is_embedded_once_per_model(tmp_path, emb):
    cfg = make(tmp_path, emb)
    store = Store(cfg.db_path)
    index = memory_index(cfg, store)
    assert await index.refresh() == 3
    assert await index.refresh() == 0  # nothing new
    await index.stop()
    again = memory_index(cfg, store)  # a restart: the vectors are in the database
    assert await again.refresh() == 0 and len(emb.inputs) == 3
    found = await again.search(QUESTION, 3)
    assert found.hits[0].path == "MEMORY.md" and not found.words_only
    assert emb.inputs[-1] == QUESTION
    await again.stop()


async def test_a_model_change_re_embeds_while_full_text_serves(tmp_path, emb):
    store = Store(make(tmp_path, emb).db_path)
    old = memory_index(make(tmp_path, emb), store)
    await old.refresh()
    await old.stop()
    new = memory_index(make(tmp_path, emb, model="openai/fake-embed-2"), store)
    before = new.status()
    assert (before.vectors, before.other_vectors) == (0, 3)  # re-embedding to do
    # nothing embedded with the new model yet: the words still find the notes
    found = await new.search("pizza", 3)
    assert found.hits[0].path == "memory/2025/food.md"
    assert found.words_only == "no note has been embedded yet"
    assert await new.refresh() == 3
    after = new.status()
    assert (after.vectors, after.other_vectors) == (3, 0)  # the old model's vectors dropped
    assert (await new.search(QUESTION, 3)).hits[0].path == "MEMORY.md"
    await new.stop()


async def test_a_spent_budget_searches_by_words_and_says_so(tmp_path, emb):
    cfg = make(tmp_path, emb, daily_cost_limit_usd=0.5)
    store = Store(cfg.db_path)
    index = memory_index(cfg, store)
    await index.refresh()
    store.add_usage("s", "t", "openai/chat", cost_usd=1.0, agent="main", created=time.time())
    n = len(emb.inputs)
    ctx = ToolContext(file_root=cfg.agent.workspace, memory=index)
    out = await MEMORY_SEARCH.handler(ctx, {"query": "pizza"})
    assert out.startswith("memory/2025/food.md:")
    assert "searched by words only: today's model budget is used up" in out
    assert len(emb.inputs) == n  # no call made
    # twin: with budget left the same search is by meaning
    store.db.execute("DELETE FROM usage WHERE cost_usd >= 1")
    out = await MEMORY_SEARCH.handler(ctx, {"query": QUESTION})
    assert out.startswith("MEMORY.md:") and "words only" not in out
    await index.stop()


async def test_two_agents_in_one_database_never_mix(tmp_path, emb):
    cfg = make(tmp_path, emb)
    work_ws = tmp_path / "ws-work"
    work_ws.mkdir()
    (work_ws / "MEMORY.md").write_text("# Work\n\nQuarterly project meeting with colleagues.\n")
    cfg = parse_config(
        {
            **cfg.model_dump(mode="json", exclude={"source"}),
            "agents": {"work": {"workspace": str(work_ws)}},
        }
    )
    store = Store(cfg.db_path)
    main = memory_index(cfg, store)
    work = memory_index(agent_config(cfg, "work"), store)
    await main.refresh()
    await work.refresh()
    assert [h.path for h in (await work.search(QUESTION, 5)).hits] == ["MEMORY.md"]
    assert "Quarterly" in (await work.search(QUESTION, 5)).hits[0].snippet  # its own only
    assert all("Quarterly" not in h.snippet for h in (await main.search("meeting", 5)).hits)
    # twin: each finds its own note
    assert "Quarterly" in (await work.search("office meeting", 5)).hits[0].snippet
    assert "Anna" in (await main.search(QUESTION, 5)).hits[0].snippet
    await main.stop()
    await work.stop()


async def test_removed_and_changed_files_leave_the_results(tmp_path, emb):
    cfg = make(tmp_path, emb)
    index = memory_index(cfg, Store(cfg.db_path))
    await index.refresh()
    (cfg.agent.workspace / "memory/2025/food.md").unlink()
    car = cfg.agent.workspace / "memory/car.md"
    car.write_text("# Car\n\nSold the car last week.\n")
    found = await index.search("pizza garage", 5)
    assert found.hits == [] or all(
        "pizza" not in h.snippet and "garage" not in h.snippet for h in found.hits
    )
    assert await index.refresh() == 1  # the new text of car.md, embedded in the background
    assert (await index.search("sold", 5)).hits[0].path == "memory/car.md"
    await index.stop()


async def test_an_unchanged_workspace_writes_nothing_and_a_change_is_indexed(tmp_path, emb):
    """The background check runs every few seconds for every agent: when no file changed
    it only reads (no write to the state database); a changed file is indexed again."""
    cfg = make(tmp_path, emb)
    store = Store(cfg.db_path)
    index = memory_index(cfg, store)
    assert index.sync_files() == 3
    before = store.db.total_changes
    assert index.sync_files() == 0
    assert store.db.total_changes == before  # nothing written
    (cfg.agent.workspace / "MEMORY.md").write_text("# Family\n\nAnna's party moved to April.\n")
    assert index.sync_files() == 1
    assert (await index.search("April", 1)).hits[0].path == "MEMORY.md"
    await index.stop()
