"""Helpers for end-to-end tests: a daemon wired to fake platforms and a fake LLM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from bot.config import Config, parse_config
from bot.app.daemon import Daemon

TG_TOKEN = "123456:TEST-telegram-token"


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = (
            deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out


def _agent(llm, workspace: Path, state_dir: Path) -> dict:
    return {
        "workspace": str(workspace),
        "state_dir": str(state_dir),
        "model": "openai/fake-model",
        "api_base": llm.base_url,
        "timezone": "UTC",
        "llm_max_retries": 1,
    }


def make_config(tmp_path: Path, llm, **sections: Any) -> Config:
    """A config for tests: workspace and state under tmp_path, the fake LLM, no heartbeats."""
    data = {"agent": _agent(llm, tmp_path / "ws", tmp_path / "state"), "heartbeat": {"every": "0m"}}
    return parse_config(deep_merge(data, sections))


def telegram_section(fake, **kw) -> dict:
    os.environ["TEST_TG_TOKEN"] = TG_TOKEN
    return {
        "telegram": {
            "enabled": True,
            "token_env": "TEST_TG_TOKEN",
            "api_base": fake.api_base,
            "poll_timeout": 1,
            "allow_from": ["42"],
            **kw,
        }
    }


def config_file(
    path: Path,
    llm,
    *,
    workspace: Path,
    state_dir: Path,
    heartbeat: dict | None = None,
    channels: dict | None = None,
) -> Path:
    """The same test config as a TOML file, for the CLI and daemon subprocesses.

    ``channels`` takes sections as :func:`telegram_section` returns them."""
    sections = {
        "agent": _agent(llm, workspace, state_dir),
        "heartbeat": {"every": "0m", **(heartbeat or {})},
    }
    for name, section in (channels or {}).items():
        sections[f"channels.{name}"] = section
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [
            f"{key} = {json.dumps(value)}" for key, value in values.items()
        ]  # JSON scalars are TOML
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.asynccontextmanager
async def running(cfg: Config, **kw):
    d = Daemon(cfg, **kw)
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


async def eventually(predicate, timeout: float = 10.0, interval: float = 0.02):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def system_prompt(request: dict) -> str:
    return request["messages"][0]["content"]


def all_text(request: dict) -> str:
    parts = []
    for m in request["messages"]:
        c = m.get("content")
        parts.append(c if isinstance(c, str) else str(c))
    return "\n".join(parts)


# A 5-9k-char answer of five numbered paragraphs and a tail, for the chunking tests.
LONG_ANSWER = (
    "\n\n".join(f"Paragraph {i}: " + "word " * 300 + "end." for i in range(5))
    + "\n\n"
    + "tail " * 200
    + "done."
)


def assert_long_answer_delivered(chunks: list[str], limit: int) -> None:
    """LONG_ANSWER arrived in several chunks within ``limit``, complete and in order."""
    assert len(chunks) >= 2
    assert all(0 < len(c) <= limit for c in chunks)
    joined = "\n".join(chunks)
    assert all(f"Paragraph {i}:" in joined for i in range(5))
    assert sum(c.count("word") for c in chunks) == 5 * 300
    assert joined.rstrip().endswith("done.")
