"""The rules a linked number keeps, each a small piece of state the transport consults.

- :class:`Memory`: who has written to this number (Chela never starts a conversation with
  anyone else, except the owner) and which LID is which phone number; kept in the state
  database through the app's ports, so both survive a restart.
- :class:`GroupGate`: a group is served only when the account's ``groups`` (or
  ``owner_groups``) name it; a dropped group is logged once, never silently and never per
  message.
- :class:`Breaker`: too many dropped connections in a span open the circuit: the client is
  stopped and waits a long pause instead of reconnecting in a loop."""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from channels.whatsapp.linked import ids

log = logging.getLogger("chela.channels.whatsapp")

MAX_KNOWN = 10_000  # people and groups remembered (the oldest go first)


class Memory:
    """Who wrote and which LID is which number, loaded at start and saved on every change
    through two ports the app gives (it keeps them in the state database)."""

    def __init__(self, load: Callable[[], Any], save: Callable[[dict[str, Any]], None]) -> None:
        self.save = save
        data = load()
        data = data if isinstance(data, dict) else {}
        self.wrote: dict[str, None] = dict.fromkeys(str(c) for c in data.get("wrote") or [])
        lids = data.get("lids")
        self.lids: dict[str, str] = (
            {str(k): str(v) for k, v in lids.items()} if isinstance(lids, dict) else {}
        )

    def _save(self) -> None:
        try:
            self.save({"wrote": list(self.wrote), "lids": self.lids})
        except Exception as e:  # kept in memory; the next change tries again
            log.warning("whatsapp: could not store who wrote: %s", e)

    def has_written(self, chat: str) -> bool:
        return chat in self.wrote

    def note_wrote(self, chat: str) -> None:
        if chat in self.wrote:
            return
        self.wrote[chat] = None
        while len(self.wrote) > MAX_KNOWN:
            del self.wrote[next(iter(self.wrote))]
        self._save()

    def pn_for(self, lid: str) -> str:
        return self.lids.get(lid, "")

    def learn(self, lid: str, pn: str) -> None:
        """A LID and its phone number are one person (stored; the LID's chat is the number's)."""
        if not lid or not pn or self.lids.get(lid) == pn:
            return
        self.lids[lid] = pn
        old = ids.person_id("", lid)
        if old in self.wrote:  # what we knew by the LID is known by the number from now on
            self.wrote[ids.person_id(pn, "")] = None
        self._save()


class GroupGate:
    """Which groups are served: ``group_policy`` and ``groups`` of the account."""

    def __init__(self, policy: str, groups: Iterable[str], account: str) -> None:
        self.policy = policy
        self.groups = set(groups)
        self.account = account
        self._dropped: set[str] = set()

    def allows(self, chat: str) -> bool:
        ok = self.policy != "disabled" and (
            self.policy == "open" or "*" in self.groups or chat in self.groups
        )
        if not ok and chat not in self._dropped:
            self._dropped.add(chat)
            why = "groups are off (group_policy)" if self.policy == "disabled" else "not in groups"
            log.info(
                "whatsapp[%s]: messages of group %s are dropped: %s (said once per group)",
                self.account,
                chat,
                why,
            )
        return ok


class Breaker:
    """``limit`` failures within ``span`` seconds trip it (and start a fresh count)."""

    def __init__(
        self, limit: int = 5, span: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit, self.span, self.clock = limit, span, clock
        self._failures: collections.deque[float] = collections.deque()

    def record(self) -> bool:
        now = self.clock()
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self.span:
            self._failures.popleft()
        if len(self._failures) >= self.limit:
            self._failures.clear()
            return True
        return False
