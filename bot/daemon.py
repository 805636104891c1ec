"""Old import path of :mod:`bot.app.daemon`, kept while callers move: the same module object,
so ``monkeypatch.setattr("bot.daemon.PAIRING_POLL", …)`` still reaches the daemon."""

import sys

from bot.app import daemon as _daemon
from bot.app.daemon import (
    PAIRING_POLL,
    Daemon,
    SecretMissing,
    build_channel,
    channel_class,
    enabled_channels,
    heartbeat_schedule,
    startup_lines,
)

__all__ = [
    "PAIRING_POLL",
    "Daemon",
    "SecretMissing",
    "build_channel",
    "channel_class",
    "enabled_channels",
    "heartbeat_schedule",
    "startup_lines",
]

sys.modules[__name__] = _daemon
