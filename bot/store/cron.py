"""Cron jobs added from chat or the CLI."""

from __future__ import annotations

import time

from bot.store.db import Database


class CronMixin(Database):
    def cron_jobs(self) -> list[dict]:
        return [
            dict(zip(("name", "schedule", "prompt", "target", "to"), r, strict=True))
            for r in self.db.execute(
                "SELECT name, schedule, prompt, target, to_ FROM cron_jobs ORDER BY name"
            )
        ]

    def add_cron_job(self, name: str, schedule: str, prompt: str, target: str, to: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO cron_jobs(name, schedule, prompt, target, to_, created) VALUES (?,?,?,?,?,?)",
            (name, schedule, prompt, target, to, time.time()),
        )

    def remove_cron_job(self, name: str) -> bool:
        return self.db.execute("DELETE FROM cron_jobs WHERE name=?", (name,)).rowcount > 0
