"""``[outage]``: what Chela does while no configured model answers (messages kept and
answered once it is back; see docs/architecture.md "outage")."""

from __future__ import annotations

from pydantic import field_validator

from .base import Model
from .durations import parse_duration


class OutageConfig(Model):
    probe_initial: str = "15s"  # the first wait before asking the model again
    probe_max: str = "5m"  # the longest wait between two probes
    max_wait: str = "6h"  # a message kept longer is not answered late (its sender is told)

    @field_validator("probe_initial", "probe_max", "max_wait")
    @classmethod
    def _duration(cls, v: str) -> str:
        if parse_duration(v) <= 0:
            raise ValueError(f"{v!r} must be longer than 0")
        return v

    @property
    def probe_initial_seconds(self) -> float:
        return parse_duration(self.probe_initial)

    @property
    def probe_max_seconds(self) -> float:
        return max(parse_duration(self.probe_max), self.probe_initial_seconds)

    @property
    def max_wait_seconds(self) -> float:
        return parse_duration(self.max_wait)
