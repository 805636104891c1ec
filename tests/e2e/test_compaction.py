"""Compaction pieces (SPEC §10): the store's summary transaction, where a cut may fall, the
summary built without a model, memory_search ranking, config keys, and scheduled
sessions staying bounded."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from bot.agent.tools.memory import _search, chunk_lines
from bot.agent.compaction import choose_cut, fallback_summary, transcript_lines
from bot.config import ConfigError, parse_config
from bot.store import Store, WindowRow
from tests.e2e import make_config, running
from tests.fakes.llm import FakeLLM, text


def turn(i: int, *, tool: bool = False) -> list[dict]:
    user = {
        "role": "user",
        "content": f"[Message metadata]\ntime: 2025-01-0{i % 9 + 1} 10:00 UTC\n\n[Message]\nquestion {i}",
    }
    if not tool:
        return [user, {"role": "assistant", "content": f"answer {i}"}]
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a"}'},
            }
        ],
    }
    return [
        user,
        call,
        {"role": "tool", "tool_call_id": f"c{i}", "content": "file text " * 20},
        {"role": "assistant", "content": f"answer {i}"},
    ]


def rows_of(msgs: list[dict], tokens: int = 10) -> list[WindowRow]:
    return [WindowRow(i + 1, m["role"], m, tokens) for i, m in enumerate(msgs)]


# ------------------------------------------------------------------------------ store
def filled_store(path, n: int = 6) -> Store:
    s = Store(path)
    for i in range(n):
        s.commit_turn("k", f"t{i}", turn(i, tool=i % 2 == 0))
    return s


def test_summary_and_marks_are_one_transaction(tmp_path):
    s = filled_store(tmp_path / "db.sqlite3")
    before = s.window("k", limit=1000)
    # a failure between inserting the summary and marking the messages it replaces
    s.db.execute(
        "CREATE TRIGGER boom BEFORE UPDATE OF summary_id ON messages BEGIN SELECT RAISE(ABORT, 'disk gone'); END"
    )
    with pytest.raises(sqlite3.DatabaseError):
        s.save_summary("k", before[5].id, "summary", 3)
    assert s.summary("k") is None
    assert [r.id for r in s.window("k", limit=1000)] == [r.id for r in before]
    assert s.db.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 0
    # twin: without the failure the summary replaces exactly the messages up to the cut
    s.db.execute("DROP TRIGGER boom")
    s.save_summary("k", before[5].id, "summary", 3)
    after = s.window("k", limit=1000)
    assert s.summary("k")["text"] == "summary"
    assert [r.id for r in after] == [r.id for r in before[6:]]
    assert s.message_count("k") == len(before)  # replaced messages stay for audit
    marked = s.db.execute("SELECT COUNT(*) FROM messages WHERE summary_id IS NOT NULL").fetchone()[
        0
    ]
    assert marked == 6


def test_old_rows_get_their_token_counts_backfilled(tmp_path):
    path = tmp_path / "old.sqlite3"
    con = sqlite3.connect(path)  # a database from before compaction: no tokens / summary_id columns
    con.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_key TEXT NOT NULL,"
        " epoch INTEGER NOT NULL DEFAULT 0, turn TEXT NOT NULL DEFAULT '', kind TEXT NOT NULL DEFAULT 'chat',"
        " role TEXT NOT NULL, data TEXT NOT NULL, chars INTEGER NOT NULL, created REAL NOT NULL)"
    )
    con.execute(
        "INSERT INTO messages(session_key, role, data, chars, created) VALUES ('k','user',?,5,0)",
        ('{"role": "user", "content": "hello"}',),
    )
    con.commit()
    con.close()
    s = Store(path)
    s.token_counter = lambda m: 7
    assert [r.tokens for r in s.window("k", limit=10)] == [7]
    s.commit_turn("k", "t", [{"role": "assistant", "content": "hi"}])
    assert s.db.execute("SELECT tokens FROM messages ORDER BY id").fetchall() == [(7,), (7,)]


def test_window_never_starts_with_a_tool_result(tmp_path):
    s = filled_store(tmp_path / "db.sqlite3", n=3)
    rows = s.window("k", limit=3)  # the newest 3 of a tool turn start mid-turn
    assert rows == [] or rows[0].role == "user"
    assert all(r.role != "tool" for r in rows[:1])


# -------------------------------------------------------------------------------- cut
CUT_CASES = [
    # (turns as tool flags, keep tokens, keep messages, expected first kept index)
    ([False, False, False], 20, 100, 4),  # last turn (2 msgs x 10) fits exactly
    (
        [False, False, False],
        39,
        100,
        4,
    ),  # 3 messages would fit, but the cut only falls before a user turn
    ([False, True, False], 60, 100, 2),  # the tool turn (4 msgs) and the last (2) fit
    ([False, True, False], 50, 100, 6),  # the tool turn does not fit: never split inside it
    ([False, False, True], 30, 100, 8),  # even the last turn is too big: everything goes
    ([False, False, False], 100, 3, 4),  # message cap
    ([False, False], 1000, 100, 0),  # everything fits: nothing to compact
]


@pytest.mark.parametrize("tools,keep,keep_n,expected", CUT_CASES)
def test_cut_falls_before_a_user_turn(tools, keep, keep_n, expected):
    msgs = [m for i, t in enumerate(tools) for m in turn(i, tool=t)]
    rows = rows_of(msgs)
    cut = choose_cut(rows, keep, keep_n)
    assert cut == expected
    if cut < len(rows):
        assert rows[cut].role == "user"


def test_fallback_summary_names_tools_and_is_capped():
    msgs = [m for i in range(40) for m in turn(i, tool=True)]
    rows = rows_of(msgs)
    count = lambda t: len(t) // 4 + 1  # noqa: E731
    out = fallback_summary("- FACT: code 4815\n", rows, 300, count)
    assert count(out) <= 300
    assert out.startswith("- FACT: code 4815")
    assert "assistant called tools: read" in out and "question 39" in out  # newest lines win
    assert "question 0:" not in out
    short = fallback_summary("", rows_of(turn(1, tool=True)), 300, count)
    assert "user (2025-01-02 10:00 UTC): question 1" in short


def test_transcript_strips_metadata_and_shortens_tool_output():
    lines = transcript_lines(rows_of(turn(2, tool=True)), tool_chars=30)
    assert lines[0] == "user (2025-01-03 10:00 UTC): question 2"
    assert lines[1].startswith("assistant called read(")
    assert lines[2].startswith("tool result: file text") and len(lines[2]) < 60


# ------------------------------------------------------------------------------ config
@pytest.mark.parametrize(
    "section,key",
    [
        ({"context_window": 500}, "agent.compaction.context_window"),
        ({"threshold": 1.5}, "agent.compaction.threshold"),
        ({"summary_max_tokens": 10}, "agent.compaction.summary_max_tokens"),
        ({"keep_recent": 1}, "agent.compaction.keep_recent"),
    ],
)
def test_config_errors_name_the_key(section, key):
    with pytest.raises(ConfigError) as e:
        parse_config({"agent": {"compaction": section}})
    assert key in str(e.value)


def test_config_defaults():
    c = parse_config({"agent": {"compaction": {"context_window": 4000}}}).agent.compaction
    assert (
        c.enabled,
        c.context_window,
        c.threshold,
        c.keep_recent_tokens,
        c.summary_max_tokens,
        c.model,
    ) == (True, 4000, 0.8, 8000, 1200, "")


# ------------------------------------------------------------------------ memory search
FILES = {
    "MEMORY.md": "# People\n- Alice likes green tea\n- Bob prefers coffee, never tea\n\n# Work\n"
    "- The deploy key lives in /srv/keys/deploy.pem\n- Quarterly report due 2025-03-31\n",
    "memory/2025-01-02.md": "Met Alice at the tea house on Friday.\nShe is moving to Lisbon in May.\n\n"
    "Unrelated: bought printer paper.\n",
    "memory/2025-01-05.md": "# Errands\n- renew passport (number X1234567)\n- call the dentist about the crown\n",
}
RANKING = [
    ("Alice tea", "MEMORY.md:2"),
    ("Lisbon", "memory/2025-01-02.md:1-2"),
    ("moving to Lisbon", "memory/2025-01-02.md:1-2"),
    ("passport number", "memory/2025-01-05.md:2"),
    ("X1234567", "memory/2025-01-05.md:2"),
    ("deploy key", "MEMORY.md:6"),
    ("report due", "MEMORY.md:7"),
    ("coffee", "MEMORY.md:3"),
    ("dentists", "memory/2025-01-05.md:3"),  # stemming
    ("printer", "memory/2025-01-02.md:4"),
]


@pytest.fixture
def mem_ws(tmp_path):
    for rel, body in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body)
    (tmp_path / "notes.md").write_text("Alice tea Lisbon passport everything")  # not a memory file
    return tmp_path


@pytest.mark.parametrize("query,top", RANKING)
def test_memory_search_ranking(mem_ws, query, top):
    out = _search(mem_ws, query, 5).splitlines()
    assert out[0].startswith(top + " (score "), out
    assert not any(line.startswith("notes.md") for line in out)


def test_memory_search_reindexes_changed_and_removed_files(mem_ws):
    assert "No matches" in _search(mem_ws, "zeppelin", 5)
    p = mem_ws / "memory" / "2025-01-02.md"
    p.write_text(p.read_text() + "\nRode a zeppelin over the bay.\n")
    os.utime(p, (time.time() + 5, time.time() + 5))
    assert _search(mem_ws, "zeppelin", 5).startswith("memory/2025-01-02.md:6 (score")
    p.unlink()
    assert "No matches" in _search(mem_ws, "zeppelin", 5)
    (mem_ws / "memory.md").unlink(missing_ok=True)
    assert _search(mem_ws, "Alice", 5).startswith("MEMORY.md:2")


def test_chunks_keep_line_ranges():
    lines = ["# Head", "- one", "  continued", "- two", "", "para a", "para b"]
    assert chunk_lines(lines) == [
        (1, 1, "# Head"),
        (2, 3, "- one\n  continued"),
        (4, 4, "- two"),
        (6, 7, "para a\npara b"),
    ]


# --------------------------------------------------------------------- scheduled sessions
async def test_cron_and_heartbeat_sessions_stay_bounded(tmp_path):
    async with FakeLLM(context_window=4000) as llm:
        llm.default = lambda req: (
            text("Summary: nothing new.")
            if "tools" not in req
            else text(
                "HEARTBEAT_OK" if "HEARTBEAT" in str(req["messages"][-1]) else "reminder sent"
            )
        )
        cfg = make_config(
            tmp_path, llm, agent={"compaction": {"context_window": 4000}, "history_limit": 20}
        )
        async with running(cfg, scheduler=False) as d:
            for _ in range(40):
                await d.scheduled.run_cron(
                    "water", "Remind me to water the plants. " * 10, "none", ""
                )
            key = f"agent:{cfg.agent.id}:cron:water"
            assert d.store.message_count(key) == 80
            assert len(d.store.window(key, limit=1000)) <= 20
            assert d.store.summary_count(key) >= 1
    assert llm.rejected == []


async def test_compaction_off_keeps_the_old_window(tmp_path):
    async with FakeLLM() as llm:
        cfg = make_config(
            tmp_path, llm, agent={"compaction": {"enabled": False}, "history_limit": 6}
        )
        async with running(cfg, scheduler=False) as d:
            for _ in range(10):
                await d.scheduled.run_cron("j", "ping", "none", "")
            assert d.store.summary_count(f"agent:{cfg.agent.id}:cron:j") == 0
    assert len(llm.requests[-1]["messages"]) == 1 + 6 + 1
