"""Held exec commands waiting for the owner's answer (SPEC §9.3, security "ask").

A turn whose model wants to run a command that is not on the allow list calls
``Approvals.request``: the owner gets a direct message with the command and a short code,
and the turn waits.  ``/approve <code>`` runs it once, ``/deny <code>`` refuses it, and no
answer within ``timeout`` (10 minutes) refuses it.  The router handles the two commands
as soon as they arrive, outside the session lanes: the turn that waits may hold the very
lane the owner's answer would queue on.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from collections.abc import Awaitable, Callable

from bot.agent.tools.base import Approval

log = logging.getLogger("chela.approvals")

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
TIMEOUT = 600.0

# (route, text) -> True when the owner's DM was sent
Notify = Callable[[dict, str], Awaitable[bool]]
# the owner's direct-message route for a turn, or None when there is none
OwnerRoute = Callable[[dict, str], "dict | None"]


@dataclass
class _Held:
    command: str
    session_key: str
    future: asyncio.Future
    created: float


def approval_text(command: str, code: str, session_key: str, trust: str, minutes: int) -> str:
    shown = command.replace("```", "'''")
    who = " from a guest conversation" if trust == "guest" else ""
    return (
        f"A command{who} is waiting for your approval ({session_key}):\n\n```\n{shown}\n```\n\n"
        f"Reply /approve {code} to run it once, or /deny {code} to refuse it. "
        f"Without an answer it is refused in {minutes} minutes."
    )


class Approvals:
    def __init__(self, notify: Notify, owner_route: OwnerRoute, *, timeout: float = TIMEOUT):
        self._notify = notify
        self._owner_route = owner_route
        self.timeout = timeout
        self._held: dict[str, _Held] = {}

    def pending(self) -> list[tuple[str, str]]:
        """(code, command) of the commands waiting now."""
        return [(code, h.command) for code, h in self._held.items()]

    async def request(self, command: str, *, session_key: str, trust: str, route: dict) -> Approval:
        target = self._owner_route(route, trust)
        if target is None:
            log.info(
                "exec approval unavailable session=%s: no direct chat with the owner to ask in",
                session_key,
            )
            return "unavailable"
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        while code in self._held:
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._held[code] = _Held(command, session_key, fut, time.time())
        try:
            text = approval_text(
                command, code, session_key, trust, max(1, round(self.timeout / 60))
            )
            if not await self._notify(target, text):
                return "unavailable"
            log.info("exec approval requested code=%s session=%s", code, session_key)
            try:
                return await asyncio.wait_for(asyncio.shield(fut), self.timeout)
            except TimeoutError:
                log.info("exec approval expired code=%s session=%s", code, session_key)
                return "expired"
        finally:
            self._held.pop(code, None)

    def answer(self, code: str, approve: bool) -> str:
        """The owner's /approve or /deny; returns the reply for the owner."""
        code = code.strip().upper()
        held = self._held.get(code)
        if held is None or held.future.done():
            waiting = ", ".join(c for c, _ in self.pending()) or "none"
            return f"No command is waiting with code {code or '(none)'} (waiting: {waiting})."
        held.future.set_result("approved" if approve else "denied")
        return (
            f"Approved: running it once.\n{held.command}"
            if approve
            else f"Denied: it will not run.\n{held.command}"
        )
