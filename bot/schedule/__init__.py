"""Schedules: the heartbeat and jobs, their ledger, catch-ups after a
downtime, and the scheduled turns that go through the conversation's run stage."""

from bot.schedule.service import Conflict, ScheduleService
from bot.schedule.turns import Outcome, Scheduled, resolve_target

__all__ = ["Conflict", "Outcome", "ScheduleService", "Scheduled", "resolve_target"]
