"""``[tools.browser]``: the browser tool (owner turns only; guests never)."""

from __future__ import annotations

from pydantic import Field, field_validator

from .base import Model
from .durations import parse_duration


class BrowserConfig(Model):
    enabled: bool = False  # offer the browser tool to owner turns
    executable: str = ""  # "" = /usr/bin/chromium, or chromium / chromium-browser on PATH
    headless: bool = True
    allow_hosts: list[str] = Field(
        default_factory=list
    )  # [] = any public host; "*.x.com" = subdomains
    deny_hosts: list[str] = Field(default_factory=list)
    idle_close: str = "10m"  # the browser closes when unused this long (at least 5s)
    max_tabs: int = Field(4, ge=1, le=20)
    snapshot_max_chars: int = Field(20_000, ge=500)
    download_max_mb: int = Field(25, ge=1)
    memory_mb: int = Field(1024, ge=128)  # the V8 heap limit given to the pages' JavaScript

    @field_validator("idle_close")
    @classmethod
    def _idle(cls, v: str) -> str:
        if parse_duration(v) < 5:
            raise ValueError("must be at least 5s")
        return v

    @field_validator("allow_hosts", "deny_hosts")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        out = []
        for raw in v:
            x = raw.strip().lower().rstrip(".")
            if not x or any(c in x for c in "/: @"):
                raise ValueError(f"{raw!r} is not a host name or '*.domain' pattern")
            if "*" in x and not (x.startswith("*.") and "*" not in x[2:]):
                raise ValueError(f"{raw!r}: a wildcard is allowed only as a leading '*.'")
            out.append(x)
        return out

    @property
    def idle_seconds(self) -> float:
        return parse_duration(self.idle_close)
