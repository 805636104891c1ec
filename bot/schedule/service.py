"""The scheduler: the heartbeat and every job, on an injectable clock.

One small asyncio task per job sleeps until its next occurrence; every due occurrence ends
as exactly one ledger row (ran, skipped with a reason, missed).  A run first writes a
``running`` row keyed by (job, due): a second attempt at the same occurrence finds it and
does nothing, and a row a killed daemon left ``running`` is closed as interrupted at the
next start, never run again.  After a downtime only the latest missed occurrence of a job
is a candidate: inside the job's ``catch_up`` it runs once (catch-up), the older ones are
missed (superseded); otherwise all are missed and the owner gets one note for the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

from bot.agent.turn import zone
from bot.config import Config
from bot.reports.notices import Notices
from bot.rules import heartbeat as hb_rules
from bot.schedule import backups, maintenance, notes, sync
from bot.schedule.clock import Clock, WallClock
from bot.schedule.jobs import Job, due_between, next_after
from bot.schedule.registry import Registry
from bot.schedule.turns import Outcome, Scheduled
from bot.store import Store, pending

log = logging.getLogger("chela.heartbeat")

ON_TIME = 60.0  # seconds late an occurrence still counts as on time
BUSY_RETRY = 30.0  # a heartbeat that finds the main session busy tries again this much later
OUTAGE_POLL = 5.0  # a cron job due while the model is down looks again this much later


class Conflict(RuntimeError):
    """The job is running already."""


def ledger_result(out: Outcome) -> tuple[str, str, str]:
    """(status, reason, detail) of a run's outcome."""
    if out.status == "skipped":
        reason = "session busy" if out.reason == hb_rules.REASON_BUSY else out.reason
        return "skipped", reason, ""
    if out.status == "stopped":
        return "skipped", "stopped", ""
    detail = out.status + (f" ({out.reason})" if out.reason else "")
    return "ran", "", detail


class ScheduleService:
    """The daemon's scheduler, the cron tool's and ``/cron``'s API, and the Control UI's
    schedule service (``jobs``, ``run_now``, ``pause``, ``resume``)."""

    def __init__(
        self,
        cfg: Config,
        store: Store,
        scheduled: Scheduled,
        *,
        clock: Clock | None = None,
        notices: Notices | None = None,
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.scheduled = scheduled
        self.clock: Clock = clock or WallClock()
        self.notices = notices
        self.tz = zone(cfg)
        self.registry = Registry(cfg, store, self.tz)
        self._loops: dict[str, asyncio.Task] = {}
        self._runs: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self.booted = asyncio.Event()
        self.last_note = ""
        self.running = False  # started: this process runs the jobs (a chat never does)

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, housekeeping: bool = True) -> None:
        self.running = True
        self._spawn(self.boot())
        if housekeeping:
            self._spawn(sync.follow(self))  # jobs another process added, changed or removed
            self._spawn(maintenance.prune_forever(self.cfg, self.store))
            self._spawn(  # [backup] every
                backups.scheduled(self.cfg, self.store, self.clock, self.booted, self.scheduled)
            )

    async def boot(self) -> None:
        """Close what a killed daemon left running, settle what fell due while it was
        down (catch-ups, missed rows, one owner note), then start every job's loop."""
        for row in self.store.ledger_interrupted():
            log.warning("%s: its run due %s was interrupted by a stop", row["job"], row["due"])
        missed: dict[str, list[float]] = {}
        now = self.clock.now()
        for job in self.registry.load(now):
            dues = await self._settle(job, now, at_start=True)
            if dues and not job.heartbeat:
                missed[job.name] = dues
        for name in missed:
            ended = self.registry.get(name)
            if ended is not None and ended.one_shot:
                self._end_one_shot(ended)
        if missed:
            self.last_note = notes.note_text(missed, self.tz, now)
            await notes.send_note(
                self.cfg,
                self.store,
                self.scheduled.outbox,
                self.scheduled.channels,
                self.last_note,
            )
        for job in self.registry.jobs():
            self._watch(job)
        self.booted.set()

    def shutdown(self) -> None:
        for task in [*self._loops.values(), *self._runs.values(), *self._tasks]:
            task.cancel()
        self._loops.clear()

    async def prune_media(self) -> int:
        return await maintenance.prune_media(self.cfg, self.store)

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _watch(self, job: Job) -> None:
        old = self._loops.pop(job.name, None)
        if old is not None:
            old.cancel()
        self._loops[job.name] = asyncio.ensure_future(self._loop(job))

    # ------------------------------------------------------------------ the loop
    def _since(self, job: Job) -> float:
        last = self.store.ledger_last_due(job.name)
        return job.anchor if last is None else max(last, job.anchor)

    def next_run(self, job: Job) -> float | None:
        return next_after(job, max(self._since(job), self.clock.now()), self.tz)

    async def _loop(self, job: Job) -> None:
        try:
            while True:
                due = next_after(job, self._since(job), self.tz)
                if due is None:
                    return
                await self.clock.sleep_until(due)
                waited = await self._model_back(job)
                await self._settle(job, self.clock.now(), at_start=waited)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("schedule %s: its loop failed", job.name)

    async def _model_back(self, job: Job) -> bool:
        """A cron job due while the model is down waits for it, then catches up as after
        the daemon's downtime (True: it waited); the heartbeat is skipped instead."""
        waited = False
        while not job.heartbeat and pending.down_since(self.store) is not None:
            waited = True
            await self.clock.sleep_until(self.clock.now() + OUTAGE_POLL)
        return waited

    async def _settle(self, job: Job, now: float, *, at_start: bool) -> list[float]:
        """Every occurrence of ``job`` due by ``now`` and not in the ledger yet gets its
        row; returns the missed due times the owner's note names (none when caught up)."""
        dues, dropped = due_between(job, self._since(job), now, self.tz)
        if not dues:
            return []
        latest, older = dues[-1], dues[:-1]
        if dropped:
            log.info("%s: %d earlier occurrences were missed too", job.name, dropped)
        state = self.store.job_state(job.name) or {}
        if state.get("paused"):
            for d in dues:
                self.store.ledger_note(job.name, d, "skipped", "paused")
            return []
        late = now - latest
        on_time = 0.0 if at_start else ON_TIME  # due while the daemon was down: never on time
        if late <= on_time or (not job.heartbeat and late <= job.catch_up):
            catch_up = late > on_time
            reason = "superseded by catch-up" if catch_up else "superseded"
            for d in older:
                self.store.ledger_note(job.name, d, "missed", reason)
            await self._occur(job, latest, catch_up=catch_up)
            return []
        for d in dues:
            self.store.ledger_note(job.name, d, "missed", "" if at_start else "late")
        if job.one_shot and not at_start:
            self._end_one_shot(job)
        return dues

    # ------------------------------------------------------------------ one run
    def _no_target(self, job: Job) -> bool:
        """A cron job with nowhere to deliver is skipped before the model is asked; the
        heartbeat runs as §6 says (its outcome then says no-target)."""
        if job.target == "none" or job.heartbeat:
            return False
        return self.scheduled.resolve_target(job.target, job.to) is None

    async def _occur(
        self, job: Job, due: float, *, catch_up: bool = False, manual: bool = False
    ) -> str:
        """Start one occurrence's run (its ``running`` row first); the run id."""
        running = self._runs.get(job.name)
        if running is not None and not running.done():
            if manual:
                raise Conflict(f"{job.name} is running already")
            self.store.ledger_note(job.name, due, "skipped", "session busy")
            return ""
        if not manual and self._no_target(job):
            self.store.ledger_note(job.name, due, "skipped", "no target")
            return ""
        if job.heartbeat and not manual and pending.down_since(self.store) is not None:
            self.store.ledger_note(job.name, due, "skipped", "model down")  # not caught up
            return ""
        run_id = uuid.uuid4().hex
        if not self.store.ledger_begin(job.name, due, run_id, manual=manual, catch_up=catch_up):
            return ""  # this occurrence has its row already: never run twice
        self._publish(job.name, run_id, "running")
        task = asyncio.ensure_future(self._execute(job, due, run_id, manual=manual))
        self._runs[job.name] = task  # the job's loop goes on: a run still going when the
        return run_id  # next occurrence is due makes that one skipped (session busy)

    async def _call(self, job: Job) -> Outcome:
        agent = job.agent or None  # the job's agent; none named: the default agent
        if job.heartbeat:
            return await self.scheduled.heartbeat(agent=agent)
        return await self.scheduled.run_cron(job.name, job.prompt, job.target, job.to, agent)

    async def _call_heartbeat_when_free(self, job: Job, due: float) -> Outcome:
        """A heartbeat that finds the main session busy tries again shortly, until its
        next occurrence is due (then it was skipped: session busy)."""
        out = await self.scheduled.heartbeat(agent=job.agent or None)
        nxt = next_after(job, due, self.tz) or due
        while out.status == "skipped" and out.reason == hb_rules.REASON_BUSY:
            retry = self.clock.now() + BUSY_RETRY
            if retry >= nxt:
                break
            await self.clock.sleep_until(retry)
            out = await self.scheduled.heartbeat(agent=job.agent or None)
        return out

    async def _execute(self, job: Job, due: float, run_id: str, *, manual: bool) -> None:
        try:
            if job.heartbeat and not manual:
                out = await self._call_heartbeat_when_free(job, due)
            else:
                out = await self._call(job)
        except asyncio.CancelledError:
            raise  # the daemon stops: the row stays running, closed as interrupted at start
        except Exception as e:
            log.exception("schedule %s failed", job.name)
            out = Outcome("failed", str(e) or type(e).__name__)
        status, reason, detail = ledger_result(out)
        self.store.ledger_end(run_id, status, reason, detail)
        self._publish(job.name, run_id, status)
        if job.one_shot:
            self._end_one_shot(job)

    def _publish(self, name: str, run_id: str, status: str) -> None:
        if self.notices is not None:
            self.notices.publish("schedule.run", {"name": name, "run_id": run_id, "status": status})

    def _end_one_shot(self, job: Job) -> None:
        """A one-shot job whose occurrence ended: removed (a config job: marked ended)."""
        self.registry.end(job)
        loop = self._loops.pop(job.name, None)
        if loop is not None and loop is not asyncio.current_task():
            loop.cancel()

    # ------------------------------------------------------------------ control
    def _loaded(self) -> None:
        """A process that does not run the scheduler (``chela chat``, a CLI) reads the jobs
        as they are stored now: the daemon may have added or ended some."""
        if not self.running:
            self.registry.load(self.clock.now())

    def _job(self, name: str) -> Job:
        self._loaded()
        job = self.registry.get(name)
        if job is None:
            raise KeyError(name)
        return job

    async def run_now(self, name: str) -> str:
        """One occurrence now, delivered like a scheduled one (ledger: ran, manual); the
        schedule does not move.  KeyError: unknown; Conflict: running already; ValueError:
        this process does not run the scheduler (its outbox would reach no chat)."""
        job = self._job(name)
        if not self.running:
            raise ValueError(f"{name}: the daemon is not running here; start `chela run` to run it")
        return await self._occur(job, self.clock.now(), manual=True)

    async def wait_run(self, name: str) -> None:
        task = self._runs.get(name)
        if task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(task)

    def pause(self, name: str) -> bool:
        """True when the job was active (now paused); KeyError: unknown."""
        return self._set_paused(name, True)

    def resume(self, name: str) -> bool:
        """True when the job was paused (now active); KeyError: unknown."""
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> bool:
        self._job(name)
        was = bool((self.store.job_state(name) or {}).get("paused"))
        self.store.job_set_paused(name, paused)
        return was != paused

    def paused(self, name: str) -> bool:
        return bool((self.store.job_state(name) or {}).get("paused"))

    def add(self, job: Job) -> Job:
        """A tool job (validated by the registry); ValueError says why it is refused."""
        self._loaded()
        added = self.registry.add(job, self.clock.now())
        if self.running:  # else stored for the daemon, which picks it up (bot.schedule.sync)
            self._watch(added)
        return added

    def adopt(self, job: Job) -> None:
        """Run ``job`` from now on: a tool job another process stored or changed."""
        self.registry.put(job)
        self._watch(job)

    def forget(self, name: str) -> None:
        """Stop running a tool job another process removed."""
        self.registry.drop(name)
        loop = self._loops.pop(name, None)
        if loop is not None:
            loop.cancel()

    def remove(self, name: str) -> bool:
        """False: no such job; ValueError: a config job (edit config.toml)."""
        self._loaded()
        removed = self.registry.remove(name)
        if removed:
            loop = self._loops.pop(name, None)
            if loop is not None:
                loop.cancel()
        return removed

    def jobs(self) -> list[dict[str, Any]]:
        """The jobs as ``GET /ui/api/schedule`` lists them."""
        from bot.schedule.views import heartbeat_off, ui_job

        self._loaded()
        rows = [ui_job(self, job) for job in self.registry.jobs()]
        if self.registry.get("heartbeat") is None:
            rows.insert(0, heartbeat_off(self))
        return rows

    def listing(self) -> str:
        """One line per job (``/cron list``)."""
        from bot.schedule.views import listing

        self._loaded()
        return listing(self)

    def for_route(self, route: dict[str, Any]) -> Any:
        """The cron tool's view for a turn that came from ``route`` (its jobs deliver there)."""
        from bot.schedule.tool_api import ToolApi

        return ToolApi(self, route)
