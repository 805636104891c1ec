"""`chela onboard` checks the model string before it writes anything, and its "Replace it?"
question takes a line like every other (issue 37 #10): the real CLI, on a pseudo-terminal
for the questions and as a script for the flags."""

from __future__ import annotations

import tomllib

from tests.e2e.test_first_hour import chela
from tests.e2e.test_onboard_pty import CLEAR, _finish, _onboard
from tests.e2e.test_first_hour_pty import expect


async def test_an_unprefixed_model_is_refused_at_its_question(tmp_path, llm):
    child = _onboard(tmp_path, "--skip-model-check")
    try:
        await expect(child, "Model")
        child.send(CLEAR + "test-model\r")
        i = await expect(child, ["provider prefix", "server URL"])
        assert i == 0, "the unprefixed model was taken"
        await expect(child, "Model")  # asked again, with nothing to type over
        child.send(CLEAR + "openai/test-model\r")
        await expect(child, "server URL")
        child.send(CLEAR + llm.base_url + "\r")
        await expect(child, r"for none\)")
        child.send("\r")
        await expect(child, "Channels to enable")
        child.send("\r")
        await expect(child, "Workspace directory")
        child.send(CLEAR + str(tmp_path / "ws") + "\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, out
    agent = tomllib.loads((tmp_path / "config.toml").read_text())["agent"]
    assert (agent["model"], agent["api_base"]) == ("openai/test-model", llm.base_url)


async def test_flags_with_an_unprefixed_model_write_nothing(tmp_path, llm):
    cfg = tmp_path / "config.toml"
    args = ["onboard", "--non-interactive", "--config", str(cfg)]
    args += ["--state-dir", str(tmp_path / "state"), "--workspace", str(tmp_path / "ws")]
    c = await chela(*args, "--model", "test-model", "--api-base", llm.base_url)
    assert c.returncode == 1, c.stdout + c.stderr
    assert "agent.model = 'test-model'" in c.stderr and "provider prefix" in c.stderr
    assert not cfg.exists() and not (tmp_path / "ws").exists()
    assert llm.requests == []  # refused before the model check, too
    # the twin: the same flags with a prefix write the config and the model answers
    llm.script("ok")
    c = await chela(*args, "--model", "openai/test-model", "--api-base", llm.base_url)
    assert c.returncode == 0, c.stdout + c.stderr
    assert tomllib.loads(cfg.read_text())["agent"]["model"] == "openai/test-model"


def _existing(tmp_path, llm) -> None:
    (tmp_path / "config.toml").write_text(
        "[agent]\n"
        f'model = "openai/fake-model"\napi_base = "{llm.base_url}"\napi_key_env = ""\n'
        f'workspace = "{tmp_path / "ws"}"\nstate_dir = "{tmp_path / "state"}"\n'
    )


async def test_replace_takes_a_line_so_enter_answers_nothing_else(tmp_path, llm):
    _existing(tmp_path, llm)
    child = _onboard(tmp_path, "--skip-model-check")
    try:
        await expect(child, r"Replace it\? .*\(y/n\)")
        child.send("y\r")  # y, then Enter: one answer
        await expect(child, "Model")
        child.send(CLEAR + "openai/other-model\r")
        await expect(child, "server URL")
        child.send("\r")  # the existing URL
        await expect(child, r"for none\)")
        child.send("\r")
        await expect(child, "Channels to enable")
        child.send("\r")
        await expect(child, "Workspace directory")
        child.send("\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, out
    agent = tomllib.loads((tmp_path / "config.toml").read_text())["agent"]
    assert (agent["model"], agent["api_base"]) == ("openai/other-model", llm.base_url)


async def test_replace_asks_again_until_y_or_n_and_n_keeps_the_file(tmp_path, llm):
    _existing(tmp_path, llm)
    before = (tmp_path / "config.toml").read_text()
    child = _onboard(tmp_path, "--skip-model-check")
    try:
        await expect(child, "Replace it")
        child.send("\r")  # Enter alone is no answer
        await expect(child, "y or n")
        await expect(child, "Replace it")
        child.send("no\r")
        out = await _finish(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1 and "nothing written" in out and "Model" not in out
    assert (tmp_path / "config.toml").read_text() == before
