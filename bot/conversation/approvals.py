"""Held exec commands waiting for the owner's answer (security "ask").

A turn whose model wants to run a command that is not on the allow list calls
``Approvals.request``: the owner gets a direct message with the command and a short code,
and the turn waits.  ``/approve <code>`` runs it once, ``/deny <code>`` refuses it, and no
answer within ``timeout`` (10 minutes) refuses it.  The conversation handles the two commands
as soon as they arrive, outside the session lanes: the turn that waits may hold the very
lane the owner's answer would queue on.

The Control UI's Inbox lists the held commands and decides them the same way:
every held command is published as ``approval.pending`` and its outcome as
``approval.resolved`` on the daemon's notices.  With the UI on (``inbox``), a command is held
even when there is no owner chat to ask in: it waits for the Inbox, within the same limit.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from bot.agent.tools.base import Approval

log = logging.getLogger("chela.approvals")

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
TIMEOUT = 600.0

# (route, text) -> True when the owner's DM was sent
Notify = Callable[[dict, str], Awaitable[bool]]
# the owner's direct-message route for a turn, or None when there is none
OwnerRoute = Callable[[dict, str], "dict | None"]
Decided = Literal["decided", "unknown", "already"]
KEEP_DECIDED = 100  # decided codes remembered (a second decision is told it came late)


class NoticesPort(Protocol):
    def publish(self, name: str, data: dict[str, Any]) -> Any: ...


@dataclass
class _Held:
    command: str
    session_key: str
    future: asyncio.Future
    created: float
    trust: str = "owner"


def approval_text(command: str, code: str, session_key: str, trust: str, minutes: int) -> str:
    shown = command.replace("```", "'''")
    who = " from a guest conversation" if trust == "guest" else ""
    return (
        f"A command{who} is waiting for your approval ({session_key}):\n\n```\n{shown}\n```\n\n"
        f"Reply /approve {code} to run it once, or /deny {code} to refuse it. "
        f"Without an answer it is refused in {minutes} minutes."
    )


class Approvals:
    def __init__(
        self,
        notify: Notify,
        owner_route: OwnerRoute,
        *,
        timeout: float = TIMEOUT,
        notices: NoticesPort | None = None,
        inbox: bool = False,
    ):
        """``notices``: where held commands and their outcomes are published; ``inbox``:
        the Control UI can decide them, so a command with no owner chat to ask in waits."""
        self._notify = notify
        self._owner_route = owner_route
        self.timeout = timeout
        self.notices = notices
        self.inbox = inbox
        self._held: dict[str, _Held] = {}
        self._decided: OrderedDict[str, str] = OrderedDict()

    def pending(self) -> list[tuple[str, str]]:
        """(code, command) of the commands waiting now."""
        return [(code, h.command) for code, h in self._held.items()]

    def listed(self) -> list[dict[str, Any]]:
        """The commands waiting now, as the Inbox shows them."""
        return [self._item(code, h) for code, h in self._held.items() if not h.future.done()]

    def _item(self, code: str, h: _Held) -> dict[str, Any]:
        return {
            "code": code,
            "command": h.command,
            "session": h.session_key,
            "trust": h.trust,
            "created": h.created,
            "expires": h.created + self.timeout,
        }

    def _publish(self, name: str, data: dict[str, Any]) -> None:
        if self.notices is not None:
            self.notices.publish(name, data)

    def _resolved(self, code: str, decision: str) -> None:
        self._decided[code] = decision
        while len(self._decided) > KEEP_DECIDED:
            self._decided.popitem(last=False)
        self._publish("approval.resolved", {"code": code, "decision": decision})

    def decide(self, code: str, decision: str) -> Decided:
        """The owner's decision ("approve" or "deny") from the Inbox: "decided", "unknown"
        (no such code, or it expired) or "already" (decided before)."""
        code = code.strip().upper()
        held = self._held.get(code)
        if held is None or held.future.done():
            return "already" if self._decided.get(code) in ("approve", "deny") else "unknown"
        held.future.set_result("approved" if decision == "approve" else "denied")
        self._resolved(code, decision)
        return "decided"

    async def request(self, command: str, *, session_key: str, trust: str, route: dict) -> Approval:
        target = self._owner_route(route, trust)
        if target is None and not self.inbox:
            log.info(
                "exec approval unavailable session=%s: no direct chat with the owner to ask in",
                session_key,
            )
            return "unavailable"
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        while code in self._held:
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        held = self._held[code] = _Held(command, session_key, fut, time.time(), trust)
        try:
            if not await self._ask(target, held, code) and not self.inbox:
                return "unavailable"
            self._publish("approval.pending", self._item(code, held))
            log.info("exec approval requested code=%s session=%s", code, session_key)
            try:
                return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
            except TimeoutError:
                log.info("exec approval expired code=%s session=%s", code, session_key)
                self._resolved(code, "expired")
                return "expired"
        finally:
            self._held.pop(code, None)

    async def _ask(self, target: dict | None, held: _Held, code: str) -> bool:
        """Send the owner's DM; False when there is no chat or it could not be sent."""
        if target is None:
            return False
        minutes = max(1, round(self.timeout / 60))
        text = approval_text(held.command, code, held.session_key, held.trust, minutes)
        return await self._notify(target, text)

    def answer(self, code: str, approve: bool) -> str:
        """The owner's /approve or /deny; returns the reply for the owner."""
        code = code.strip().upper()
        held = self._held.get(code)
        if held is None or held.future.done():
            waiting = ", ".join(c for c, _ in self.pending()) or "none"
            return f"No command is waiting with code {code or '(none)'} (waiting: {waiting})."
        held.future.set_result("approved" if approve else "denied")
        self._resolved(code, "approve" if approve else "deny")
        return (
            f"Approved: running it once.\n{held.command}"
            if approve
            else f"Denied: it will not run.\n{held.command}"
        )
