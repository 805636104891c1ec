"""A test-only channel, "echo", made the way a real one is (CONTRIBUTING.md, "Add a channel"):
a section class as in ``bot/config/channels.py``, an adapter with its frozen ``Settings`` as in
``channels/<name>/``, and a registry row as in ``bot/app/channels.py``.  The channel checklist
test passes it as complete; the adapter replies by keeping what it was asked to send."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from bot.app.channels import ChannelSpec, Given
from bot.app.probes import Probe
from bot.config import Config
from bot.config.channels import ChannelPolicy
from channels.base import Channel, InboundSink, OutboundMessage


class EchoConfig(ChannelPolicy):
    TITLE: ClassVar[str] = "Echo"

    token_env: str = "ECHO_TOKEN"
    greeting: str = "hello"


class EchoChannel(Channel):
    name = "echo"

    def __init__(self, *, token: str, greeting: str, media_dir: Path) -> None:
        self.token = token
        self.greeting = greeting
        self.media_dir = media_dir
        self.sent: list[OutboundMessage] = []

    async def start(self, sink: InboundSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        return None

    async def send(self, msg: OutboundMessage) -> list[str]:
        self.sent.append(msg)
        return [str(len(self.sent))]


@dataclass(frozen=True)
class EchoSettings:
    token: str
    greeting: str
    media_dir: Path

    def open(self) -> EchoChannel:
        return EchoChannel(token=self.token, greeting=self.greeting, media_dir=self.media_dir)


def _echo(g: Given[EchoConfig]) -> EchoSettings:
    return EchoSettings(
        token=g.secrets["token_env"], greeting=g.section.greeting, media_dir=g.media_dir
    )


def _adapter() -> type[Channel]:
    return EchoChannel


async def _probe(session: Any, cfg: Config) -> Probe:
    return Probe(True, "echo answers")


ECHO_SPEC: ChannelSpec[EchoConfig] = ChannelSpec(
    "echo", EchoConfig, _adapter, _echo, owner_id_hint="your echo id", probe=_probe
)
