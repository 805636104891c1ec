"""Using the CLI: a global --config before or after the subcommand, subcommand help pages that
say what the command does, a closed pipe that ends quietly, and one FAIL per bad model in
doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.cli.doctor import doctor
from bot.config import load_config
from tests.e2e import config_file

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path: Path, llm) -> Path:
    return config_file(
        tmp_path / "my.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )


@pytest.mark.parametrize("before", [True, False])
def test_config_before_or_after_the_subcommand(tmp_path, llm, capsys, before):
    path = str(_cfg(tmp_path, llm))
    argv = ["--config", path, "check"] if before else ["check", "--config", path]
    assert main(argv) == 0
    assert f"config: {path}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("command", "words"), [("check", "Validate the config"), ("run", "Run the daemon")]
)
def test_a_subcommand_help_says_what_it_does(capsys, command, words):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert words in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["check"], ["pairing", "list"], ["--help"]])
def test_a_closed_pipe_ends_quietly(tmp_path, llm, argv):
    path = str(_cfg(tmp_path, llm))
    full = argv if argv == ["--help"] else [*argv, "--config", path]
    r, w = os.pipe()
    os.close(r)  # the reader (`| head -1`) is gone before anything is written
    try:
        p = subprocess.run(
            [sys.executable, "-m", "bot", *full],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
    finally:
        os.close(w)
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr
    assert p.returncode in (0, 141)


async def test_doctor_says_fail_once_for_one_bad_model(tmp_path, llm):
    path = _cfg(tmp_path, llm)
    path.write_text(path.read_text().replace('"openai/fake-model"', '"llama3.2"'))
    findings = await doctor(load_config(str(path)))
    fails = [f for f in findings if f.level == "FAIL" and f.subject == "model"]
    assert len(fails) == 1 and "llama3.2" in fails[0].detail


async def test_doctor_checks_a_good_model_live(tmp_path, llm):
    findings = await doctor(load_config(str(_cfg(tmp_path, llm))))
    [model] = [f for f in findings if f.subject == "model"]
    assert model.level == "OK" and "answered in" in model.detail
