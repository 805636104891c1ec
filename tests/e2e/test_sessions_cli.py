"""`chela sessions list|show|export|reset` (issue 27, "what a new user expects to find"):
a DM answered by the daemon through the fake Telegram and the fake model is listed, shown,
exported and reset from the command line; the reset session's next turn starts afresh."""

from __future__ import annotations

import json

from bot.cli.main import main
from bot.config import load_config
from tests.e2e import config_file, running, telegram_section
from tests.fakes.llm import text

KEY = "agent:main:main"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


async def test_sessions_list_show_export_and_reset(tmp_path, llm, tg, capsys):
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    cfg = load_config(str(path))
    llm.script(text("the first answer"), text("a fresh answer"))
    async with running(cfg):
        tg.inject_message(42, "remember the word kumquat", from_id=42)
        await tg.wait_for_sent(1, timeout=20)

        rc, out, _ = cli(capsys, "sessions", "--config", str(path), "list")
        assert rc == 0 and KEY in out and "messages" in out
        rc, out, _ = cli(capsys, "sessions", "--config", str(path), "show", KEY)
        assert rc == 0 and "] user: " in out and "remember the word kumquat" in out
        assert "assistant: the first answer" in out
        rc, out, _ = cli(capsys, "sessions", "--config", str(path), "show", KEY, "--json")
        roles = [m["role"] for m in json.loads(out)]
        assert rc == 0 and roles == ["user", "assistant"]
        rc, out, _ = cli(capsys, "sessions", "--config", str(path), "export", KEY)
        assert rc == 0 and out.startswith(f"# {KEY}") and "**assistant**" in out
        rc, out, _ = cli(
            capsys, "sessions", "--config", str(path), "export", KEY, "--format", "json"
        )
        assert rc == 0 and json.loads(out)["session"] == KEY

        rc, out, _ = cli(capsys, "sessions", "--config", str(path), "reset", KEY)
        assert rc == 0 and "afresh" in out
        tg.inject_message(42, "what was the word?", from_id=42)
        await tg.wait_for_sent(2, timeout=20)
    # the reset session's next turn did not carry the old messages
    assert "kumquat" not in json.dumps(llm.requests[1]["messages"][1:])
    assert "kumquat" in json.dumps(llm.requests[0]["messages"][1:])


async def test_an_unknown_session_is_refused_and_nothing_is_created(tmp_path, llm, tg, capsys):
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    llm.script(text("hi"))
    async with running(load_config(str(path))):
        tg.inject_message(42, "hello", from_id=42)
        await tg.wait_for_sent(1, timeout=20)
    for verb in ("show", "export", "reset"):
        rc, _, err = cli(capsys, "sessions", "--config", str(path), verb, "agent:main:nope")
        assert rc == 1 and "no session 'agent:main:nope'" in err
    rc, out, _ = cli(capsys, "sessions", "--config", str(path), "list")
    assert rc == 0 and "agent:main:nope" not in out and KEY in out
