"""Schema version 2: the agent of each inbound, outbox and usage row (several agents)."""

from __future__ import annotations

import sqlite3

from bot.store import Store
from bot.store.schema_version import SCHEMA_VERSION


def test_rows_carry_the_agent_they_were_written_for(tmp_path):
    s = Store(tmp_path / "db")
    iid = s.add_inbound("telegram", "default", "1", "m1", "agent:work:main", {"t": 1}, "work")
    s.add_usage("agent:work:main", "t1", "m", cost_usd=0.5, agent="work")
    s.add_usage("agent:main:main", "t2", "m", cost_usd=0.25, agent="main")
    rows = s.commit_turn_rows(
        "agent:work:main",
        "t1",
        [],
        inbound_id=iid,
        outbound=[{"chat_id": "1", "text": "hi"}],
        agent="work",
    )
    assert [r.agent for r in s.unfinished_inbound()] == [] and len(rows) == 1
    agent = s.db.execute("SELECT agent FROM outbox WHERE id=?", (rows[0].id,)).fetchone()[0]
    assert agent == "work"
    assert s.usage_totals(0, agent="work")["cost_usd"] == 0.5
    assert s.usage_totals(0)["cost_usd"] == 0.75  # the twin: every agent's
    s.close()


def test_a_version_1_database_gets_the_agent_of_each_rows_session_key(tmp_path):
    path = tmp_path / "db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX usage_agent")
    for table in ("inbound", "outbox", "usage"):  # as version 1 made them: no agent column
        conn.execute(f"ALTER TABLE {table} DROP COLUMN agent")
    conn.execute(
        "INSERT INTO inbound(channel, account, chat_id, message_id, session_key, payload,"
        " created) VALUES ('telegram', 'default', '1', 'm1', 'agent:home:main', '{}', 0)"
    )
    conn.execute(
        "INSERT INTO usage(session_key, model, created) VALUES ('agent:home:cron:x', 'm', 0)"
    )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    s = Store(path)
    assert [r.agent for r in s.unfinished_inbound()] == ["home"]
    assert [r["agent"] for r in s.usage_rows(0)] == ["home"]
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    s.close()
