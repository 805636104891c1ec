"""Inbound attachments: ``fetch_media`` downloads one Telegram file (getFile, then the bytes
through ``request.AiohttpRequest``) into the media directory, under the size cap."""

from __future__ import annotations

import asyncio
import dataclasses
import mimetypes
import re
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from telegram import Bot, File
from telegram.error import BadRequest

from channels.base import ChannelError, MediaItem, MediaTooLarge
from channels.telegram.request import AiohttpRequest
from channels.util import capped_file


def safe_name(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).strip("._")
    return name[:80] or "file"


def safe_suffix(*candidates: str | None) -> str:
    """The first candidate that is a plain short extension (".jpg"), else ""."""
    for suffix in candidates:
        if suffix and re.fullmatch(r"\.[A-Za-z0-9]{1,10}", suffix):
            return suffix
    return ""


async def _get_file(bot: Bot, item: MediaItem, timeout: float) -> File:
    try:
        return await asyncio.wait_for(bot.get_file(item.ref), timeout)
    except asyncio.CancelledError:
        raise
    except BadRequest as exc:
        if "too big" in str(exc).lower():  # over the Bot API's own download limit
            raise MediaTooLarge(f"telegram: {item.name or 'file'}: {exc}") from None
        raise ChannelError(f"telegram: getFile failed for {item.name or 'file'}: {exc}") from None
    except Exception as exc:
        raise ChannelError(f"telegram: getFile failed for {item.name or 'file'}: {exc!r}") from None


async def fetch_media(
    bot: Bot,
    request: AiohttpRequest,
    item: MediaItem,
    dest_dir: Path,
    max_bytes: int,
    *,
    timeout: float,
) -> MediaItem:
    """getFile, then stream the file into ``dest_dir`` with the size cap.

    The declared sizes (from the update, then from getFile) are checked before any
    byte is fetched; the bytes actually received are counted as they arrive, so a
    wrong or missing ``file_size`` cannot get past the cap either."""
    tg_file = await _get_file(bot, item, timeout)
    if tg_file.file_size and tg_file.file_size > max_bytes:
        raise MediaTooLarge(
            f"telegram: {item.name or 'file'} is {tg_file.file_size} bytes, over {max_bytes}"
        )
    url = tg_file.file_path or ""
    if not url.startswith(("http://", "https://")):
        raise ChannelError(f"telegram: no download URL for {item.name or 'file'}")

    name = item.name or "file"
    suffix = safe_suffix(
        Path(name).suffix,
        Path(urlsplit(url).path).suffix,
        mimetypes.guess_extension(item.mime) if item.mime else "",
    )
    stem = safe_name(Path(name).stem)
    dest = Path(dest_dir).absolute() / f"tg_{uuid.uuid4().hex[:12]}_{stem}{suffix}"
    with capped_file(dest, max_bytes, f"telegram: downloading {name}") as out:
        await request.download_capped(url, out, max_bytes, timeout * 4)
    return dataclasses.replace(item, target=str(dest))
