"""Long conversations end to end (SPEC §10): fake Telegram → daemon → fake LLM with a small
context window that answers oversized requests like a real provider (HTTP 400
``context_length_exceeded``) → fake Telegram.

The fake model here behaves like a cooperative small model: it calls a tool on some
turns, writes the facts it sees to memory when asked to flush, folds facts into the
summary it is asked to update, and answers "what is my locker code?" from its context
or, failing that, with memory_search."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from bot.agent.compaction import SUMMARY_INSTRUCTIONS, SUMMARY_LABEL
from tests.e2e import TG_TOKEN, config_file, make_config, running, telegram_section
from tests.fakes.llm import FakeLLM, delay, error, last_user_text, text, tool_calls

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 4000
OWNER = 42
NOTES = "\n".join(
    f"line {i}: the quarterly notes say nothing of interest here, just filler text."
    for i in range(25)
)


def is_summary(req: dict) -> bool:
    return req["messages"][0]["content"] == SUMMARY_INSTRUCTIONS


def is_flush(req: dict) -> bool:
    return any(
        m.get("role") == "user" and "[Memory flush before compaction]" in (m.get("content") or "")
        for m in req["messages"]
    )


def facts_in(req: dict) -> list[str]:
    found: list[str] = []
    for m in req["messages"][1:]:
        for f in re.findall(r"FACT: [^\n\]\"]+?\d+", m.get("content") or ""):
            if f not in found:
                found.append(f)
    return found


def body_of(req: dict) -> str:
    return last_user_text(req).rpartition("[Message]\n")[2]


def smart_model(req: dict, *, summary=None):
    """The fake model's behaviour (see the module docstring)."""
    msgs = req["messages"]
    last = msgs[-1]
    if is_summary(req):
        if summary is not None:
            return summary(req)
        # keep what the previous summary kept, add new facts verbatim
        return (
            "Summary:\n" + "\n".join(f"- {f}" for f in facts_in(req))
            if facts_in(req)
            else "Summary: chit-chat."
        )
    if is_flush(req):
        path = re.search(r"memory/\d{4}-\d{2}-\d{2}\.md", last_user_text(req) or "").group(0)
        if last.get("role") == "user":
            return tool_calls([("read", {"path": path})])
        if msgs[-2].get("tool_calls", [{}])[0].get("function", {}).get("name") == "read":
            old = last["content"] if not last["content"].startswith("Error") else ""
            new = [f for f in facts_in(req) if f not in old]
            return tool_calls(
                [
                    (
                        "write",
                        {"path": path, "content": old.rstrip("\n") + "\n" + "\n".join(new) + "\n"},
                    )
                ]
            )
        return text("NO_REPLY")
    if last.get("role") == "tool":
        if msgs[-2]["tool_calls"][0]["function"]["name"] == "memory_search":
            m = re.search(r"locker code is (\d+)", last["content"])
            return text(f"Your locker code is {m.group(1)}." if m else "I could not find it.")
        return text("done reading")
    body = body_of(req)
    if "locker code?" in body:
        for m in msgs[1:-1]:
            found = re.search(r"locker code is (\d+)", m.get("content") or "")
            if found:
                return text(f"Your locker code is {found.group(1)}.")
        return tool_calls([("memory_search", {"query": "locker code"})])
    if "read the notes" in body:
        return tool_calls([("read", {"path": "notes.txt"})])
    return text("noted")


def cfg_for(tmp_path, llm, tg, timeout: float = 30, **compaction):
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg),
        agent={
            "compaction": {"context_window": WINDOW, **compaction},
            "llm_timeout_seconds": timeout,
        },
    )
    ws = cfg.agent.workspace
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "notes.txt").write_text(NOTES)
    return cfg


def message_for(i: int) -> str:
    if i == 3:
        return "FACT: my locker code is 4815"
    if i % 3 == 0:
        return f"turn {i}: please read the notes and tell me if anything changed"
    return f"turn {i}: just chatting about the weather, nothing important, number {i}"


async def converse(tg, n: int, start: int = 1) -> list[str]:
    replies = []
    for i in range(start, start + n):
        before = len(tg.sent)
        tg.inject_message(OWNER, message_for(i), from_id=OWNER)
        sent = await tg.wait_for_sent(before + 1, timeout=30)
        replies.append(sent[before].visible_text)
    return replies


def main_turns(llm) -> list[dict]:
    return [r for r in llm.requests if not is_summary(r) and not is_flush(r)]


async def test_300_turns_in_a_4000_token_window(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.default = smart_model
        cfg = cfg_for(tmp_path, llm, tg)
        async with running(cfg) as d:
            replies = await converse(tg, 299)
            before = len(tg.sent)
            tg.inject_message(OWNER, "what is my locker code?", from_id=OWNER)
            sent = await tg.wait_for_sent(before + 1, timeout=30)
            replies.append(sent[before].visible_text)
            key = f"agent:{cfg.agent.id}:main"
            compactions = d.store.summary_count(key)
            summary = d.store.summary(key)
            total = d.store.message_count(key)
    # never over the window, never an error
    assert llm.rejected == []
    assert max(llm.request_tokens) <= WINDOW
    assert all(r in ("noted", "done reading") for r in replies[:-1]), {r for r in replies}
    assert "4815" in replies[-1]
    # compaction ran many times, summaries came from the model, history was kept for audit
    assert compactions >= 10
    assert summary["source"] == "model" and "4815" in summary["text"]
    assert total >= 300 * 2
    # the fact was also written to memory by the flush turns
    mem = list((cfg.agent.workspace / "memory").glob("*.md"))
    assert mem and "locker code is 4815" in mem[0].read_text()
    # the system prompt is byte-identical across all compactions; the summary is the first history message
    turns = main_turns(llm)
    assert len({r["messages"][0]["content"] for r in turns}) == 1
    after = [r for r in turns if r["messages"][1]["content"].startswith(SUMMARY_LABEL)]
    assert len(after) > 250 and all(r["messages"][1]["role"] == "user" for r in after)
    assert all(SUMMARY_LABEL not in r["messages"][0]["content"] for r in turns)
    # summary calls offer no tools; flush turns offer the file tools only
    assert all("tools" not in r for r in llm.requests if is_summary(r))
    flush_tools = {
        t["function"]["name"] for r in llm.requests if is_flush(r) for t in r.get("tools", [])
    }
    assert flush_tools and flush_tools <= {"read", "write", "edit", "memory_search", "memory_get"}
    # a cut never separates a tool call from its result: no request has a tool message without its call
    for r in turns:
        ids = set()
        for m in r["messages"]:
            ids |= {c["id"] for c in m.get("tool_calls") or []}
            if m["role"] == "tool":
                assert m["tool_call_id"] in ids


async def test_failing_summary_call_never_blocks_a_turn(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.default = lambda req: smart_model(req, summary=lambda r: error(500))
        cfg = cfg_for(tmp_path, llm, tg)
        async with running(cfg) as d:
            replies = await converse(tg, 40)
            summary = d.store.summary(f"agent:{cfg.agent.id}:main")
    assert llm.rejected == []
    assert all(r in ("noted", "done reading") for r in replies), replies
    assert summary is not None and summary["source"] == "fallback"
    assert "user" in summary["text"] and "called tools: read" in summary["text"]


async def test_summary_timeout_never_blocks_a_turn(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        # the summary call waits at most the turn's timeout, then the turn goes on
        llm.default = lambda req: smart_model(req, summary=lambda r: delay(8, text("too late")))
        cfg = cfg_for(tmp_path, llm, tg, timeout=1.5)
        async with running(cfg) as d:
            replies = await converse(tg, 8)
            key = f"agent:{cfg.agent.id}:main"
            summary, count = d.store.summary(key), d.store.summary_count(key)
    assert all(r in ("noted", "done reading") for r in replies), replies
    assert summary is not None and summary["source"] == "fallback"
    assert sum(1 for r in llm.requests if is_summary(r)) == count  # one attempt per compaction


async def test_provider_overflow_is_compacted_and_retried(tmp_path, tg):
    # Chela believes the window is 8000; the provider's real limit is 4000
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.default = smart_model
        cfg = cfg_for(tmp_path, llm, tg, context_window=8000)
        async with running(cfg) as d:
            replies = await converse(tg, 30)
            key = f"agent:{cfg.agent.id}:main"
            assert d.store.summary_count(key) >= 1
    assert llm.rejected, "the test needs the provider to refuse at least one request"
    assert all(r in ("noted", "done reading") for r in replies), replies


async def test_twin_short_conversation_is_not_compacted(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.default = smart_model
        cfg = cfg_for(tmp_path, llm, tg)
        async with running(cfg) as d:
            replies = await converse(tg, 2)
            assert d.store.summary_count(f"agent:{cfg.agent.id}:main") == 0
    assert replies == ["noted", "noted"]
    assert not any(is_summary(r) or is_flush(r) for r in llm.requests)
    assert (
        len(llm.requests[-1]["messages"]) == 4 + 1
    )  # system, user, assistant, user, delivery note


async def test_compact_command_and_status(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.default = smart_model
        cfg = cfg_for(tmp_path, llm, tg, context_window=32000)
        async with running(cfg) as d:
            await converse(tg, 4)
            for cmd in ("/status", "/compact the locker", "/status", "/context", "/compact"):
                before = len(tg.sent)
                tg.inject_message(OWNER, cmd, from_id=OWNER)
                await tg.wait_for_sent(before + 1, timeout=30)
            key = f"agent:{cfg.agent.id}:main"
            summary = d.store.summary(key)
            replies = await converse(tg, 1, start=5)
    texts = [s.visible_text for s in tg.sent]
    status1, compact, status2, context, again = texts[4:9]
    assert (
        "Context: " in status1
        and "compactions 0" in status1
        and "of history (window 32000" in status1
    )
    assert compact.startswith("Compacted 8 older messages into a summary.")
    assert "compactions 1" in status2
    assert "Session tokens: " in context and "window 32000" in context
    assert again == "Nothing to compact yet."
    assert "4815" in summary["text"]
    focus = next(r for r in llm.requests if is_summary(r))["messages"][1]["content"]
    assert "Pay particular attention to: the locker" in focus
    # the next turn sees the summary first, then nothing else from before
    last = llm.requests[-1]["messages"]
    assert last[1]["content"].startswith(SUMMARY_LABEL) and body_of(llm.requests[-1]).startswith(
        "turn 5"
    )
    assert replies == ["noted"]


async def test_kill_9_during_compaction_loses_nothing(tmp_path, tg):
    async with FakeLLM(context_window=WINDOW) as llm:
        cfg_path = config_file(
            tmp_path / "config.toml",
            llm,
            workspace=tmp_path / "ws",
            state_dir=tmp_path / "state",
            channels=telegram_section(tg),
        )
        with cfg_path.open("a") as f:
            f.write(f"[agent.compaction]\ncontext_window = {WINDOW}\n")
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / "notes.txt").write_text(NOTES)
        hang = asyncio.Event()

        async def model(req):
            if is_summary(req):
                hang.set()
                await asyncio.sleep(8)  # the process is killed meanwhile
            return smart_model(req)

        llm.default = model
        env = {**os.environ, "TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)]
        db = tmp_path / "state" / "chela.sqlite3"
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            i = 0
            while not hang.is_set():
                i += 1
                before = len(tg.sent)
                tg.inject_message(OWNER, message_for(i), from_id=OWNER)
                while len(tg.sent) == before and not hang.is_set():
                    await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
        con = sqlite3.connect(db)
        stored = [json.loads(r[0]) for r in con.execute("SELECT data FROM messages ORDER BY id")]
        assert con.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 0
        assert (
            con.execute("SELECT COUNT(*) FROM messages WHERE summary_id IS NOT NULL").fetchone()[0]
            == 0
        )
        con.close()
        assert (
            sum(1 for m in stored if m["role"] == "user") == i - 1
        )  # every answered turn is there
        assert "FACT: my locker code is 4815" in json.dumps(stored)
        # restart: the interrupted message is answered, compaction completes, nothing is lost
        llm.default = smart_model
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            sent_before = len(tg.sent)
            await tg.wait_for_sent(sent_before + 1, timeout=30)
            tg.inject_message(OWNER, "what is my locker code?", from_id=OWNER)
            sent = await tg.wait_for_sent(sent_before + 2, timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        assert "4815" in sent[-1].visible_text
        con = sqlite3.connect(db)
        assert con.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] >= 1
        assert con.execute("SELECT COUNT(*) FROM messages").fetchone()[0] >= len(stored)
        con.close()


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
