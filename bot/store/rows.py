"""Typed rows the store hands out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class InboundRow:
    id: int
    session_key: str
    payload: dict
    status: str
    outbound: list | None
    agent: str = ""  # the agent chosen at intake


@dataclass
class OutboxRow:
    id: int
    channel: str
    kind: str
    payload: dict  # the OutboundMessage as JSON
    nonce: str
    state: str
    attempts: int
    created: float
    updated: float = 0.0


OUTBOX_PENDING = ("queued", "sending")


@dataclass
class WindowRow:
    id: int
    role: str
    message: dict
    tokens: int
