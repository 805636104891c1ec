"""Inbound attachments: ``fetch_media`` streams one Discord attachment from the CDN (no
auth needed) into the media directory, under the size cap."""

from __future__ import annotations

import dataclasses
import re
import uuid
from pathlib import Path

import aiohttp

from channels.base import ChannelError, MediaItem, MediaTooLarge
from channels.util import capped_file


async def fetch_media(item: MediaItem, dest_dir: Path, max_bytes: int) -> MediaItem:
    """Stream an attachment from the CDN (no auth needed) into ``dest_dir``, capped."""
    url = item.ref
    if not url:
        return item
    name = item.name or "file"
    if item.size and item.size > max_bytes:
        raise MediaTooLarge(f"discord: {name} is {item.size} bytes, over {max_bytes}")
    if not url.startswith(("https://", "http://")):
        raise ChannelError(f"discord: {name} has no download URL")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")[:80] or "file"
    dest = Path(dest_dir).absolute() / f"discord_{uuid.uuid4().hex[:12]}_{safe}"
    timeout = aiohttp.ClientTimeout(total=300, sock_connect=20)
    with capped_file(dest, max_bytes, f"discord: downloading {name}") as out:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url) as r,
        ):
            if r.status != 200:
                raise ChannelError(f"discord: downloading {name} answered HTTP {r.status}")
            if r.content_length is not None and r.content_length > max_bytes:
                raise MediaTooLarge(
                    f"discord: {name} is {r.content_length} bytes, over {max_bytes}"
                )
            async for chunk in r.content.iter_chunked(64 * 1024):
                out.write(chunk)
    return dataclasses.replace(item, target=str(dest))
