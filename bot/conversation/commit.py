"""The commit stage (docs/architecture.md "How a message flows"): ONE transaction per turn.  The turn's
messages, its reply's outbox rows, the inbound row's status and any state values (the HTTP
API's record of what its client has seen, the heartbeat's last alert) are stored together by
``Store.commit_turn``; the outbox then sends the rows.  A crash before the commit answers the
message again after the restart; after it, the outbox sends the stored reply once.

On a full disk a chat turn's commit is retried with backoff (the model is not asked again)
until it lands or the daemon stops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from bot.conversation import owner_route
from bot.conversation.types import HistoryOnly
from bot.agent.turn import TurnRequest, TurnResult
from bot.delivery.outbox import out_json
from bot.store import OutboxRow, Store, storage_full
from channels.base import InboundMessage, OutboundMessage
from channels.retry import Backoff

T = TypeVar("T")
log = logging.getLogger("chela.conversation")

STORE_RETRY_MAX = 30.0  # the longest wait between two tries of a store write on a full disk


def store_backoff() -> Backoff:
    """The waits between store retries on a full disk: from 1 s, doubling, capped."""
    return Backoff(1.0, STORE_RETRY_MAX)


class Commit:
    """``storage``: the outbox's disk-health flag (``failed``/``ok``/``down``);
    ``accepting``: False once the daemon stops (a full disk then gives up)."""

    def __init__(self, store: Store, storage: Any, accepting: Callable[[], bool]) -> None:
        self.store = store
        self.storage = storage
        self.accepting = accepting

    async def write(self, what: str, fn: Callable[[], T]) -> T:
        """Run a store write; while the disk is full, retry it with backoff (logged once)
        so the message is not lost and is answered once space is back.  Gives up (raises)
        only when the daemon stops."""
        backoff = store_backoff()
        while True:
            try:
                result = fn()
            except Exception as e:
                if not storage_full(e) or not self.accepting():
                    raise
                self.storage.failed(e, what)
                await asyncio.sleep(backoff.next())
                continue
            self.storage.ok()
            return result

    async def turn(
        self,
        key: str,
        result: TurnResult,
        inbound_id: int,
        outs: Sequence[OutboundMessage],
        state: dict[str, Any] | None = None,
        *,
        channel: str | None = None,
        owner: OwnerChat | None = None,
        agent: str = "",
    ) -> list[OutboxRow]:
        """A model turn with its reply: the outbox rows, as stored (for the outbox to
        send without reading them back).  ``channel``: the inbound message's (looked up
        from its row when not given); ``owner``: its chat, stored in the same commit as
        the owner's last route when it is one (decided at the moment of the commit); ``agent``:
        the turn's, recorded on its outbox rows."""
        outbound = [out_json(o) for o in outs]

        def store_turn() -> list[OutboxRow]:
            route = owner.changes() if owner is not None else {}
            rows = self.store.commit_turn_rows(
                key,
                result.turn_id,
                result.to_store,
                inbound_id=inbound_id,
                outbound=outbound,
                usage=result.usage,
                channel=channel,
                state={**(state or {}), **route},
                agent=agent,
            )
            return rows

        return await self.write("storing a turn", store_turn)

    async def answer(
        self,
        inbound_id: int,
        key: str,
        outs: Sequence[OutboundMessage],
        what: str,
        *,
        channel: str | None = None,
        agent: str = "",
    ) -> list[OutboxRow]:
        """An answer that is not a model turn (a command's, a refusal), with its message."""
        return await self.write(
            what,
            lambda: self.store.commit_turn_rows(
                key,
                "",
                [],
                inbound_id=inbound_id,
                outbound=[out_json(o) for o in outs],
                outbox_kind="command",
                channel=channel,
                agent=agent,
            ),
        )

    async def stopped(
        self,
        inbound_id: int,
        key: str,
        req: TurnRequest,
        turn: str,
        outs: Sequence[OutboundMessage] = (),
        state: dict[str, Any] | None = None,
        *,
        channel: str | None = None,
    ) -> list[OutboxRow]:
        """A stopped turn: the user message is kept, no partial answer; ``outs``: what an
        HTTP API caller still gets (``reply.stopped_reply``), with its record (``state``)."""
        user: dict[str, Any] = {"role": "user", "content": req.user_text}
        if req.media:
            user["media"] = list(req.media)
        msgs = [*req.prior, user] if req.user_turn else list(req.prior)
        return await self.write(
            "storing a stopped turn",
            lambda: self.store.commit_turn_rows(
                key,
                turn,
                msgs,
                inbound_id=inbound_id,
                outbound=[out_json(o) for o in outs] or None,
                channel=channel,
                state=state,
                agent=req.agent,
            ),
        )


@dataclass(frozen=True)
class OwnerChat:
    """A chat turn's message, recorded with the turn (in its commit) as the owner's last
    route when it is one (``owner_route``): where heartbeats, cron jobs and approval
    requests reach the owner, never a guest."""

    msg: InboundMessage
    trust: str | None
    proactive: bool

    def changes(self) -> dict[str, Any]:
        """The kv values to store with the turn; a failure here never fails the turn."""
        try:
            return owner_route.changes(self.msg, trust=self.trust, proactive=self.proactive)
        except Exception as e:
            log.warning("could not record the last route: %s", e)
            return {}


def history_only(store: Store, inbound_id: int, step: HistoryOnly, cap: int) -> None:
    """A group message not addressed to the agent joins the group's pending history (at most
    ``cap`` kept)."""
    msg = step.msg
    label = msg.sender_name or msg.sender_username or msg.sender_id
    store.add_group_history(step.key, label, msg.text or "", msg.timestamp or time.time(), cap)
    store.set_inbound_status(inbound_id, "history")


def scheduled(
    store: Store,
    key: str,
    result: TurnResult,
    *,
    kind: str,
    channel: str | None = None,
    out: OutboundMessage | None = None,
    state: dict[str, Any] | None = None,
    agent: str = "",
) -> list[int]:
    """A heartbeat or cron turn, with its reply's outbox row for ``channel`` when it has one
    (and ``state``): the outbox row ids."""
    return store.commit_turn(
        key,
        result.turn_id,
        result.to_store,
        kind=kind,
        usage=result.usage,
        channel=channel,
        outbound=[out_json(out)] if out is not None else None,
        outbox_kind=kind,
        state=state,
        agent=agent,
    )
