"""Triggers from outside: signed webhooks (``hooks``: the signature schemes; ``web``: the
``/hooks`` sub-application) and new mail (``mail``: IMAP, read-only), each stored as an
event and run as one turn through the conversation pipeline (``events``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.config import Config
    from bot.triggers.events import Triggers


def hooks_mounts(cfg: Config, triggers: Callable[[], Triggers]) -> list[tuple[str, Any]]:
    """The ``/hooks`` sub-application for the HTTP channel (none without ``[[hooks]]``),
    built afresh at each start; ``triggers`` is read when it is built."""
    if not cfg.hooks:
        return []
    from bot.triggers.web import PREFIX, HookPorts, hooks_app

    t = triggers()
    secrets = {h.name: cfg.secret(h.secret_env) for h in cfg.hooks}
    ports = HookPorts(accept=t.accept, refuse=t.refuse, started=t.started)
    return [(PREFIX, hooks_app({h.name: h for h in cfg.hooks}, secrets, ports))]
