"""Small named values (JSON), e.g. heartbeat state and the owner's last route."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.store.db import Database


def kv_upsert(n: int) -> str:
    """ONE statement that writes ``n`` keys (bound as key, value, key, value, ...)."""
    return "INSERT OR REPLACE INTO kv(key, value) VALUES " + ",".join(["(?,?)"] * n)


def kv_params(values: Mapping[str, Any]) -> list[str]:
    """key, JSON, key, JSON, ...: a value under several keys (the owner's route, overall
    and for its channel) is encoded once."""
    params: list[str] = []
    encoded: dict[int, str] = {}  # by identity: every value is alive during the call
    for k, v in values.items():
        text = encoded.get(id(v))
        if text is None:
            text = encoded[id(v)] = json.dumps(v)
        params += (k, text)
    return params


class KvMixin(Database):
    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def put(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)", (key, json.dumps(value))
        )

    def put_many(self, values: Mapping[str, Any]) -> None:
        """Write several keys in ONE statement (so one transaction): all of them or none."""
        if values:
            self.db.execute(kv_upsert(len(values)), kv_params(values))
