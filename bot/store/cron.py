"""Jobs added with the ``cron`` tool, kept across restarts.

Rows of ``cron_jobs`` (crontab only, from before schedules had kinds) are moved into
``schedule_jobs`` the first time the jobs are read."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.store.db import Database

_COLUMNS = ("name", "kind", "spec", "prompt", "target", "to", "catch_up", "anchor", "route")


class CronMixin(Database):
    def _move_old_cron_jobs(self) -> None:
        with self._tx():
            self.db.execute(
                "INSERT OR IGNORE INTO schedule_jobs"
                "(name, kind, spec, prompt, target, to_, catch_up, anchor, route, created)"
                " SELECT name, 'schedule', schedule, prompt, target, to_, 3600, created, '{}',"
                " created FROM cron_jobs"
            )
            self.db.execute("DELETE FROM cron_jobs")

    def cron_jobs(self) -> list[dict[str, Any]]:
        self._move_old_cron_jobs()
        rows = self.db.execute(
            "SELECT name, kind, spec, prompt, target, to_, catch_up, anchor, route"
            " FROM schedule_jobs ORDER BY name"
        )
        out = []
        for r in rows:
            job = dict(zip(_COLUMNS, r, strict=True))
            job["route"] = json.loads(job["route"] or "{}")
            out.append(job)
        return out

    def add_cron_job(
        self,
        name: str,
        kind: str,
        spec: str,
        prompt: str,
        *,
        target: str = "last",
        to: str = "",
        catch_up: float = 3600.0,
        anchor: float = 0.0,
        route: dict[str, Any] | None = None,
    ) -> bool:
        """False when a job of that name exists (the name is refused)."""
        cur = self.db.execute(
            "INSERT OR IGNORE INTO schedule_jobs"
            "(name, kind, spec, prompt, target, to_, catch_up, anchor, route, created)"
            " VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                name,
                kind,
                spec,
                prompt,
                target,
                to,
                catch_up,
                anchor,
                json.dumps(route or {}),
                time.time(),
            ),
        )
        return cur.rowcount > 0

    def remove_cron_job(self, name: str) -> bool:
        return self.db.execute("DELETE FROM schedule_jobs WHERE name=?", (name,)).rowcount > 0
