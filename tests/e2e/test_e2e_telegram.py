"""End to end: fake Telegram → daemon (real python-telegram-bot) → fake LLM (real litellm) → fake Telegram."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


from bot.cli import main as cli_main
from tests.e2e import (
    TG_TOKEN,
    all_text,
    config_file,
    eventually,
    make_config,
    running,
    system_prompt,
    telegram_section,
)
from tests.e2e.harness import settled, store_idle, tg_taken
from tests.fakes.llm import delay, text, tool_calls

ROOT = Path(__file__).resolve().parents[2]


def tg_config(tmp_path, llm, tg, **kw):
    return make_config(tmp_path, llm, channels=telegram_section(tg, **kw))


async def test_dm_from_allowed_user_gets_reply(tmp_path, llm, tg):
    llm.script(text("Hello **Alice**!"))
    async with running(tg_config(tmp_path, llm, tg)):
        tg.inject_message(42, "hi there", from_id=42, username="alice", first_name="Alice")
        sent = await tg.wait_for_sent(1, timeout=15)
    assert sent[0].chat_id == 42 and sent[0].visible_text == "Hello Alice!"
    assert sent[0].parse_mode == "HTML" and "<b>Alice</b>" in sent[0].text
    req = llm.requests[0]
    assert req["messages"][0]["role"] == "system"
    assert "hi there" in req["messages"][-2]["content"]
    # Telegram delivery instructions come as a system message after the user message
    assert req["messages"][-1]["role"] == "system" and "[IMAGE:" in req["messages"][-1]["content"]
    assert req["messages"][-1]["content"] not in system_prompt(req)


async def test_unknown_sender_gets_pairing_code_then_is_served(tmp_path, llm, tg, capsys):
    cfg = tg_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        tg.inject_message(77, "let me in", from_id=77, username="eve")
        sent = await tg.wait_for_sent(1, timeout=15)
        assert "Pairing code" in sent[0].visible_text and "77" in sent[0].visible_text
        assert llm.requests == []
        code = sent[0].visible_text.split("Pairing code: ")[1][:8]
        tg.inject_message(77, "again?", from_id=77, username="eve")
        await settled(d, tg_taken(tg))
        assert len([m for m in tg.sent if m.chat_id == 77]) == 1  # one pairing reply an hour
        assert [m.chat_id for m in tg.sent] == [77, 42]  # and one notice to the owner (§17.4)
        cfg_path = tmp_path / "c.toml"
        cfg_path.write_text(f'[agent]\nstate_dir = "{cfg.agent.state_dir}"\n')
        assert cli_main(["pairing", "approve", "telegram", code, "--config", str(cfg_path)]) == 0
        assert "approved telegram sender 77" in capsys.readouterr().out
        llm.script(text("welcome"), text("yes, now"))
        tg.inject_message(77, "now?", from_id=77, username="eve")
        await tg.wait_for_sent(4, timeout=15)
        await settled(d, tg_taken(tg))
    # the message that waited is answered first (with the approval), then the new one
    texts = [m.visible_text for m in tg.sent if m.chat_id == 77][1:]
    assert texts[0].startswith("The owner approved you") and texts[1:] == ["welcome", "yes, now"]
    assert "again?" in llm.requests[0]["messages"][-2]["content"]  # the one held
    assert "now?" in llm.requests[1]["messages"][-2]["content"]
    assert len(llm.requests) == 2


async def test_group_pending_history_and_mention(tmp_path, llm, tg):
    cfg = tg_config(tmp_path, llm, tg, groups=["-100"])
    async with running(cfg) as d:
        tg.inject_message(
            -100,
            "anyone seen the deploy logs?",
            from_id=5,
            username="bob",
            first_name="Bob",
            chat_type="supergroup",
            title="Dev Team",
        )
        tg.inject_message(
            -100,
            "they are in /var/log/app",
            from_id=6,
            username="carol",
            first_name="Carol",
            chat_type="supergroup",
            title="Dev Team",
        )
        await settled(d, tg_taken(tg))
        assert tg.sent == [] and llm.requests == []
        llm.script(text("Thanks, noted."))
        tg.inject_message(
            -100,
            "@chela_bot summarise please",
            from_id=5,
            username="bob",
            first_name="Bob",
            chat_type="supergroup",
            title="Dev Team",
        )
        sent = await tg.wait_for_sent(1, timeout=15)
        # a second group, not allowlisted, is ignored even with a mention
        tg.inject_message(-200, "@chela_bot hello", from_id=5, chat_type="group", title="Other")
        await settled(d, tg_taken(tg))
    assert sent[0].chat_id == -100 and len(tg.sent) == 1
    req = llm.requests[0]
    body = all_text(req)
    assert "anyone seen the deploy logs?" in body and "they are in /var/log/app" in body
    assert "## Group Chat Context" in system_prompt(req) and '"Dev Team"' in system_prompt(req)
    assert len(llm.requests) == 1


async def test_no_reply_sends_nothing_and_reply_tag_threads(tmp_path, llm, tg):
    async with running(tg_config(tmp_path, llm, tg)) as d:
        llm.script(text("NO_REPLY"))
        tg.inject_message(42, "ok thanks", from_id=42)
        await llm.wait_for_requests(1, timeout=15)
        await settled(d, tg_taken(tg))
        assert tg.sent == []
        llm.script(text("[[reply_to_current]] Sure thing"))
        mid_update = tg.inject_message(42, "can you?", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=15)
    trigger = next(
        m for (chat, mid), m in tg.messages.items() if chat == 42 and m.get("text") == "can you?"
    )
    assert sent[0].visible_text == "Sure thing"
    assert sent[0].reply_to_message_id == trigger["message_id"]
    assert mid_update


async def test_media_markers_send_photo_and_document_after_text(tmp_path, llm, tg):
    cfg = tg_config(tmp_path, llm, tg)
    async with running(cfg):
        (cfg.agent.workspace / "report.pdf").write_bytes(b"%PDF-1.4 fake")
        llm.script(
            text(
                "Here you go\n[IMAGE:https://example.com/cat.png]\n[DOCUMENT:report.pdf]\n[DOCUMENT:../../etc/passwd]"
            )
        )
        tg.inject_message(42, "send files", from_id=42)
        sent = await tg.wait_for_sent(3, timeout=15)
    kinds = [(s.method, s.url or s.filename) for s in sent]
    assert kinds[0][0] == "sendMessage" and "Here you go" in sent[0].visible_text
    assert "[attachment unavailable: passwd]" in sent[0].visible_text
    assert kinds[1] == ("sendPhoto", "https://example.com/cat.png")
    assert kinds[2][0] == "sendDocument" and sent[2].data == b"%PDF-1.4 fake"


async def test_long_answer_is_chunked_and_html_rejection_resent_plain(tmp_path, llm, tg):
    para = "word " * 199 + "end.\n\n"
    long_answer = (para * 9)[:9000]
    async with running(tg_config(tmp_path, llm, tg)) as d:
        llm.script(text(long_answer))
        tg.inject_message(42, "long please", from_id=42)
        sent = await tg.wait_for_sent(3, timeout=15)
        await settled(d, tg_taken(tg))
        assert len(tg.sent) == 3 and all(len(s.text) <= 4096 for s in sent)
        tg.fail_next(
            "sendMessage",
            status=400,
            description="Bad Request: can't parse entities: unsupported tag",
        )
        llm.script(text("**bold** answer"))
        tg.inject_message(42, "again", from_id=42)
        sent = await tg.wait_for_sent(4, timeout=15)
    assert sent[3].parse_mode is None and sent[3].text == "**bold** answer"


async def test_rate_limit_is_honoured(tmp_path, llm, tg):
    async with running(tg_config(tmp_path, llm, tg)):
        tg.fail_next("sendMessage", status=429, retry_after=1)
        llm.script(text("after the wait"))
        tg.inject_message(42, "hi", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=20)
    assert sent[0].visible_text == "after the wait"
    assert len(tg.calls_of("sendMessage")) == 2


async def test_system_prompt_is_stable_and_follows_soul_edits(tmp_path, llm, tg):
    cfg = tg_config(tmp_path, llm, tg)
    async with running(cfg):
        for i, word in enumerate(["one", "two"]):
            tg.inject_message(42, f"message {word}", from_id=42)
            await tg.wait_for_sent(i + 1, timeout=15)
        (cfg.agent.workspace / "SOUL.md").write_text("Speak like a calm lighthouse keeper.\n")
        tg.inject_message(42, "message three", from_id=42)
        await tg.wait_for_sent(3, timeout=15)
    p1, p2, p3 = (system_prompt(r) for r in llm.requests[:3])
    assert p1 == p2
    assert p3 != p2 and "calm lighthouse keeper" in p3
    # history carries the earlier turns
    assert "message one" in all_text(llm.requests[1])


async def test_malformed_update_and_huge_message_do_not_stop_the_daemon(tmp_path, llm, tg):
    async with running(tg_config(tmp_path, llm, tg)):
        tg.inject_raw_update({"message": {"message_id": "not-a-number", "chat": "broken"}})
        tg.inject_raw_update({"weird": True})
        tg.inject_message(42, "x" * 1_000_000, from_id=42)
        await tg.wait_for_sent(1, timeout=20)
        tg.inject_message(42, "still there?", from_id=42)
        sent = await tg.wait_for_sent(2, timeout=15)
    assert len(sent) == 2
    assert (
        len(llm.requests[0]["messages"][-2]["content"]) < 70_000
    )  # the huge text was cut, not dropped


async def test_tool_call_round_trip_through_telegram(tmp_path, llm, tg):
    cfg = tg_config(tmp_path, llm, tg)
    async with running(cfg):
        (cfg.agent.workspace / "notes.txt").write_text("the code word is heron")
        llm.script(tool_calls([("read", {"path": "notes.txt"})]), text("It is heron."))
        tg.inject_message(42, "what is the code word?", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=15)
    assert sent[0].visible_text == "It is heron."
    assert any(
        m.get("role") == "tool" and "heron" in m.get("content", "")
        for m in llm.requests[1]["messages"]
    )


async def test_llm_outage_gives_clear_message_and_daemon_keeps_running(tmp_path, llm, tg):
    from tests.fakes.llm import error

    cfg = tg_config(tmp_path, llm, tg)
    cfg.outage.probe_initial = cfg.outage.probe_max = "50ms"
    async with running(cfg):
        llm.script(error(500), error(500), error(500), error(500))
        tg.inject_message(42, "hello?", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=20)
        assert "model" in sent[0].visible_text.lower()  # kept: answered once it is back
        sent = await tg.wait_for_sent(2, timeout=20)  # back: the fake answers "ok"
        tg.inject_message(42, "hello again", from_id=42)
        sent = await tg.wait_for_sent(3, timeout=20)
    assert [s.visible_text for s in sent[1:]] == ["ok", "ok"]


async def test_kill_9_mid_turn_then_restart_answers_exactly_once(tmp_path, llm, tg):
    cfg_path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    env = {**os.environ, "TEST_TG_TOKEN": TG_TOKEN, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)]
    llm.script(delay(8, text("too late")))  # longer than the kill, short enough for teardown
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tg.inject_message(42, "are you there?", from_id=42)
        await llm.wait_for_requests(1, timeout=30)  # the turn is in progress
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    assert tg.sent == []
    llm.script(text("yes, here"))
    second = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sent = await tg.wait_for_sent(1, timeout=30)
        # the restarted process took the update and left nothing to handle or to send
        db_path = make_config(tmp_path, llm).db_path
        await eventually(lambda: tg_taken(tg)() and store_idle(db_path), timeout=30)
    finally:
        second.send_signal(signal.SIGTERM)
        rc = second.wait(20)
    assert [s.visible_text for s in tg.sent] == ["yes, here"]
    assert sent[0].chat_id == 42
    assert rc == 0  # SIGTERM is a clean exit


async def test_message_tool_without_channel_or_recipient_sends_to_this_chat(tmp_path, llm, tg):
    async with running(tg_config(tmp_path, llm, tg)) as d:
        llm.script(tool_calls([("message", {"text": "a note sent by the tool"})]), text("NO_REPLY"))
        tg.inject_message(42, "send me a note", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=15)
        await llm.wait_for_requests(2, timeout=15)
        await settled(d, tg_taken(tg))
    assert [(s.chat_id, s.visible_text) for s in tg.sent] == [(42, "a note sent by the tool")]
    assert any(
        m.get("role") == "tool" and m.get("content") == "sent" for m in llm.requests[1]["messages"]
    )
    assert sent
