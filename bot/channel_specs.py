"""Old import path of :mod:`bot.app.channels`, kept while callers move."""

from bot.app.channels import (
    CONFIGURED,
    MESSAGING,
    SPECS,
    TERMINAL_ADAPTER,
    ChannelSpec,
    env_fields,
    title,
)

__all__ = [
    "CONFIGURED",
    "MESSAGING",
    "SPECS",
    "TERMINAL_ADAPTER",
    "ChannelSpec",
    "env_fields",
    "title",
]
