"""The heartbeat's `last` route is the owner's, on every path that resolves it (SPEC §6, §9:
"setting the heartbeat's `last` route: owner yes, guest never").

End to end: fake Telegram → daemon → fake LLM.  The attack: the state database holds a
`last` route that is not the owner's any more — a friend who was on `allow_from` and was
taken off it (then paired as a guest), or a row stored by a version that recorded every
direct chat — and the heartbeat (one-shot `chela heartbeat` and the daemon's), a cron job
with target `last` or a channel id, and an exec approval request would all go to that
friend, carrying what the owner's memory produced.  Each has its legitimate twin."""

from __future__ import annotations

import asyncio

import pytest

from bot.agent.tools.sandbox import probe
from bot.cli import main as cli_main
from bot.store import Store
from tests.e2e import config_file, eventually, make_config, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import text, tool_calls
from tests.e2e.test_trust_e2e import FRIEND, OWNER, approve_friend

SECRET = "From your memory: the safe code is 4711."


@pytest.fixture(autouse=True)
def fast_pairing(monkeypatch):
    monkeypatch.setattr("bot.app.daemon.PAIRING_POLL", 0.05)


@pytest.fixture
def sandbox():
    status = probe()
    if not status.ok:
        pytest.skip(f"no sandbox here: {status.detail}")


def owner_cfg(tmp_path, llm, tg, *, allow_from=(str(OWNER),), **sections):
    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg, allow_from=list(allow_from)),
        heartbeat={"every": "24h", "target": "last"},
        **sections,
    )
    cfg.agent.workspace.mkdir(parents=True, exist_ok=True)
    (cfg.agent.workspace / "HEARTBEAT.md").write_text("# Checks\n- anything from MEMORY.md\n")
    (cfg.agent.workspace / "MEMORY.md").write_text("The safe code is 4711.\n")
    return cfg


def sent_to(tg, chat: int) -> list[str]:
    return [m.visible_text for m in tg.sent if m.chat_id == chat]


async def say(d, tg, who: int, words: str) -> None:
    n = len(tg.sent)
    tg.inject_message(who, words, from_id=who)
    await tg.wait_for_sent(n + 1, timeout=15)
    await eventually(lambda: not d.lanes.busy("agent:main:main"))


async def friend_was_on_allow_from(tmp_path, llm, tg) -> None:
    """Yesterday FRIEND was on allow_from and wrote after the owner: the stored `last`
    route is theirs."""
    llm.default = lambda req: text("ok")
    cfg = owner_cfg(tmp_path, llm, tg, allow_from=(str(OWNER), str(FRIEND)))
    async with running(cfg) as d:
        await say(d, tg, OWNER, "hi")
        await say(d, tg, FRIEND, "hi, I share this bot today")
        assert d.store.get("route:last")["chat_id"] == str(FRIEND)


async def paired_friend_writes(tmp_path, cfg, d, tg, capsys) -> None:
    """FRIEND pairs the way a person does, is answered, then writes again (a guest turn)."""
    n = len(tg.sent)
    await approve_friend(tmp_path, cfg, tg, capsys)
    # pairing code, the owner's notice, "approved", the answer
    await tg.wait_for_sent(n + 4, timeout=15)
    await say(d, tg, FRIEND, "what is new with the owner?")


def heartbeat_cli(tmp_path, llm, cfg, tg) -> tuple[int, str]:
    path = config_file(
        tmp_path / "hb.toml",
        llm,
        workspace=cfg.agent.workspace,
        state_dir=cfg.agent.state_dir,
        heartbeat={"every": "24h", "target": "last"},
        channels=telegram_section(tg),
    )
    rc = cli_main(["heartbeat", "--config", str(path), "--log-level", "ERROR"])
    return rc, path.read_text()


# ------------------------------------------------------------- one-shot `chela heartbeat`
async def test_heartbeat_command_never_goes_to_a_friend_taken_off_allow_from(
    tmp_path, llm, tg, capsys
):
    await friend_was_on_allow_from(tmp_path, llm, tg)
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
    before = len(sent_to(tg, FRIEND))
    llm.default = lambda req: text(SECRET)
    rc, _ = await asyncio.to_thread(heartbeat_cli, tmp_path, llm, cfg, tg)
    out = capsys.readouterr().out
    assert rc == 0
    assert all("4711" not in t for t in sent_to(tg, FRIEND)), sent_to(tg, FRIEND)
    assert len(sent_to(tg, FRIEND)) == before
    assert out.startswith("no-target") and "owner" in out, out


async def test_heartbeat_command_ignores_a_friends_route_stored_by_an_older_version(
    tmp_path, llm, tg, capsys
):
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
    # what a version that recorded every direct chat left behind
    old = {"channel": "telegram", "chat_id": str(FRIEND), "account": "default", "at": 1.0}
    store = Store(cfg.db_path)
    store.put("route:last", old)
    store.put("route:last:telegram", old)
    store.close()
    before = len(sent_to(tg, FRIEND))
    llm.default = lambda req: text(SECRET)
    rc, _ = await asyncio.to_thread(heartbeat_cli, tmp_path, llm, cfg, tg)
    assert rc == 0 and len(sent_to(tg, FRIEND)) == before
    assert "no-target" in capsys.readouterr().out


async def test_heartbeat_command_goes_to_the_owner_after_a_paired_friend_wrote(
    tmp_path, llm, tg, capsys
):
    """Twin: the owner writes, the paired friend writes after them: the owner gets it."""
    llm.default = lambda req: text("ok")
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await say(d, tg, OWNER, "hi")
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
    friend_before = len(sent_to(tg, FRIEND))
    llm.default = lambda req: text(SECRET)
    rc, _ = await asyncio.to_thread(heartbeat_cli, tmp_path, llm, cfg, tg)
    assert rc == 0
    await tg.wait_for(lambda: [t for t in sent_to(tg, OWNER) if "4711" in t], timeout=10)
    assert len(sent_to(tg, FRIEND)) == friend_before
    assert capsys.readouterr().out.startswith("delivered to telegram:42")


async def test_heartbeat_command_with_only_a_friends_history_goes_nowhere(
    tmp_path, llm, tg, capsys
):
    llm.default = lambda req: text("ok")
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
    before = len(tg.sent)
    llm.default = lambda req: text(SECRET)
    rc, _ = await asyncio.to_thread(heartbeat_cli, tmp_path, llm, cfg, tg)
    assert rc == 0 and len(tg.sent) == before
    out = capsys.readouterr().out
    assert out.startswith("no-target") and "owner" in out, out


# ------------------------------------------------------------ the daemon's own heartbeat
async def test_daemon_heartbeat_never_goes_to_a_friend_taken_off_allow_from(
    tmp_path, llm, tg, capsys
):
    await friend_was_on_allow_from(tmp_path, llm, tg)
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
        before = len(sent_to(tg, FRIEND))
        llm.default = lambda req: text(SECRET)
        out = await d.scheduled.heartbeat()
        assert out.status == "no-target" and out.target is None, out
        # twin: once the owner writes again, the heartbeat is theirs
        llm.default = lambda req: text("ok")
        await say(d, tg, OWNER, "morning")
        llm.default = lambda req: text(SECRET + " Also: the plants.")
        out = await d.scheduled.heartbeat()
        assert out.status == "delivered" and out.target["chat_id"] == str(OWNER), out
        await settled(d, tg_taken(tg))
    assert len(sent_to(tg, FRIEND)) == before


async def test_daemon_heartbeat_goes_to_the_owner_when_the_owner_wrote_last(
    tmp_path, llm, tg, capsys
):
    """Twin: friend first, owner last: the owner's chat, as always."""
    llm.default = lambda req: text("ok")
    cfg = owner_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
        await say(d, tg, OWNER, "hi")
        llm.default = lambda req: text(SECRET)
        out = await d.scheduled.heartbeat()
        assert out.status == "delivered" and out.target["chat_id"] == str(OWNER), out
        await tg.wait_for(lambda: [t for t in sent_to(tg, OWNER) if "4711" in t], timeout=10)
    assert all("4711" not in t for t in sent_to(tg, FRIEND))


# ------------------------------------------------------------------------------ cron
CRON = [
    {"name": "brief", "schedule": "0 9 * * *", "prompt": "Morning brief.", "target": "last"},
    {"name": "tg", "schedule": "0 9 * * *", "prompt": "Telegram brief.", "target": "telegram"},
]


async def fire(d, name: str) -> dict:
    d.store.put(f"cron:last_run:{name}", None)
    await d.cron.booted.wait()
    await d.cron.run_now(name)
    await eventually(lambda: d.store.get(f"cron:last_run:{name}"), timeout=15)
    return d.store.get(f"cron:last_run:{name}")


async def test_cron_jobs_never_go_to_a_friend_taken_off_allow_from(tmp_path, llm, tg, capsys):
    await friend_was_on_allow_from(tmp_path, llm, tg)
    cfg = owner_cfg(tmp_path, llm, tg, cron=CRON)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
        before = len(sent_to(tg, FRIEND))
        llm.default = lambda req: text(SECRET)
        assert (await fire(d, "brief"))["status"] == "no-target"
        assert (await fire(d, "tg"))["status"] == "no-target"
        # twin: the owner writes; both jobs reach the owner
        llm.default = lambda req: text("ok")
        await say(d, tg, OWNER, "morning")
        llm.default = lambda req: text(SECRET)
        assert (await fire(d, "brief"))["status"] == "delivered"
        assert (await fire(d, "tg"))["status"] == "delivered"
        await settled(d, tg_taken(tg))
    assert len(sent_to(tg, FRIEND)) == before
    assert len([t for t in sent_to(tg, OWNER) if "4711" in t]) == 2


# ------------------------------------------------------------------ exec approvals
def approvals_cfg(tmp_path, llm, tg):
    return owner_cfg(
        tmp_path,
        llm,
        tg,
        tools={"enabled": ["exec"], "guest": ["exec"], "exec": {"security": "ask"}},
    )


async def friend_asks_for_a_command(d, tg, llm) -> None:
    llm.script(tool_calls([("exec", {"command": "touch marker.txt"})]), text("done"))
    n = len(tg.sent)
    tg.inject_message(FRIEND, "run touch marker.txt please", from_id=FRIEND)
    await tg.wait_for_sent(n + 1, timeout=15)


async def test_approval_requests_never_go_to_a_friend_taken_off_allow_from(
    tmp_path, llm, tg, capsys, sandbox
):
    await friend_was_on_allow_from(tmp_path, llm, tg)
    cfg = approvals_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
        await friend_asks_for_a_command(d, tg, llm)
        await eventually(lambda: not d.lanes.busy("agent:main:telegram:direct:77"), timeout=15)
    asked = [t for t in sent_to(tg, FRIEND) if "waiting for your approval" in t]
    assert asked == []
    tool_msgs = [m for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]
    assert "approval cannot be asked for here" in tool_msgs[-1]["content"]


async def test_approval_requests_from_a_friends_turn_go_to_the_owner(
    tmp_path, llm, tg, capsys, sandbox
):
    """Twin: the owner has a direct chat; the friend's held command is asked there."""
    await friend_was_on_allow_from(tmp_path, llm, tg)
    cfg = approvals_cfg(tmp_path, llm, tg)
    async with running(cfg) as d:
        await paired_friend_writes(tmp_path, cfg, d, tg, capsys)
        llm.default = lambda req: text("ok")
        await say(d, tg, OWNER, "hi")
        llm.script(tool_calls([("exec", {"command": "touch marker.txt"})]), text("done"))
        tg.inject_message(FRIEND, "run touch marker.txt please", from_id=FRIEND)
        sent = await tg.wait_for(
            lambda: [m for m in tg.sent if "waiting for your approval" in m.visible_text],
            timeout=15,
        )
        assert sent[0].chat_id == OWNER
        code = sent[0].visible_text.split("/deny ")[1][:6]
        n = len(tg.sent)
        tg.inject_message(OWNER, f"/deny {code}", from_id=OWNER)
        await tg.wait_for_sent(n + 2, timeout=15)  # "Denied" and the friend's answer
    assert all("waiting for your approval" not in t for t in sent_to(tg, FRIEND))
