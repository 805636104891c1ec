"""DM pairing (SPEC §4.3): unknown senders get a short code the owner approves."""

from __future__ import annotations

import secrets
import time

from bot.store import Store

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = 3600.0  # a code is valid for one hour
NOTIFY_EVERY = 3600.0  # an unknown sender hears from us at most once an hour
MAX_PENDING = 3  # pending requests per channel


class PairingError(Exception):
    pass


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def pairing_message(channel: str, sender_id: str, code: str) -> str:
    return (
        "I only talk to people my owner has approved, and I don't know you yet.\n"
        f"Your {channel} user id: {sender_id}\n"
        f"Pairing code: {code} (valid for 1 hour)\n"
        f"Ask the owner to run: chela pairing approve {channel} {code}"
    )


def approved_message() -> str:
    return "The owner approved you: you can talk to me now. Here is my answer to your message."


def request_pairing(
    store: Store, channel: str, sender_id: str, sender_name: str = "", now: float | None = None
) -> str | None:
    """Record a pairing request; return the text to send the sender, or None when we
    must stay quiet (already told them within the hour).  With ``MAX_PENDING`` requests
    pending on the channel, the oldest one makes room: a few throwaway accounts cannot
    block pairing for everyone else."""
    now = time.time() if now is None else now
    live = [r for r in store.pairing_requests(channel) if now - r["created"] < CODE_TTL]
    mine = next((r for r in live if r["sender_id"] == sender_id), None)
    if mine:
        if now - mine["notified"] < NOTIFY_EVERY:
            return None
        store.upsert_pairing(channel, sender_id, sender_name, mine["code"], mine["created"], now)
        return pairing_message(channel, sender_id, mine["code"])
    for old in live[: max(0, len(live) - MAX_PENDING + 1)]:  # live is oldest first
        store.delete_pairing(channel, old["sender_id"])
    for stale in (r for r in store.pairing_requests(channel) if now - r["created"] >= CODE_TTL):
        store.delete_pairing(channel, stale["sender_id"])
    code = new_code()
    store.upsert_pairing(channel, sender_id, sender_name, code, now, now)
    return pairing_message(channel, sender_id, code)


def approve(store: Store, channel: str, code: str, now: float | None = None) -> str:
    """Approve the sender holding ``code``; returns their id."""
    now = time.time() if now is None else now
    code = code.strip().upper()
    for r in store.pairing_requests(channel):
        if r["code"] == code:
            if now - r["created"] >= CODE_TTL:
                store.delete_pairing(channel, r["sender_id"])
                raise PairingError(
                    f"code {code} has expired; ask the sender to write again for a new one"
                )
            store.approve(channel, r["sender_id"])
            return r["sender_id"]
    raise PairingError(f"no pending pairing request on {channel} with code {code}")
