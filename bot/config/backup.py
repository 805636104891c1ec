"""``[backup]``: scheduled backups by the running daemon (``chela backup`` takes one by hand)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from .base import Model
from .durations import parse_duration


class BackupConfig(Model):
    every: str = "1d"  # "0m" turns scheduled backups off
    keep: int = Field(7, ge=1, le=10000)  # scheduled archives kept; the oldest beyond are pruned
    dir: str = ""  # "" = <state_dir>/backups

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        seconds = parse_duration(v)
        if 0 < seconds < 60:
            raise ValueError(f"every = {v!r} is too short: at least 1m (or 0m to turn it off)")
        return v

    @property
    def every_seconds(self) -> float:
        return parse_duration(self.every)

    def directory(self, state_dir: Path) -> Path:
        """Where archives go: ``dir`` (``~`` expanded), else ``<state_dir>/backups``."""
        return Path(self.dir).expanduser() if self.dir else Path(state_dir) / "backups"
