"""The daemon's first components, each handed what it uses (its ports): fs → Store → channels.

The core over them (Outbox → Approvals → MCP → Agent → Conversation → Scheduled → Cron) is built in
:mod:`bot.app.core`, whose imports are the heavy part of start-up.  This module stays light:
``chela run`` opens the store and starts the first channels (all but :data:`AFTER_CORE`) from
here, before the core's modules are imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.app.channels import SPECS, SecretMissing, build_channel, enabled_channels
from bot.config import Config
from bot.store import Store, StoreError
from channels.base import Channel

log = logging.getLogger("chela.daemon")

# channels started once the core exists (their descriptor's after_core): the HTTP channel
# serves the Control UI (it needs the conversation), and a channel that takes each message from the
# platform for good on receipt would lose one held at the gate by a stop.  The others start
# first: a message at the gate stays with the platform (an unconfirmed update, an unacknowledged
# event), or, on a gateway that replays nothing, would not have reached a daemon that was not
# connected yet either.
AFTER_CORE = frozenset(name for name, spec in SPECS.items() if spec.after_core)


def prepare_dirs(cfg: Config) -> None:
    """The workspace (with its starter files when new), the state and media dirs."""
    from bot.fs import private_dir

    ws = cfg.agent.workspace
    try:
        if not ws.exists():
            from bot.prompt.init import init_workspace

            created = init_workspace(ws)
            log.info("created workspace %s with %d starter file(s)", ws, len(created))
        private_dir(cfg.agent.state_dir)
        private_dir(cfg.media_dir)
    except OSError as e:
        where = e.filename or cfg.agent.state_dir
        raise StoreError(
            f"cannot create or use {where}: {e.strerror or e}. agent.workspace and "
            "agent.state_dir must be directories Chela can write"
        ) from None


def configured_channels(
    cfg: Config,
    mounts: Callable[[], list[tuple[str, Any]]] | None = None,
    names: list[str] | None = None,
) -> dict[str, Channel]:
    """The adapters of the enabled channels (of those in ``names`` when given); one whose
    secret is missing is named and skipped.  ``mounts``: the sub-applications the HTTP channel
    serves beside its API (the UI)."""
    built: dict[str, Channel] = {}
    for name in enabled_channels(cfg):
        if names is not None and name not in names:
            continue
        try:
            built[name] = build_channel(cfg, name, mounts=mounts)  # only the HTTP row reads it
        except SecretMissing as e:
            log.error("channel %s not started: %s", name, e)
    return built


def open_store(cfg: Config, *, http_token: bool = True) -> Store:
    """The dirs, the HTTP API token (when the HTTP channel is on and ``http_token``) and the
    store.  Raises ``StoreError`` (dirs, database) or ``ConfigError`` (the token's env var)."""
    prepare_dirs(cfg)
    if http_token and cfg.channels.http.enabled:
        from bot.app.http_token import ensure_http_token

        ensure_http_token(cfg)  # before the agent reads the secrets it scrubs
    from bot.store.backup import before_migration

    before_migration(cfg)  # a newer database refused; an older one backed up, then migrated
    # each stored message is counted once, with the model's tokenizer
    return Store(cfg.db_path, token_counter=message_counter(cfg))


def message_counter(cfg: Config) -> Callable[[dict], int]:
    """:func:`bot.agent.compaction.message_counter`, looked up at the first count (nothing is
    stored before the core exists, which has imported it by then)."""
    counter: Callable[[dict], int] | None = None

    def count(message: dict) -> int:
        nonlocal counter
        if counter is None:
            from bot.agent.compaction import message_counter as of_config

            counter = of_config(cfg)
        return counter(message)

    return count


def early_channels(cfg: Config) -> dict[str, Channel]:
    """The enabled channels that start before the core exists (not :data:`AFTER_CORE`)."""
    return configured_channels(cfg, names=[n for n in enabled_channels(cfg) if n not in AFTER_CORE])
