"""Shared pieces of the delivery unit tests: a channel that records what it is asked to do and
answers from a script, a store error that reads as a full disk, and a bounded wait on the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable

from channels.base import Capabilities, Channel, ChannelError, OutboundMessage


class ScriptedChannel(Channel):
    """``script``: one entry per ``send`` call, an exception to raise or ids to return (when it
    runs out: ``[str(n)]``).  ``gate``: when set, every send waits for it first."""

    name = "telegram"

    def __init__(self, *, proactive: bool = True, edit: bool = True) -> None:
        self.capabilities = Capabilities(proactive=proactive, edit=edit, media=True)
        self.script: list[BaseException | list[str]] = []
        self.sent: list[OutboundMessage] = []
        self.calls: list[tuple] = []  # previews: (op, chat_id, message_id, text)
        self.gate: asyncio.Event | None = None
        self.fail_preview: BaseException | None = None
        self.fail_delete: BaseException | None = None

    async def start(self, sink) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def send(self, msg: OutboundMessage) -> list[str]:
        self.sent.append(msg)
        if self.gate is not None:
            await self.gate.wait()
        step = self.script.pop(0) if self.script else [str(len(self.sent))]
        if isinstance(step, BaseException):
            raise step
        return step

    async def send_preview(self, chat_id, text, *, thread_id=None, reply_to_id=None) -> str:
        self.calls.append(("send", chat_id, None, text))
        if self.fail_preview is not None:
            raise self.fail_preview
        return f"p{len(self.calls)}"

    async def edit_preview(self, chat_id, message_id, text, *, thread_id=None) -> None:
        self.calls.append(("edit", chat_id, message_id, text))
        if self.fail_preview is not None:
            raise self.fail_preview

    async def delete_message(self, chat_id, message_id, *, thread_id=None) -> None:
        self.calls.append(("delete", chat_id, message_id, ""))
        if self.fail_delete is not None:
            raise self.fail_delete


def disk_full() -> sqlite3.OperationalError:
    return sqlite3.OperationalError("database or disk is full")


def refused(text: str = "Forbidden: bot was blocked by the user") -> ChannelError:
    return ChannelError(text)


async def until(cond: Callable[[], bool], what: str = "the condition") -> None:
    """Let the loop run until ``cond()`` holds (bounded; the outbox under test waits 1 ms)."""
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{what} never came true")
