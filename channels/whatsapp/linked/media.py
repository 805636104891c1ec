"""Files on a linked device: an outbound file waits here until its send (its keys depend on
the message type it goes as, which only the send names), and an inbound file is fetched from
the message that carried it, after the size it declares is checked."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from channels.base import ChannelError, MediaTooLarge
from channels.util import capped_file
from channels.whatsapp.linked import messages
from channels.whatsapp.linked.messages import Received
from channels.whatsapp.transport import ApiError


class Outgoing:
    """Files handed to ``upload``, by the reference the adapter puts in the send."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[Path, str]] = {}
        self._ids = itertools.count(1)

    def keep(self, path: Path, mime: str) -> str:
        ref = f"file-{next(self._ids)}"
        self._waiting[ref] = (path, mime)
        return ref

    async def message(self, client: Any, mtype: str, obj: dict[str, Any]) -> Any:
        """Upload the file ``obj`` names as ``mtype``; the message that carries it."""
        path, mime = self._waiting.pop(obj["id"])
        data = await asyncio.to_thread(path.read_bytes)
        try:
            up = await client.upload(data, messages.media_type(mtype))
        except Exception as e:
            raise ApiError("upload", 0, 0, f"{type(e).__name__}: {e}") from None
        return messages.media_message(
            mtype, up, mime, filename=obj.get("filename", ""), caption=obj.get("caption", "")
        )


async def fetch(client: Any, got: Received | None, dest: Path, max_bytes: int) -> tuple[str, int]:
    """The file of a recent inbound message into ``dest`` (0600); (MIME type, size)."""
    part = messages.media_part(got.message) if got is not None else None
    if got is None or part is None:
        raise ChannelError("whatsapp: that file is no longer known (too old)")
    sub = part[1]
    if sub.fileLength > max_bytes:
        raise MediaTooLarge(f"whatsapp media is {sub.fileLength} bytes, over {max_bytes}")
    try:
        data = await client.download_any(got.message)
    except Exception as e:
        raise ChannelError(f"whatsapp: download failed: {type(e).__name__}: {e}") from None
    with capped_file(dest, max_bytes, "whatsapp media") as out:
        out.write(data)
        written = out.written
    return str(sub.mimetype), written
