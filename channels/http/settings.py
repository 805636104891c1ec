"""What ``HttpChannel`` takes from ``[channels.http]`` and the app, as one typed value."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiohttp import web

from channels.http.adapter import HttpChannel

# the sub-applications served beside the API, by path prefix (the Control UI)
Mounts = Callable[[], Iterable[tuple[str, web.Application]]]


@dataclass(frozen=True)
class HttpSettings:
    host: str
    port: int
    token: str
    model_name: str
    allowed_origins: tuple[str, ...]
    token_hint: str  # where the token is, for the refusal of a request without it
    mounts: Mounts | None = None
    more_models: tuple[str, ...] = ()  # every other agent's chela/<id>

    def open(self) -> HttpChannel:
        return HttpChannel(
            host=self.host,
            port=self.port,
            token=self.token,
            model_name=self.model_name,
            allowed_origins=self.allowed_origins,
            token_hint=self.token_hint,
            mounts=self.mounts,
            more_models=self.more_models,
        )
