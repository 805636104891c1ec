"""Which jobs exist: the heartbeat, ``[[cron]]`` jobs and the ``cron`` tool's jobs, each
with its anchor (a config job's creation is the first start that saw it) and its kept
state.  Adding checks a tool job: a unique name, a valid schedule, no past
``at``."""

from __future__ import annotations

import logging
from datetime import tzinfo

from bot.config import Config, agent_config, agent_ids
from bot.schedule.jobs import HEARTBEAT, Job, check_spec, local, next_after, parse_at
from bot.store import Store

log = logging.getLogger("chela.schedule")


def heartbeat_job(cfg: Config, agent: str = "") -> Job | None:
    """The heartbeat of ``agent`` (its ``[agents.<id>.heartbeat]``, else the top-level one):
    named ``heartbeat`` for the default agent, ``heartbeat:<id>`` for another."""
    own = agent_config(cfg, agent) if agent else cfg
    hb = own.heartbeat
    if hb.every_seconds <= 0:
        return None
    name = HEARTBEAT if own is cfg else f"{HEARTBEAT}:{agent}"
    return Job(
        name,
        "every",
        hb.every,
        target=hb.target,
        to=hb.to,
        catch_up=0,
        source="heartbeat",
        agent="" if own is cfg else agent,
    )


def heartbeat_jobs(cfg: Config) -> list[Job | None]:
    """Every agent's heartbeat, the default agent's first."""
    return [heartbeat_job(cfg), *(heartbeat_job(cfg, a) for a in agent_ids(cfg)[1:])]


def config_jobs(cfg: Config) -> list[Job]:
    return [
        Job(
            j.name,
            j.kind,  # type: ignore[arg-type]
            j.spec,
            prompt=j.prompt,
            target=j.target,
            to=j.to,
            catch_up=j.catch_up_seconds,
            agent=j.agent,
        )
        for j in cfg.cron
    ]


def tool_jobs(store: Store) -> list[Job]:
    return [
        Job(
            r["name"],
            r["kind"],
            r["spec"],
            prompt=r["prompt"],
            target=r["target"],
            to=r["to"],
            catch_up=r["catch_up"],
            source="tool",
            anchor=r["anchor"],
            route=r["route"],
            agent=str((r["route"] or {}).get("agent") or ""),  # the agent whose turn added it
        )
        for r in store.cron_jobs()
    ]


class Registry:
    def __init__(self, cfg: Config, store: Store, tz: tzinfo | None) -> None:
        self.cfg = cfg
        self.store = store
        self.tz = tz
        self._jobs: dict[str, Job] = {}

    def load(self, now: float) -> list[Job]:
        """Every job that still has occurrences, anchored."""
        self._jobs.clear()
        found = [*heartbeat_jobs(self.cfg), *config_jobs(self.cfg)]
        for job in found:
            if job is None:
                continue
            state = self.store.job_seen(job.name, f"{job.kind} {job.spec}", now)
            if job.one_shot and state.get("ended"):
                continue
            anchored = job.with_anchor(state["anchor"])
            if job.one_shot and anchored.anchor >= parse_at(job.spec, self.tz):
                log.error(
                    "[[cron]] %s: at = %s was already past when first seen", job.name, job.spec
                )
                self.store.job_ended(job.name)
                continue
            self._jobs[job.name] = anchored
        for job in tool_jobs(self.store):
            self.store.job_seen(job.name, f"{job.kind} {job.spec}", job.anchor)
            self._jobs.setdefault(job.name, job)
        return list(self._jobs.values())

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def get(self, name: str) -> Job | None:
        return self._jobs.get(name)

    def check(self, job: Job, now: float) -> Job:
        """``job`` anchored at ``now`` when its schedule may be added; ValueError says why
        not (bad spec, an ``at`` already past, no future occurrence).  The name is not
        looked at: :meth:`add` does that."""
        check_spec(job.kind, job.spec, self.tz)
        job = job.with_anchor(now)
        if job.kind == "at" and parse_at(job.spec, self.tz) <= now:
            raise ValueError(f"{job.spec} is already past: it is now {local(now, self.tz)}")
        if next_after(job, now, self.tz) is None:
            raise ValueError(f"{job.spec!r} has no future occurrence")
        return job

    def add(self, job: Job, now: float) -> Job:
        if job.name in self._jobs or job.name.split(":")[0] == HEARTBEAT:
            raise ValueError(f"a job named {job.name!r} exists already (remove it first)")
        job = self.check(job, now)
        stored = self.store.add_cron_job(
            job.name,
            job.kind,
            job.spec,
            job.prompt,
            target=job.target,
            to=job.to,
            catch_up=job.catch_up,
            anchor=now,
            route=job.route,
        )
        if not stored:
            raise ValueError(f"a job named {job.name!r} exists already (remove it first)")
        self.store.job_forget(job.name)
        self.store.job_seen(job.name, f"{job.kind} {job.spec}", now)
        self._jobs[job.name] = job
        return job

    def put(self, job: Job) -> None:
        """Hold ``job`` as it is stored (a tool job another process added or changed)."""
        self._jobs[job.name] = job

    def drop(self, name: str) -> None:
        """Forget a tool job another process removed (the store has it no more)."""
        self._jobs.pop(name, None)

    def remove(self, name: str) -> bool:
        job = self._jobs.get(name)
        if job is not None and job.source != "tool":
            raise ValueError(
                f"{name!r} comes from the config file: edit config.toml to remove it "
                "(it can be paused)"
            )
        removed = self.store.remove_cron_job(name)
        self._jobs.pop(name, None)
        if removed:
            self.store.job_forget(name)
        return removed

    def end(self, job: Job) -> None:
        self._jobs.pop(job.name, None)
        if job.source == "tool":
            self.store.remove_cron_job(job.name)
        self.store.job_ended(job.name)
