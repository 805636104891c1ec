"""Helpers for end-to-end tests: a daemon wired to fake platforms and a fake LLM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Callable
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


def _idle(d: Daemon) -> bool:
    """Nothing left to do in ``d``: every stored inbound message handled, no lane with a
    job, no background reply of the conversation, nothing queued or sending in the outbox and no
    send outcome waiting for the disk.  (It reads the daemon's own state; it changes nothing.)"""
    if d.store.unfinished_inbound():
        return False
    lanes, conv, outbox = d.lanes, d.conversation, d.outbox
    if lanes._workers or lanes._running or conv._tasks or conv._queued:
        return False
    if outbox.pending() or outbox._workers or outbox._unsaved:
        return False
    counts = d.store.outbox_counts()
    return not (counts.get("queued") or counts.get("sending"))


async def settled(d: Daemon, *consumed, timeout: float = 15.0) -> None:
    """Return once ``d`` has handled everything the platforms gave it: each ``consumed``
    predicate holds (the fake says the channel took all it was sent: :func:`tg_taken`,
    :func:`slack_taken`, :func:`signal_taken`, or :func:`stored` where the platform acks
    nothing) and the daemon is idle (:func:`_idle`).  A behaviour that IS about time (a
    retry's backoff, a periodic scan) is observed through what it leaves (attempt counts in
    the store, the fake's request log), not through this.

    A negative check is then: inject, ``await settled(d, ...)``, assert nothing happened; it
    waits for the reason (the message went through the daemon), not for a guessed second.
    Idle is required on two checks in a row with the loop run in between, so that a job
    handing work to the next stage (a lane's turn to the outbox) is not mistaken for rest."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    calm = 0
    while calm < 2:
        calm = calm + 1 if all(c() for c in consumed) and _idle(d) else 0
        if loop.time() > deadline:
            raise AssertionError("the daemon did not settle in time")
        await asyncio.sleep(0.01)


def store_idle(db_path: Path) -> bool:
    """For a daemon in another process: its database has no inbound row left to handle and
    no outbox row queued or sending (the process may still be busy; pair it with the
    platform fake's own evidence, e.g. :func:`tg_taken`)."""
    db = sqlite3.connect(db_path)
    try:
        pending = db.execute("SELECT COUNT(*) FROM inbound WHERE status='pending'").fetchone()
        unsent = db.execute(
            "SELECT COUNT(*) FROM outbox WHERE state IN ('queued','sending')"
        ).fetchone()
        return pending[0] == 0 and unsent[0] == 0
    finally:
        db.close()


def stored(d: Daemon, channel: str, *message_ids: object) -> Callable[[], bool]:
    """The daemon stored these platform messages as inbound rows: the evidence, on a platform
    that acknowledges nothing (Discord's gateway), that its sink took them."""
    want = {str(m) for m in message_ids}

    def taken() -> bool:
        rows = d.store.db.execute("SELECT message_id FROM inbound WHERE channel=?", (channel,))
        return want <= {r[0] for r in rows}

    return taken


def tg_taken(fake) -> Callable[[], bool]:
    """Every injected Telegram update confirmed: the channel confirms an update's offset only
    after the daemon's sink returned for it (stored or refused)."""
    return lambda: not fake.pending_updates


def slack_taken(fake) -> Callable[[], bool]:
    """Every Socket Mode envelope acknowledged: the handler awaits the sink before the ack."""
    return lambda: {e["envelope_id"] for e in fake.envelopes} <= set(fake.acks)


def signal_taken(d: Daemon, fake, name: str = "signal") -> Callable[[], bool]:
    """The channel handled the newest event of the fake's stream: the adapter records an
    event's id only after its handling (and the sink) returned."""

    def taken() -> bool:
        history = fake._history
        return not history or d.channels[name]._last_event_id == history[-1][0]

    return taken


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
