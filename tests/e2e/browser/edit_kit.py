"""A daemon for the Control UI's editing tests: its config is a real ``config.toml`` (the
Config page edits that file) loaded as ``chela run`` loads it, and it gets ``chela check``'s
verdict the way ``chela run`` hands it down."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bot.cli.validate import validate
from bot.config import load_config
from tests.e2e.harness import running
from tests.e2e.ui_client import UiDaemon


def write_config(
    path: Path, llm: Any, tmp_path: Path, extra: str = "", agent: dict | None = None
) -> Path:
    """A commented config.toml: the fake model, the HTTP channel (and the UI) on a free port."""
    agent = {
        "workspace": str(tmp_path / "ws"),
        "state_dir": str(tmp_path / "state"),
        "model": "openai/fake-model",
        "api_base": llm.base_url,
        "timezone": "UTC",
        "llm_max_retries": 1,
        **(agent or {}),
    }
    lines = ["# my assistant", "[agent]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in agent.items()]
    lines += [
        "",
        "[heartbeat]",
        'every = "0m"  # no heartbeat',
        "",
        "[channels.http]",
        "enabled = true",
        'listen = "127.0.0.1:0"',
        "",
        "[tools]",
        'enabled = ["cron"]',
    ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@contextlib.asynccontextmanager
async def edit_daemon(
    tmp_path: Path, llm: Any, extra: str = "", agent: dict | None = None
) -> AsyncIterator[UiDaemon]:
    path = write_config(tmp_path / "config.toml", llm, tmp_path, extra, agent)
    (tmp_path / "ws").mkdir(exist_ok=True)
    cfg = load_config(str(path))
    async with running(cfg, config_check=validate) as d:
        port = d.channels["http"].bound_port  # type: ignore[attr-defined]
        yield UiDaemon(d, cfg, f"http://127.0.0.1:{port}")
