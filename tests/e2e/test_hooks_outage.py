"""Webhook and mail events during a model outage (as chat messages are kept, §24): the real
daemon, the fake Telegram, the fake LLM made "down" for a window.  A signed hook is still
answered 202 at once, but its turn waits (the ledger says so) and runs once when the model
answers again; past ``[outage] max_wait`` it is closed as expired and its target told once.
A kill -9 while the event waits keeps it waiting: after the restart it runs once."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from bot.store import pending
from bot.triggers.events import WAITING
from tests.e2e import make_config, running, telegram_section
from tests.e2e.harness import eventually
from tests.e2e.test_crash import kill9, start, stop, toml
from tests.e2e.test_hooks_crash import free_port
from tests.e2e.test_hooks_e2e import SECRET, hook, post, signed, url
from tests.e2e.test_mail_e2e import PASSWORD, mail
from tests.fakes.imap import FakeImap
from tests.fakes.llm import last_user_text, text

OWNER = 42
FAST_PROBE = {"probe_initial": "50ms", "probe_max": "200ms"}


def answer(request: dict):
    """The model back: it names the event it was shown (the probe gets OK)."""
    said = last_user_text(request)
    for n in range(10):
        if f'"n": {n}' in said:
            return text(f"event n{n} needs you")
    return text("about mail" if "Subject: " in said else "OK")


def config(tmp_path, llm, tg, monkeypatch, *, mail_box: dict | None = None, **outage):
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    monkeypatch.setenv("TEST_HTTP_TOKEN", "owner-api-token-value-77")
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    extra = {"mail": [mail_box]} if mail_box else {}
    return make_config(
        tmp_path,
        llm,
        agent={"llm_max_retries": 0},
        channels={"http": http, **telegram_section(tg)},
        hooks=[hook("gh", "github")],
        outage={**FAST_PROBE, **outage},
        **extra,
    )


def body(n: int) -> bytes:
    return f'{{"n": {n}}}'.encode()


def ledger(d) -> list[tuple[str, str]]:
    """(status, result) of each accepted event, oldest first."""
    rows = d.store.db.execute(
        "SELECT status, result FROM trigger_events WHERE verdict='accepted' ORDER BY rowid"
    )
    return [(r[0], r[1]) for r in rows]


def event_turns(d) -> list[str]:
    rows = d.store.db.execute(
        "SELECT session_key FROM messages WHERE role='user' AND kind IN ('hook','mail')"
    )
    return [r[0] for r in rows]


def told(tg) -> list[str]:
    return [s.text for s in tg.sent if s.chat_id == OWNER]


def asked_about(llm, n: int) -> int:
    return sum(1 for r in llm.requests if f'"n": {n}' in last_user_text(r))


async def test_a_hook_during_an_outage_waits_then_runs_once_when_the_model_is_back(
    tmp_path, llm, tg, monkeypatch
):
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        llm.go_down()
        status, got = await post(url(d, "gh"), body(1), signed("github", body(1), "o-1"))
        assert status == 202 and got["status"] == "accepted"  # still accepted at once
        await eventually(lambda: ledger(d) == [("waiting", WAITING)], timeout=15)
        assert event_turns(d) == [] and told(tg) == []
        assert pending.view(d.store)["pending"] == 1  # chela status counts it
        # the outage is known now: the next event waits without asking the model
        status, _ = await post(url(d, "gh"), body(2), signed("github", body(2), "o-2"))
        assert status == 202
        await eventually(lambda: ledger(d) == [("waiting", WAITING)] * 2, timeout=15)
        assert asked_about(llm, 2) == 0
        llm.come_up(answer)
        await tg.wait_for(lambda: len(told(tg)) >= 2, timeout=15)
        await eventually(lambda: all(s == "done" for s, _ in ledger(d)), timeout=15)
        await asyncio.sleep(0.5)  # a second run would show by now
        assert told(tg) == ["event n1 needs you", "event n2 needs you"]  # in order, once each
        assert event_turns(d) == ["agent:main:hook:gh"] * 2
        assert ledger(d) == [("done", f"delivered to telegram:{OWNER}")] * 2
        assert pending.view(d.store) is None


async def test_the_twin_a_hook_without_an_outage_runs_at_once(tmp_path, llm, tg, monkeypatch):
    llm.default = answer
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        status, _ = await post(url(d, "gh"), body(1), signed("github", body(1), "t-1"))
        assert status == 202
        await tg.wait_for(lambda: told(tg), timeout=15)
        await eventually(lambda: ledger(d)[0][0] == "done", timeout=15)
        assert told(tg) == ["event n1 needs you"]
        assert ledger(d) == [("done", f"delivered to telegram:{OWNER}")]
        assert pending.down_since(d.store) is None


async def test_a_hook_kept_past_max_wait_is_never_run_and_its_target_told_once(
    tmp_path, llm, tg, monkeypatch
):
    async with running(config(tmp_path, llm, tg, monkeypatch, max_wait="1s")) as d:
        llm.go_down()
        status, _ = await post(url(d, "gh"), body(1), signed("github", body(1), "x-1"))
        assert status == 202
        await eventually(lambda: any("did not act" in t for t in told(tg)), timeout=15)
        lines = [t for t in told(tg) if "did not act" in t]
        assert len(lines) == 1 and "1 event(s) from gh" in lines[0]
        assert ledger(d) == [("done", "expired (model down longer than 1s)")]
        llm.come_up(answer)
        await eventually(lambda: pending.down_since(d.store) is None, timeout=15)
        await asyncio.sleep(0.5)
        assert event_turns(d) == [] and asked_about(llm, 1) == 1  # the one failed attempt
        assert [t for t in told(tg) if "did not act" not in t] == []


@pytest.fixture
async def imap():
    fake = await FakeImap(password=PASSWORD).start()
    yield fake
    await fake.stop()


async def test_a_mail_during_an_outage_waits_then_runs_once(tmp_path, llm, tg, imap, monkeypatch):
    monkeypatch.setenv("TEST_IMAP_USER", imap.user)
    monkeypatch.setenv("TEST_IMAP_PASSWORD", PASSWORD)
    box = {
        "name": "inbox",
        "host": "127.0.0.1",
        "port": imap.port,
        "tls": "none",
        "username_env": "TEST_IMAP_USER",
        "password_env": "TEST_IMAP_PASSWORD",
        "prompt": "A mail arrived:\n{mail}",
        "deliver": f"telegram:{OWNER}",
    }
    async with running(config(tmp_path, llm, tg, monkeypatch, mail_box=box)) as d:
        await eventually(lambda: imap.idling == 1, timeout=10)
        llm.go_down()
        imap.add(mail("lunch on friday?"))
        await eventually(lambda: ledger(d) == [("waiting", WAITING)], timeout=15)
        assert event_turns(d) == [] and told(tg) == []
        llm.come_up(answer)
        await tg.wait_for(lambda: told(tg), timeout=15)
        await asyncio.sleep(0.5)
        assert told(tg) == ["about mail"]
        assert event_turns(d) == ["agent:main:mail:inbox"]


# ------------------------------------------------------------------ kill -9 while waiting
def write(tmp_path: Path, llm, tg, port: int) -> Path:
    sections = {
        "agent": {
            "workspace": str(tmp_path / "ws"),
            "state_dir": str(tmp_path / "state"),
            "model": "openai/fake-model",
            "api_base": llm.base_url,
            "timezone": "UTC",
            "llm_max_retries": 0,
        },
        "heartbeat": {"every": "0m"},
        "outage": FAST_PROBE,
        "channels.telegram": {
            "enabled": True,
            "token_env": "TEST_TG_TOKEN",
            "api_base": tg.api_base,
            "poll_timeout": 1,
            "allow_from": [str(OWNER)],
        },
        "channels.http": {
            "enabled": True,
            "listen": f"127.0.0.1:{port}",
            "token_env": "TEST_TG_TOKEN",
        },
        "[hooks]": hook("gh", "github"),
    }
    path = tmp_path / "config.toml"
    path.write_text(toml(sections))
    return path


def db_ledger(db_path: Path) -> list[tuple[str, str]]:
    db = sqlite3.connect(db_path)
    try:
        q = "SELECT status, result FROM trigger_events WHERE verdict='accepted' ORDER BY rowid"
        return [(r[0], r[1]) for r in db.execute(q)]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


async def send_when_listening(port: int) -> int:
    for _ in range(200):  # the daemon may still be starting
        try:
            status, _ = await post(
                f"http://127.0.0.1:{port}/hooks/gh", body(1), signed("github", body(1), "k-1")
            )
            return status
        except OSError:  # aiohttp's connection errors are OSErrors
            await asyncio.sleep(0.1)
    raise AssertionError("the daemon never listened")


async def test_kill_9_while_an_event_waits_runs_it_once_after_the_restart(
    tmp_path, llm, tg, monkeypatch
):
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    port = free_port()
    cfg = write(tmp_path, llm, tg, port)
    db_path = tmp_path / "state" / "chela.sqlite3"
    log_path = tmp_path / "daemon.log"
    llm.go_down()
    proc = start(cfg, log_path)
    try:
        assert await send_when_listening(port) == 202
        await eventually(lambda: db_ledger(db_path) == [("waiting", WAITING)], timeout=30)
        kill9(proc)
        llm.come_up(answer)
        proc = start(cfg, log_path)
        await tg.wait_for(lambda: told(tg), timeout=60)
        await eventually(lambda: db_ledger(db_path)[0][0] == "done", timeout=30)
        await asyncio.sleep(1.0)  # anything run twice would show by now
    finally:
        rc = stop(proc)
    assert told(tg) == ["event n1 needs you"]
    assert db_ledger(db_path) == [("done", f"delivered to telegram:{OWNER}")]
    assert rc == 0
