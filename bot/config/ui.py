"""``[ui]``: the Control UI served under ``/ui/`` by ``[channels.http]``."""

from __future__ import annotations

import re

from pydantic import field_validator

from .base import Model
from .durations import parse_duration

# "https://host[:port]" or "http://host[:port]": scheme, host and an optional port, nothing else
_ORIGIN = re.compile(r"(https?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?")


def _positive(v: str) -> str:
    if parse_duration(v) <= 0:
        raise ValueError(f"invalid duration {v!r}: must be more than 0")
    return v


class UiConfig(Model):
    enabled: bool = True  # served when [channels.http] is enabled
    session_idle: str = "12h"  # a browser session unused this long ends
    session_max: str = "7d"  # and ends this long after login whatever its use
    read_only: bool = False  # every write route but login/logout answers 403 read_only
    public_origin: str = ""  # "https://host[:port]" behind a TLS proxy; "" = loopback only

    @field_validator("session_idle", "session_max")
    @classmethod
    def _duration(cls, v: str) -> str:
        return _positive(v)

    @field_validator("public_origin")
    @classmethod
    def _origin(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not _ORIGIN.fullmatch(v):
            raise ValueError(
                f"{v!r} is not an origin: use scheme://host[:port] with no path, e.g. "
                "'https://chela.example.net'"
            )
        return v.lower()

    @property
    def idle_seconds(self) -> float:
        return parse_duration(self.session_idle)

    @property
    def max_seconds(self) -> float:
        return parse_duration(self.session_max)

    @property
    def public_host(self) -> str:
        """The host of ``public_origin`` (no brackets, no port); "" when unset."""
        m = _ORIGIN.fullmatch(self.public_origin)
        return m.group(2).strip("[]") if m else ""

    @property
    def secure(self) -> bool:
        """The cookie is ``Secure``: the public origin is https."""
        return self.public_origin.startswith("https://")
