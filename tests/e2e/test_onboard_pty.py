"""Interactive `chela onboard` on a pseudo-terminal (issue 27 #1): the key variable follows
the provider, a failed model check does not send the user to `chela chat`, a wrong URL is
called a wrong URL, a re-run starts from the existing answers, a refused answer is gone."""

from __future__ import annotations

import asyncio
import tomllib

import pexpect
import pytest

from tests.e2e.test_first_hour_pty import expect, spawn

CLEAR = "\x15"  # Ctrl-U: drop the suggested answer


async def _finish(child: pexpect.spawn) -> str:
    await asyncio.to_thread(child.expect, pexpect.EOF, timeout=30)
    out = child.before or ""
    child.close()
    return out


def _onboard(tmp_path, *more: str) -> pexpect.spawn:
    cfg = tmp_path / "config.toml"
    return spawn(
        ["onboard", "--config", str(cfg), "--state-dir", str(tmp_path / "state"), *more],
        tmp_path,
    )


async def _answer_model(child, model: str, base: str) -> None:
    """Answer the model and URL questions, up to the key variable's."""
    await expect(child, "Model")
    child.send(CLEAR + model + "\r")
    await expect(child, "server URL")
    child.send(CLEAR + base + "\r")
    await expect(child, r"for none\)")


@pytest.mark.parametrize(
    ("model", "base", "var"),
    [
        ("anthropic/claude-3-5-haiku-latest", "", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.0-flash", "", "GEMINI_API_KEY"),
        ("openai/gpt-4o-mini", "", "OPENAI_API_KEY"),  # the twin: OpenAI keeps its own
        ("ollama/llama3.2", "http://127.0.0.1:11434", ""),
    ],
)
async def test_the_suggested_key_variable_follows_the_provider(tmp_path, model, base, var):
    child = _onboard(tmp_path, "--skip-model-check")
    try:
        await _answer_model(child, model, base)
        child.send("\r")  # keep the suggestion
        await expect(child, "Channels to enable")
        child.send("\r")
        await expect(child, "Workspace directory")
        child.send(CLEAR + str(tmp_path / "ws") + "\r")
        await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert tomllib.loads((tmp_path / "config.toml").read_text())["agent"]["api_key_env"] == var


async def test_a_wrong_url_is_named_and_no_next_chat_after_a_failed_check(tmp_path):
    child = _onboard(tmp_path)
    try:
        await _answer_model(child, "openai/fake-model", "http://127.0.0.1:9/v1")
        child.send(CLEAR + "\r")
        await expect(child, "Channels to enable")
        child.send("\r")
        await expect(child, "Workspace directory")
        child.send(CLEAR + str(tmp_path / "ws") + "\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1, out
    assert "http://127.0.0.1:9/v1 is not reachable" in out and "check agent.api_base" in out
    assert "try again in a moment" not in out
    assert "chela chat" not in out and "chela doctor" in out


async def test_a_rerun_asks_replace_first_and_suggests_the_existing_answers(tmp_path, llm):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        "[agent]\n"
        f'model = "openai/fake-model"\napi_base = "{llm.base_url}"\napi_key_env = "MY_KEY"\n'
        f'workspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
        "[channels.http]\nenabled = true\n"
    )
    child = _onboard(tmp_path)
    try:
        i = await expect(child, ["Replace it", "Model"])
        assert i == 0, "asked the questions before saying the file will be replaced"
        child.send("y\r")
        await expect(child, "Model")
        for _ in range(3):  # model, URL, key: Enter keeps the existing answers
            child.send("\r")
        await expect(child, "Channels to enable")
        child.send("\r")  # http, as before
        await expect(child, "Workspace directory")
        child.send("\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, out
    data = tomllib.loads(cfg.read_text())
    assert data["agent"]["model"] == "openai/fake-model"
    assert data["agent"]["api_base"] == llm.base_url and data["agent"]["api_key_env"] == "MY_KEY"
    assert data["agent"]["workspace"] == str(tmp_path / "ws")
    assert data["channels"]["http"]["enabled"] is True


async def test_declining_replace_asks_nothing_and_keeps_the_file(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[agent]\nmodel = "openai/x"\n')
    child = _onboard(tmp_path)
    try:
        await expect(child, "Replace it")
        child.send("n\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1 and "nothing written" in out and "Model" not in out
    assert cfg.read_text() == '[agent]\nmodel = "openai/x"\n'


async def test_a_refused_channel_name_leaves_nothing_to_type_over(tmp_path):
    child = _onboard(tmp_path, "--skip-model-check")
    try:
        await _answer_model(child, "openai/fake-model", "")
        child.send("\r")
        await expect(child, "Channels to enable")
        child.send("telgram\r")
        await expect(child, "choose from")
        child.send("http\r")
        await expect(child, "Workspace directory")
        child.send(CLEAR + str(tmp_path / "ws") + "\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, out
    data = tomllib.loads((tmp_path / "config.toml").read_text())
    assert data["channels"] == {"http": {"enabled": True}}
