"""The daemon's log (bot/cli/common.py): one line per event on stderr and in
<state_dir>/logs/chela.log (0600, secrets redacted in both), rolled over at its size with
three old files kept."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from bot.cli import common
from bot.config import parse_config

SECRET = "123456:ABCDEF-the-bot-token"


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_LOG_TG_TOKEN", SECRET)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    yield parse_config(
        {
            "agent": {"workspace": str(tmp_path / "ws"), "state_dir": str(tmp_path / "state")},
            "channels": {"telegram": {"enabled": True, "token_env": "TEST_LOG_TG_TOKEN"}},
        }
    )
    for h in root.handlers:
        if h not in saved[0]:
            h.close()
    root.handlers[:], root.level = saved


def test_a_line_goes_to_stderr_and_to_the_private_file_with_secrets_redacted(cfg, capsys):
    common.setup_logging(cfg, "INFO")
    path = common.add_log_file(cfg)
    logging.getLogger("chela.test").info("polling with %s", SECRET)
    for h in logging.getLogger().handlers:
        h.flush()
    err = capsys.readouterr().err
    text = path.read_text()
    for out in (err, text):
        assert "INFO chela.test: polling with" in out
        assert SECRET not in out
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_the_file_rolls_over_at_its_size_and_keeps_three_old_files(cfg, monkeypatch):
    monkeypatch.setattr(common, "LOG_MAX_BYTES", 2000)
    common.setup_logging(cfg, "INFO")
    path = common.add_log_file(cfg)
    log = logging.getLogger("chela.test")
    for i in range(200):
        log.info("line %03d %s", i, "x" * 40)
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == ["chela.log", "chela.log.1", "chela.log.2", "chela.log.3"]
    assert all(p.stat().st_size <= 2000 for p in path.parent.iterdir())
    assert "line 199" in path.read_text()


def test_twin_a_small_log_stays_in_one_file(cfg):
    common.setup_logging(cfg, "INFO")
    path = common.add_log_file(cfg)
    for i in range(20):
        logging.getLogger("chela.test").info("line %d", i)
    assert [p.name for p in path.parent.iterdir()] == ["chela.log"]
