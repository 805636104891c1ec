"""``[heartbeat]``: the periodic turn (every, prompt, target, active hours); also the shape of
an agent's own ``[agents.<id>.heartbeat]``."""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import Model
from .channels import check_target
from .clock import check_hhmm, check_zone
from .durations import parse_duration


class ActiveHours(Model):
    start: str
    end: str
    timezone: str = ""

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        return check_hhmm(v, allow_24=False)

    @field_validator("end")
    @classmethod
    def _end(cls, v: str) -> str:
        return check_hhmm(v, allow_24=True)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return check_zone(v)


class HeartbeatConfig(Model):
    every: str = "30m"
    prompt: str = ""
    target: str = "last"
    to: str = ""
    ack_max_chars: int = Field(300, ge=0)
    active_hours: ActiveHours | None = None

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        return check_target(v)

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def every_seconds(self) -> float:
        return parse_duration(self.every)
