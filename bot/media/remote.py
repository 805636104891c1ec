"""Remote images (the HTTP API's ``image_url`` parts) fetched through the URL guard."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from bot import net
from bot.fs import private_dir, write_private


async def fetch_image_url(cfg: Any, url: str, dest_dir: Path) -> Path:
    """Download an image URL (the HTTP API's ``image_url`` parts) into ``dest_dir`` through
    ``bot.net`` (every hop's host read as the client reads it, its addresses
    checked and pinned; ``tools.web.allow_private_hosts`` applies), at most
    ``media.max_download_mb``.  Raises ``ValueError`` with a short reason."""
    mb = cfg.media.max_download_mb
    limits = net.Limits(max_bytes=int(mb * 1024 * 1024), timeout=60, overflow="refuse")
    try:
        got = await net.fetch_url(
            url, net.HostRules(cfg.tools.web.allow_private_hosts), limits, check_head=_ok_only
        )
    except net.TooLarge:
        raise ValueError(f"larger than {mb:g} MB") from None
    except net.FetchError as e:
        raise ValueError(str(e)) from None
    dest = private_dir(dest_dir) / f"http_{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(write_private, dest, got.body)
    return dest


def _ok_only(head: net.Head) -> None:
    if head.status != 200:
        raise ValueError(f"HTTP {head.status}")
