"""Persistence: one SQLite database under ``state_dir``.

Everything that must survive a restart lives here: inbound messages (stored before the
platform is acknowledged), conversation history (including tool calls and results),
sessions (last route, activation), DM pairing, heartbeat state, cron jobs and the outbox
of every message to send (bot/outbox.py).

The daemon is a single asyncio process and SQLite calls on a local file take tens of
microseconds, so the store is used synchronously from the event loop; WAL mode keeps
readers and the writer out of each other's way.

The package: ``db`` (schema, opening, migrations, the transaction helper, the full-disk
test), ``rows`` (typed rows), one module per table group, ``turns`` (a turn, its outbox
rows and the inbound status in one transaction), and here the ``Store`` facade that
composes them, so callers keep writing ``store.x(...)`` and ``from bot.store import ...``.
"""

from __future__ import annotations

from bot import __version__
from bot.store import schema_version
from bot.store.cron import CronMixin
from bot.store.db import SCHEMA, USAGE_SCHEMA, StoreError, estimate_tokens, storage_full
from bot.store.group_history import GroupHistoryMixin
from bot.store.inbound import InboundMixin
from bot.store.kv import KvMixin
from bot.store.ledger import LedgerMixin
from bot.store.messages import MessagesMixin
from bot.store.outbox import OutboxMixin, _new_nonce
from bot.store.pairing import PairingMixin
from bot.store.rows import OUTBOX_PENDING, InboundRow, OutboxRow, WindowRow
from bot.store.sessions import SessionsMixin
from bot.store.summaries import SummariesMixin
from bot.store.turns import TurnsMixin
from bot.store.triggers import TriggersMixin
from bot.store.ui import UiAuthMixin
from bot.store.usage import UsageMixin
from bot.store.views import ViewsMixin

__all__ = [
    "OUTBOX_PENDING",
    "SCHEMA",
    "USAGE_SCHEMA",
    "InboundRow",
    "OutboxRow",
    "Store",
    "StoreError",
    "WindowRow",
    "_new_nonce",
    "estimate_tokens",
    "storage_full",
]


class Store(
    InboundMixin,
    TurnsMixin,
    MessagesMixin,
    SummariesMixin,
    SessionsMixin,
    OutboxMixin,
    GroupHistoryMixin,
    PairingMixin,
    KvMixin,
    CronMixin,
    LedgerMixin,
    UsageMixin,
    UiAuthMixin,
    ViewsMixin,
    TriggersMixin,
):
    """The state database: one connection, every table group's methods."""

    def _open(self) -> None:
        super()._open()
        # data migrations, after the schema (inside __init__'s StoreError guard)
        self._migrate_delivering()
        self._create_trigger_tables()
        schema_version.stamp(self.db, __version__)  # the migrations above have run
