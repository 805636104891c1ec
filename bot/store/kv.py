"""Small named values (JSON), e.g. heartbeat state and the owner's last route."""

from __future__ import annotations

import json
from typing import Any

from bot.store.db import Database


KV_PUT = "INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)"


class KvMixin(Database):
    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def put(self, key: str, value: Any) -> None:
        self.db.execute(KV_PUT, (key, json.dumps(value)))

    def put_cursor(self, cursor: tuple[str, int] | None) -> None:
        """An adapter's platform position (the sink's ``cursor``) when its message keeps no
        row; nothing for None."""
        if cursor is not None:
            self.put(*cursor)
