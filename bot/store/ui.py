"""The Control UI's login codes and browser sessions.

Nothing here can be used if read: a login code and a session's cookie and CSRF token are
stored only as their SHA-256 (the values exist only in the owner's terminal and browser).
A code is single use (taken = deleted), valid for ``CODE_TTL`` seconds, and at most
``MAX_CODES`` unused ones are kept (a new one evicts the oldest).  A session ends when
unused for ``idle`` seconds or ``max_age`` seconds after login, whichever comes first.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from bot.store.db import Database

CODE_TTL = 120.0
MAX_CODES = 5
TOUCH_EVERY = 5.0  # last_seen is written at most this often (or a quarter of ``idle``)


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True)
class UiSession:
    id: str  # public: names the session in the System page and DELETE /ui/api/ui-sessions/{id}
    csrf_hash: str
    created: float
    last_seen: float
    user_agent: str


class UiAuthMixin(Database):
    # ---------------------------------------------------------------- login codes
    def add_login_code(self, code: str, now: float | None = None) -> None:
        """Keep ``code`` (as its hash) for ``CODE_TTL`` s; expired ones go, and the oldest
        unused ones beyond ``MAX_CODES``."""
        now = time.time() if now is None else now
        with self._tx():
            self.db.execute("DELETE FROM ui_login_codes WHERE expires <= ?", (now,))
            self.db.execute(
                "INSERT INTO ui_login_codes(hash, created, expires) VALUES (?,?,?)",
                (digest(code), now, now + CODE_TTL),
            )
            self.db.execute(
                "DELETE FROM ui_login_codes WHERE hash NOT IN "
                "(SELECT hash FROM ui_login_codes ORDER BY created DESC, rowid DESC LIMIT ?)",
                (MAX_CODES,),
            )

    def take_login_code(self, code: str, now: float | None = None) -> bool:
        """True once for a known, unexpired code (it is deleted); False otherwise."""
        now = time.time() if now is None else now
        cur = self.db.execute(
            "DELETE FROM ui_login_codes WHERE hash = ? AND expires > ?", (digest(code), now)
        )
        return cur.rowcount == 1

    def login_codes_pending(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        row = self.db.execute(
            "SELECT COUNT(*) FROM ui_login_codes WHERE expires > ?", (now,)
        ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------- browser sessions
    def add_ui_session(
        self, cookie: str, csrf: str, user_agent: str, now: float | None = None
    ) -> str:
        """A new session for ``cookie``; returns its public id."""
        now = time.time() if now is None else now
        sid = secrets.token_hex(8)
        self.db.execute(
            "INSERT INTO ui_sessions(id, cookie_hash, csrf_hash, created, last_seen, user_agent)"
            " VALUES (?,?,?,?,?,?)",
            (sid, digest(cookie), digest(csrf), now, now, user_agent[:300]),
        )
        return sid

    def ui_session(
        self, cookie: str, *, idle: float, max_age: float, now: float | None = None
    ) -> UiSession | None:
        """The live session of ``cookie`` (its last use noted), or None; an ended one is
        deleted on the way."""
        now = time.time() if now is None else now
        row = self.db.execute(
            "SELECT id, csrf_hash, created, last_seen, user_agent FROM ui_sessions"
            " WHERE cookie_hash = ?",
            (digest(cookie),),
        ).fetchone()
        if row is None:
            return None
        found = UiSession(*row)
        if now - found.last_seen >= idle or now - found.created >= max_age:
            self.db.execute("DELETE FROM ui_sessions WHERE id = ?", (found.id,))
            return None
        if now - found.last_seen >= min(TOUCH_EVERY, idle / 4):
            self.db.execute("UPDATE ui_sessions SET last_seen = ? WHERE id = ?", (now, found.id))
        return found

    def ui_sessions(
        self, *, idle: float, max_age: float, now: float | None = None
    ) -> list[UiSession]:
        """The live sessions, newest first (ended ones are deleted)."""
        now = time.time() if now is None else now
        self.db.execute(
            "DELETE FROM ui_sessions WHERE last_seen <= ? OR created <= ?",
            (now - idle, now - max_age),
        )
        rows = self.db.execute(
            "SELECT id, csrf_hash, created, last_seen, user_agent FROM ui_sessions"
            " ORDER BY created DESC"
        ).fetchall()
        return [UiSession(*r) for r in rows]

    def end_ui_session(self, sid: str) -> bool:
        return self.db.execute("DELETE FROM ui_sessions WHERE id = ?", (sid,)).rowcount == 1

    def revoke_ui_all(self) -> tuple[int, int]:
        """End every browser session and unused login code: (sessions, codes) removed."""
        with self._tx():
            sessions = self.db.execute("DELETE FROM ui_sessions").rowcount
            codes = self.db.execute("DELETE FROM ui_login_codes").rowcount
        return sessions, codes
