"""The command line: prompt, context and init as a user runs them."""

import json

import pytest

from bot.cli import main


def run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def cfg(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        'timezone = "Europe/Paris"\n[channels.telegram]\nreactions = "extensive"\n'
    )
    return p


def test_prompt_needs_a_workspace_then_init_creates_it(cfg, tmp_path, capsys):
    rc, _, err = run(["prompt", "--config", str(cfg)], capsys)
    assert rc == 1 and "does not exist" in err and "chela init" in err
    rc, out, _ = run(["init", "--config", str(cfg)], capsys)
    assert rc == 0 and "BOOTSTRAP.md" in out and (tmp_path / "ws" / "AGENTS.md").is_file()
    rc, out, _ = run(["init", "--config", str(cfg)], capsys)
    assert rc == 0 and "nothing to do" in out


def test_prompt_json_fields(cfg, capsys):
    run(["init", "--config", str(cfg)], capsys)
    rc, out, _ = run(["prompt", "--config", str(cfg), "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and set(data) == {"prompt", "sections", "files", "chars", "approx_tokens"}
    assert data["chars"] == len(data["prompt"]) and data["approx_tokens"] == data["chars"] // 4
    assert all(set(s) == {"heading", "chars"} for s in data["sections"])
    f = {x["name"]: x for x in data["files"]}["AGENTS.md"]
    assert (
        set(f) == {"name", "path", "status", "raw_chars", "injected_chars"} and f["status"] == "ok"
    )
    assert "Time zone: Europe/Paris" in data["prompt"]


def test_prompt_for_a_channel_uses_the_adapter_and_policy(cfg, capsys):
    from channels.telegram import TelegramChannel

    run(["init", "--config", str(cfg)], capsys)
    rc, out, _ = run(
        [
            "prompt",
            "--config",
            str(cfg),
            "--channel",
            "telegram",
            "--chat-type",
            "group",
            "--group-name",
            "Dev Team",
        ],
        capsys,
    )
    caps = ",".join(TelegramChannel.capabilities.names())
    assert rc == 0 and f"channel=telegram | capabilities={caps}" in out
    assert 'Telegram group chat "Dev Team"' in out and "EXTENSIVE" in out
    rc, out, _ = run(["prompt", "--config", str(cfg), "--session", "subagent"], capsys)
    assert "## Subagent Context" in out and "## Silent Replies" not in out
    rc, out, _ = run(["prompt", "--config", str(cfg), "--mode", "none"], capsys)
    assert out.strip() == "You are a personal assistant running inside Chela."


def test_context_report(cfg, capsys):
    run(["init", "--config", str(cfg)], capsys)
    rc, out, _ = run(["context", "list", "--config", str(cfg)], capsys)
    assert rc == 0
    assert "Limits: 20000 chars per file | 150000 chars total" in out
    assert (
        "- AGENTS.md: OK | raw " in out
        and "- MEMORY.md: MISSING | raw 0 chars | injected 0 chars" in out
    )
    rc, out, _ = run(["context", "json", "--config", str(cfg)], capsys)
    assert rc == 0 and json.loads(out)


def _check_config(tmp_path, extra: str) -> str:
    p = tmp_path / "check.toml"
    p.write_text(
        f'[agent]\nworkspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n' + extra
    )
    return str(p)


def test_check_reports_the_sandbox_and_refuses_nothing_when_it_works(tmp_path, capsys, monkeypatch):
    from bot.agent.tools import sandbox

    sandbox.reset_cache()
    monkeypatch.setenv("CHELA_BWRAP", "/nonexistent/bwrap")
    rc, out, _ = run(["check", "--config", _check_config(tmp_path, "")], capsys)
    assert rc == 0 and "exec sandbox: NOT AVAILABLE" in out and "apt-get install bubblewrap" in out
    sandbox.reset_cache()
    monkeypatch.delenv("CHELA_BWRAP")
    if sandbox.probe().ok:  # twin: where bwrap works (CI installs it), check says so
        rc, out, _ = run(["check", "--config", _check_config(tmp_path, "")], capsys)
        assert rc == 0 and "exec sandbox: bwrap: OK (no network)" in out


def test_check_warns_when_the_owner_turns_the_sandbox_off(tmp_path, capsys):
    rc, out, _ = run(
        ["check", "--config", _check_config(tmp_path, '[tools.exec]\nsandbox = "off"\n')], capsys
    )
    assert rc == 0 and "exec sandbox: off" in out and 'warning: tools.exec.sandbox = "off"' in out


def test_check_says_where_the_http_token_is(tmp_path, capsys, monkeypatch):
    rc, out, _ = run(
        ["check", "--config", _check_config(tmp_path, "[channels.http]\nenabled = true\n")], capsys
    )
    assert rc == 0 and f"http token: file {tmp_path / 'state' / 'http-token'}" in out
    monkeypatch.delenv("CHELA_TEST_UNSET_TOKEN", raising=False)
    cfg = _check_config(
        tmp_path, '[channels.http]\nenabled = true\ntoken_env = "CHELA_TEST_UNSET_TOKEN"\n'
    )
    rc, out, _ = run(["check", "--config", cfg], capsys)
    assert rc == 1 and "CHELA_TEST_UNSET_TOKEN (MISSING" in out
    monkeypatch.setenv("CHELA_TEST_UNSET_TOKEN", "a-long-enough-token-value")
    rc, out, _ = run(["check", "--config", cfg], capsys)
    assert (
        rc == 0 and "CHELA_TEST_UNSET_TOKEN (set)" in out and "a-long-enough-token-value" not in out
    )
