"""The daemon's first components, each handed what it uses (its ports): fs → Store → channels.

The core over them (Outbox → Approvals → MCP → Agent → Conversation → Scheduled → Cron) is built
in :mod:`bot.app.core`, which calls these first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.app.channels import SecretMissing, build_channel, enabled_accounts
from bot.agent.compaction import message_counter
from bot.config import Config, agent_config, agent_ids
from bot.store import Store, StoreError
from bot.store.disk import Publish
from channels.base import Channel, account_key

log = logging.getLogger("chela.daemon")


def prepare_dirs(cfg: Config) -> None:
    """Every agent's workspace (with its starter files when new), the state and media dirs."""
    from bot.fs import private_dir

    try:
        for agent_id in agent_ids(cfg):
            ws = agent_config(cfg, agent_id).agent.workspace
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
    store: Store | None = None,
) -> dict[str, Channel]:
    """The adapters of the enabled channels (of those in ``names`` when given); one whose
    secret is missing is named and skipped.  ``mounts``: the sub-applications the HTTP channel
    serves beside its API (the UI); ``store``: where a poll-based account keeps its cursor."""
    built: dict[str, Channel] = {}
    for name, account in enabled_accounts(cfg):  # one adapter per account
        if names is not None and name not in names:
            continue
        key = account_key(name, account)
        try:  # only the HTTP row reads mounts
            built[key] = build_channel(cfg, name, mounts=mounts, account=account, store=store)
        except SecretMissing as e:
            log.error("channel %s not started: %s", key, e)
    return built


def open_store(cfg: Config, *, http_token: bool = True, publish: Publish | None = None) -> Store:
    """The dirs, the HTTP API token (when the HTTP channel is on and ``http_token``) and the
    store (``publish``: where its disk-full alarm tells the owner).  Raises ``StoreError``
    (dirs, database) or ``ConfigError`` (the token's env var)."""
    prepare_dirs(cfg)
    if http_token and cfg.channels.http.enabled:
        from bot.app.http_token import ensure_http_token

        ensure_http_token(cfg)  # before the agent reads the secrets it scrubs
    from bot.store.backup import before_migration

    before_migration(cfg)  # a newer database refused; an older one backed up, then migrated
    # each stored message is counted once, with the model's tokenizer
    return Store(cfg.db_path, token_counter=message_counter(cfg), publish=publish)
