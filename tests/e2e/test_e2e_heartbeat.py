"""Heartbeats and cron end to end: fake Telegram → daemon → fake LLM, with explicit "fire now"."""

from __future__ import annotations

import asyncio
from datetime import datetime, UTC


from bot.cli import main as cli_main
from tests.e2e import config_file, eventually, make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import last_user_text, text, tool_calls


def hb_config(tmp_path, llm, tg, heartbeat=None, **agent):
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg),
        heartbeat={"every": "24h", **(heartbeat or {})},
        **({"agent": agent} if agent else {}),
    )
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "HEARTBEAT.md").write_text(
        "# Checks\n- look at the inbox for anything urgent\n"
    )
    return cfg


async def _dm_first(d, tg, llm, n_sent=1):
    """A DM exchange so that the heartbeat has a 'last' route."""
    llm.script(text("hello"))
    tg.inject_message(42, "hi", from_id=42)
    await tg.wait_for_sent(n_sent, timeout=15)
    await eventually(lambda: not d.lanes.busy("agent:main:main"))


async def test_ack_sends_nothing_and_does_not_grow_history(tmp_path, llm, tg):
    cfg = hb_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        await _dm_first(d, tg, llm)
        before = d.store.message_count("agent:main:main")
        for reply in ("HEARTBEAT_OK", "**HEARTBEAT_OK**", "<b>HEARTBEAT_OK</b>", "NO_REPLY"):
            llm.script(text(reply))
            out = await d.scheduled.heartbeat()
            assert out.status in ("ack", "silent"), (reply, out)
        sizes = [sum(len(str(m.get("content"))) for m in r["messages"]) for r in llm.requests[1:]]
        assert d.store.message_count("agent:main:main") == before
    assert len(tg.sent) == 1
    assert len(set(sizes)) == 1  # every idle tick sends the same amount
    hb_req = llm.requests[1]
    assert "HEARTBEAT.md" in last_user_text(hb_req) and "HEARTBEAT_OK" in last_user_text(hb_req)
    assert "Current time:" in last_user_text(hb_req)
    assert "## Heartbeats" in hb_req["messages"][0]["content"]


async def test_alert_reaches_last_dm_once_within_24h(tmp_path, llm, tg):
    cfg = hb_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        await _dm_first(d, tg, llm)
        alert = (
            "HEARTBEAT_OK "
            + "Your flight tomorrow moved to 07:10; the check-in opens tonight. " * 8
        )
        llm.script(text(alert))
        out = await d.scheduled.heartbeat()
        assert out.status == "delivered"
        sent = await tg.wait_for_sent(2, timeout=10)
        assert sent[1].chat_id == 42 and "HEARTBEAT_OK" not in sent[1].visible_text
        assert "flight tomorrow moved" in sent[1].visible_text
        llm.script(text(alert))
        out = await d.scheduled.heartbeat()
        assert out.status == "duplicate"
        await settled(d, tg_taken(tg))
    assert len(tg.sent) == 2


async def test_target_none_records_run_and_sends_nothing(tmp_path, llm, tg):
    cfg = hb_config(tmp_path, llm, tg, heartbeat={"target": "none"})
    async with running(cfg) as d:
        await _dm_first(d, tg, llm)
        llm.script(text("Something needs attention: the backup failed last night."))
        out = await d.scheduled.heartbeat()
        assert out.status == "no-target"
        assert d.store.get("heartbeat:last_run")["status"] == "no-target"
    assert len(tg.sent) == 1


async def test_effectively_empty_heartbeat_md_skips_model(tmp_path, llm, tg):
    cfg = hb_config(tmp_path, llm, tg)
    (cfg.agent.workspace / "HEARTBEAT.md").write_text("# Heartbeat\n\n- [ ]\n```\n```\n")
    async with running(cfg) as d:
        outs = [await d.scheduled.heartbeat() for _ in range(5)]
    assert {o.status for o in outs} == {"skipped"} and llm.requests == []


async def test_busy_main_session_defers(tmp_path, llm, tg):
    from tests.fakes.llm import delay

    cfg = hb_config(tmp_path, llm, tg)
    async with running(cfg) as d:
        llm.script(delay(1.5, text("slow answer")))
        tg.inject_message(42, "think hard", from_id=42)
        await llm.wait_for_requests(1, timeout=15)
        out = await d.scheduled.heartbeat()
        assert (out.status, out.reason) == ("skipped", "main session busy")
        await tg.wait_for_sent(1, timeout=15)
    assert len(llm.requests) == 1


async def test_outside_active_hours_skips(tmp_path, llm, tg):
    cfg = hb_config(
        tmp_path,
        llm,
        tg,
        heartbeat={"active_hours": {"start": "08:00", "end": "09:00", "timezone": "UTC"}},
    )
    async with running(cfg) as d:
        out = await d.scheduled.heartbeat(now=datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
        assert out.status == "skipped" and "active hours" in out.reason
        llm.script(text("HEARTBEAT_OK"))
        out = await d.scheduled.heartbeat(now=datetime(2026, 11, 21, 8, 30, tzinfo=UTC))
        assert out.status == "ack"


async def test_scheduler_fires_heartbeats_by_itself(tmp_path, llm, tg):
    cfg = hb_config(tmp_path, llm, tg, heartbeat={"every": "300ms"})
    llm.default = lambda req: text("HEARTBEAT_OK")
    async with running(cfg) as d:
        await eventually(lambda: len(llm.requests) >= 2, timeout=10)
        assert d.store.get("heartbeat:last_run")["status"] == "ack"
    assert tg.sent == []


async def test_heartbeat_command_dry_run(tmp_path, llm, tg, capsys):
    cfg = hb_config(tmp_path, llm, tg)
    path = config_file(
        tmp_path / "c.toml", llm, workspace=cfg.agent.workspace, state_dir=cfg.agent.state_dir
    )
    llm.default = lambda req: text("Reminder: water the plants.")
    rc = await asyncio.to_thread(
        cli_main, ["heartbeat", "--dry-run", "--config", str(path), "--log-level", "ERROR"]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "water the plants" in out and len(llm.requests) == 1


async def test_heartbeat_command_next_to_a_running_daemon_only_sends(tmp_path, llm, tg):
    """`chela heartbeat` while the daemon runs: the alert goes out, but the command neither
    polls nor resets the webhook, so the daemon keeps getting its messages."""
    cfg = hb_config(tmp_path, llm, tg)
    path = config_file(
        tmp_path / "c.toml",
        llm,
        workspace=cfg.agent.workspace,
        state_dir=cfg.agent.state_dir,
        heartbeat={"every": "24h", "target": "last"},
        channels=telegram_section(tg),
    )
    async with running(cfg) as d:
        await _dm_first(d, tg, llm)
        llm.script(text("Your parcel is waiting at the front desk."))
        rc = await asyncio.to_thread(
            cli_main, ["heartbeat", "--config", str(path), "--log-level", "ERROR"]
        )
        assert rc == 0
        sent = await tg.wait_for_sent(2, timeout=10)
        assert sent[1].chat_id == 42 and "parcel" in sent[1].visible_text
        assert len(tg.calls_of("deleteWebhook")) == 1  # the daemon's own, at its start
        llm.script(text("still listening"))
        tg.inject_message(42, "you there?", from_id=42)
        sent = await tg.wait_for_sent(3, timeout=10)
    assert sent[2].visible_text == "still listening"


async def test_cron_job_created_by_tool_fires_after_restart(tmp_path, llm, tg):
    tools = ["read", "cron", "session_status"]
    cfg = make_config(tmp_path, llm, channels=telegram_section(tg), tools={"enabled": tools})
    async with running(cfg) as d:
        llm.script(
            tool_calls(
                [
                    (
                        "cron",
                        {
                            "action": "add",
                            "name": "plants",
                            "schedule": "0 9 * * *",
                            "prompt": "Remind me to water the plants.",
                            "target": "telegram",
                            "to": "42",
                        },
                    )
                ]
            ),
            text("Done, I'll remind you at 9."),
        )
        tg.inject_message(42, "remind me daily at 9 to water the plants", from_id=42)
        await tg.wait_for_sent(1, timeout=15)
        await eventually(lambda: not d.lanes.busy("agent:main:main"))
        assert any(
            m.get("role") == "tool" and "Scheduled job 'plants'" in m.get("content", "")
            for m in llm.requests[1]["messages"]
        )
    # a new daemon on the same state dir: the job is back and fires
    async with running(cfg) as d2:
        await d2.cron.booted.wait()
        job = d2.cron.registry.get("plants")
        assert job is not None and job.spec == "0 9 * * *"
        llm.script(text("Time to water the plants 🌱"))
        await d2.cron.run_now("plants")
        sent = await tg.wait_for_sent(2, timeout=15)
        req = llm.requests[-1]
    assert sent[1].chat_id == 42 and "water the plants" in sent[1].visible_text
    assert "Remind me to water the plants." in last_user_text(req)
    # cron runs use the minimal prompt: no Silent Replies / Heartbeats sections
    assert "## Silent Replies" not in req["messages"][0]["content"]
