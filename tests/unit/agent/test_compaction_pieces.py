"""Compaction pieces: the store's summary transaction, where a cut may
fall, the summary built without a model, and the config keys. Moved from tests/e2e/ (no daemon
needed); the scheduled-session tests that start a daemon are in tests/e2e/test_compaction_e2e.py."""

from __future__ import annotations

import sqlite3

import pytest

from bot.agent.compaction import choose_cut, fallback_summary, transcript_lines
from bot.config import ConfigError, parse_config
from bot.store import Store, WindowRow


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
