"""The scheduler under test on a manual clock: a real Store, lanes, outbox, run stage and
Scheduled, a channel that records what it is asked to send, and a scripted agent in the
model's place (it answers ``text``; with ``gate`` it waits for it first)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.request import TurnResult
from bot.config import parse_config
from bot.delivery.outbox import Outbox
from bot.schedule import ScheduleService, Scheduled
from bot.schedule.clock import ManualClock
from bot.conversation.lanes import SessionLanes
from bot.store import Store
from tests.unit.delivery.memory import ScriptedChannel, until

T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC: the manual clock's start
OWNER = "42"


class ScriptedAgent:
    def __init__(self, text: str = "Time to water the plants") -> None:
        self.text = text
        self.calls: list[Any] = []
        self.choices: list[Any] = []  # the session's /model and /think as each run saw them
        self.gate: asyncio.Event | None = None
        self.llm = object()  # the client the run stage's choice names

    async def run_turn(self, req, *, on_event=None) -> TurnResult:
        from bot.model.choice import CHOICE

        self.calls.append(req)
        self.choices.append(CHOICE.get())
        if self.gate is not None:
            await self.gate.wait()
        user = {"role": "user", "content": req.user_text}
        return TurnResult(
            text=self.text,
            to_store=[user, {"role": "assistant", "content": self.text}],
            turn_id=uuid.uuid4().hex,
        )


def config(tmp_path: Path, cron: list[dict] | None = None, heartbeat: str = "0m", **agent):
    return parse_config(
        {
            "agent": {
                "workspace": str(tmp_path / "ws"),
                "state_dir": str(tmp_path / "state"),
                "timezone": "UTC",
                **agent,
            },
            "heartbeat": {"every": heartbeat},
            "cron": cron or [],
            "channels": {
                "telegram": {"enabled": True, "token_env": "TG_TOKEN", "allow_from": [OWNER]}
            },
        }
    )


def job(name: str = "plants", **kind: str) -> dict:
    return {"name": name, "prompt": "Remind me to water the plants.", "target": "telegram",
            "to": OWNER, **kind}  # fmt: skip


@dataclass
class Rig:
    cfg: Any
    store: Store
    channel: ScriptedChannel
    agent: ScriptedAgent
    clock: ManualClock
    svc: ScheduleService
    outbox: Outbox
    extra: dict = field(default_factory=dict)

    def rows(self, name: str | None = None) -> list[tuple]:
        """(due offset from T0, status, reason or detail, marks) per ledger row."""
        out = []
        for r in self.store.ledger_rows(name):
            marks = "manual" if r["manual"] else "catch-up" if r["catch_up"] else ""
            out.append((r["due"] - T0, r["status"], r["reason"] or r["detail"], marks))
        return sorted(out)

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)
        await self.settled()

    async def settled(self) -> None:
        await until(lambda: not any(not t.done() for t in self.svc._runs.values()), "runs")
        for _ in range(20):
            await asyncio.sleep(0)

    async def close(self) -> None:
        self.svc.shutdown()
        await self.outbox.stop(grace=1)
        self.store.close()


async def rig(tmp_path: Path, cfg, *, at: float = T0, agent: ScriptedAgent | None = None) -> Rig:
    """A started scheduler on ``cfg`` with the clock at ``at`` (a restart: the same
    ``tmp_path``, so the same database)."""
    store = Store(tmp_path / "state.sqlite3")
    channel = ScriptedChannel()
    outbox = Outbox(store, {"telegram": channel})
    outbox.start(recover=False)
    agent = agent or ScriptedAgent()
    lanes = SessionLanes(4)
    agents = {cfg.agent.id: agent}
    scheduled = Scheduled(cfg, store, agents, lanes, outbox, {"telegram": channel})  # type: ignore[arg-type]
    clock = ManualClock(at)
    svc = ScheduleService(cfg, store, scheduled, clock=clock)
    svc.start(housekeeping=False)
    await asyncio.wait_for(svc.booted.wait(), 5)
    r = Rig(cfg, store, channel, agent, clock, svc, outbox)
    await r.settled()
    return r
