"""DM pairing: unknown senders get a short code the owner approves.

:func:`approve` is the one way a request is approved (``chela pairing approve``, the
owner's ``/pair approve`` and the Control UI all call it); it stores the sender as a
guest and leaves a welcome row the daemon acts on (the sender is told and their waiting
message answered).  :func:`deny` drops a request without telling the sender.

Requests, codes and approvals belong to one account of a channel, named by its key
(``channels.base.account_key``: ``telegram`` for the default account, ``telegram:work``
for another): a code made on one account is unknown on another, and a sender approved
on one is a stranger on the others."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.store import Store
from channels.base import account_key, split_account_key

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = 3600.0  # a code is valid for one hour
NOTIFY_EVERY = 3600.0  # an unknown sender hears from us at most once an hour
MAX_PENDING = 3  # pending requests per channel account


Decision = Literal["approve", "deny"]


class PairingError(Exception):
    """A code that cannot be decided: unknown (:class:`UnknownCode`) or expired."""


class UnknownCode(PairingError):
    pass


class ExpiredCode(PairingError):
    pass


class NoticesPort(Protocol):
    """Where pairing notices go (``bot.reports.notices.Notices``)."""

    def publish(self, name: str, data: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Created:
    """What :func:`request` did: the text for the sender (None: stay quiet), the request's
    code, whether the request is new (only then is the owner told) and whether
    its code is new (a new request, or the hourly repeat of an expired one)."""

    reply: str | None
    code: str
    new: bool
    fresh_code: bool = False


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def pairing_message(channel: str, sender_id: str, code: str) -> str:
    """What a stranger is told; ``channel`` is the account's key (``telegram:work``)."""
    return (
        "I only talk to people my owner has approved, and I don't know you yet.\n"
        f"Your {split_account_key(channel)[0]} user id: {sender_id}\n"
        f"Pairing code: {code} (valid for 1 hour)\n"
        f"Ask the owner to run: chela pairing approve {channel} {code}"
    )


def approved_message() -> str:
    return "The owner approved you: you can talk to me now. Here is my answer to your message."


def request_pairing(
    store: Store, channel: str, sender_id: str, sender_name: str = "", now: float | None = None
) -> str | None:
    """Record a pairing request; return the text to send the sender, or None when we
    must stay quiet (already told them within the hour)."""
    return request(store, channel, sender_id, sender_name, now=now).reply


def request(
    store: Store,
    channel: str,
    sender_id: str,
    sender_name: str = "",
    first_message: str = "",
    *,
    now: float | None = None,
) -> Created:
    """Record a pairing request.  A sender whose code expired unanswered gets a fresh one
    with the hourly repeat of the reply: the same request (the owner is not told again).
    With ``MAX_PENDING`` requests pending on the channel, the oldest one makes room: a few
    throwaway accounts cannot block pairing for everyone else."""
    now = time.time() if now is None else now
    stored = store.pairing_requests(channel)
    live = [r for r in stored if now - r["created"] < CODE_TTL]
    mine = next((r for r in live if r["sender_id"] == sender_id), None)
    if mine:
        return _again(store, mine, sender_name, now)
    expired = any(r["sender_id"] == sender_id for r in stored)  # theirs, never answered
    for old in live[: max(0, len(live) - MAX_PENDING + 1)]:  # live is oldest first
        store.delete_pairing(channel, old["sender_id"])
    for stale in (r for r in stored if r not in live and r["sender_id"] != sender_id):
        store.delete_pairing(channel, stale["sender_id"])
    code = new_code()
    first = None if expired else first_message  # a repeat keeps the first message
    store.upsert_pairing(channel, sender_id, sender_name, code, now, now, first)
    return Created(pairing_message(channel, sender_id, code), code, not expired, True)


def _again(store: Store, mine: dict, sender_name: str, now: float) -> Created:
    """A pending request's sender wrote again: quiet, or the reply once an hour."""
    if now - mine["notified"] < NOTIFY_EVERY:
        return Created(None, mine["code"], new=False)
    channel, sender, code = mine["channel"], mine["sender_id"], mine["code"]
    store.upsert_pairing(channel, sender, sender_name, code, mine["created"], now)
    return Created(pairing_message(channel, sender, code), code, new=False)


def as_request(row: dict) -> dict:
    """A stored request as the Control UI lists it ( ``GET /ui/api/pairing``)."""
    return {
        "channel": row["channel"],
        "code": row["code"],
        "sender_id": row["sender_id"],
        "sender_name": row["sender_name"],
        "first_message": row.get("first_message", ""),
        "created": row["created"],
        "expires": row["created"] + CODE_TTL,
    }


def pending(store: Store, now: float | None = None) -> list[dict]:
    """The live requests of every channel, oldest first (as :func:`as_request`)."""
    now = time.time() if now is None else now
    return [as_request(r) for r in store.pairing_requests() if now - r["created"] < CODE_TTL]


def find(store: Store, code: str, channel: str | None = None) -> dict:
    """The stored request holding ``code`` (on ``channel`` when given: a channel's default
    account, or ``telegram:work``; else on any account of any channel)."""
    code = code.strip().upper()
    if channel:
        channel = account_key(*split_account_key(channel))  # telegram:default is telegram
    found = [r for r in store.pairing_requests(channel) if r["code"] == code]
    if not found:
        where = f" on {channel}" if channel else ""
        raise UnknownCode(f"no pending pairing request{where} with code {code}")
    if len(found) > 1:  # two channels drew the same code: the channel decides
        names = ", ".join(r["channel"] for r in found)
        raise UnknownCode(f"code {code} is pending on {names}: name the channel too")
    return found[0]


def _live(store: Store, channel: str | None, code: str, now: float | None) -> dict:
    now = time.time() if now is None else now
    row = find(store, code, channel)
    if now - row["created"] >= CODE_TTL:
        store.delete_pairing(row["channel"], row["sender_id"])
        raise ExpiredCode(
            f"code {row['code']} has expired; ask the sender to write again for a new one"
        )
    return row


def _resolved(notices: NoticesPort | None, row: dict, decision: Decision) -> None:
    if notices is not None:
        data = {"channel": row["channel"], "code": row["code"], "decision": decision}
        notices.publish("pairing.resolved", data)


def approve(
    store: Store,
    channel: str | None,
    code: str,
    now: float | None = None,
    *,
    notices: NoticesPort | None = None,
) -> str:
    """Approve the sender holding ``code`` (on ``channel``; None: whichever channel has it):
    stored as a guest, and a welcome row left for the daemon, which tells them and answers
    their waiting message.  Returns their id; raises :class:`PairingError`."""
    return decide(store, channel, code, "approve", now, notices=notices)["sender_id"]


def deny(
    store: Store,
    channel: str | None,
    code: str,
    now: float | None = None,
    *,
    notices: NoticesPort | None = None,
) -> dict:
    """Drop the request holding ``code``; the sender is not told.  Returns it."""
    return decide(store, channel, code, "deny", now, notices=notices)


def decide(
    store: Store,
    channel: str | None,
    code: str,
    decision: Decision,
    now: float | None = None,
    *,
    notices: NoticesPort | None = None,
) -> dict:
    """Approve or deny the live request holding ``code``; returns it (as stored).  The one
    place a request is decided: the CLI, ``/pair`` and the Control UI all come here."""
    row = _live(store, channel, code, now)
    if decision == "approve":
        store.approve(row["channel"], row["sender_id"])
    else:
        store.delete_pairing(row["channel"], row["sender_id"])
    _resolved(notices, row, decision)
    return row
