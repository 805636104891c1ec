"""The one interface between the WhatsApp adapter and a way of reaching WhatsApp.

Today there is one transport, the official Agent Platform (``agent_platform.py``); another
(a linked device) would implement the same :class:`Transport` and the adapter would not
change.  Errors come out as :class:`ApiError` with the HTTP status and the platform's code,
so the adapter and the outbox decide on numbers, not on text."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from channels.base import ChannelError


class ApiError(ChannelError):
    """A failed call: ``status`` (HTTP; 0 when no answer came), ``code`` (the platform's),
    ``retry_after`` (s).

    ``permanent`` tells the outbox whether a retry can help: a refusal (4xx but 409/429)
    cannot, and neither can a send cut off by a 500 or a dropped connection, whose outcome is
    unknown (it may have gone out: sending again could double it)."""

    def __init__(
        self,
        what: str,
        status: int,
        code: int = 0,
        message: str = "",
        *,
        retry_after: float | None = None,
        unknown_outcome: bool = False,
    ) -> None:
        super().__init__(f"{what}: HTTP {status} (code {code}) {message}".rstrip())
        self.status = status
        self.code = code
        self.retry_after = retry_after
        transient = status in (0, 409, 429) or status >= 500  # 0: no answer came
        self.permanent = not transient or unknown_outcome


class Transport(Protocol):
    """What the adapter asks of a way to WhatsApp."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def poll(self, offset: int | None, timeout: int) -> Any:
        """One long poll: the answer's JSON (None when nothing came)."""

    async def send_message(self, payload: dict[str, Any]) -> str:
        """Send one message; its id."""

    async def mark_read(self, payload: dict[str, Any]) -> None: ...

    async def upload(self, path: Path, mime: str) -> str:
        """Upload a file; its media id."""

    async def download(self, media_id: str, dest: Path, max_bytes: int) -> tuple[str, int]:
        """Fetch an inbound file into ``dest``; (MIME type, size)."""

    def pairing_qr(self) -> str | None:
        """The QR payload while a linked device waits to be paired; None otherwise."""
