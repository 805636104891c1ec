"""Inbound attachments: signal-cli has already stored them in its attachments directory;
``fetch_media`` copies one into the core's media directory (mode 0600) under the size cap,
refusing symbolic links and anything but a regular file."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import stat
import uuid
from pathlib import Path

from channels.base import ChannelError, MediaItem, MediaTooLarge
from channels.util import capped_file

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_COPY_CHUNK = 64 * 1024


def stored_path(attachments_dir: Path, ref: str) -> Path:
    """Where signal-cli keeps the attachment ``ref``.  An absolute path is signal-cli's
    own ``storedFilename``; anything else must be a bare attachment id (no directory
    parts), looked up in ``attachments_dir``."""
    path = Path(ref)
    if path.is_absolute():
        return path
    if "/" in ref or "\\" in ref or ref in (".", "..") or "\x00" in ref:
        raise ChannelError(f"signal: unusable attachment reference {ref!r}")
    return attachments_dir / ref


async def fetch_media(
    attachments_dir: Path, item: MediaItem, dest_dir: Path, max_bytes: int
) -> MediaItem:
    """Copy signal-cli's stored file into ``dest_dir`` (mode 0600), at most ``max_bytes``."""
    if not item.ref:
        return item
    name = item.name or "attachment"
    if item.size and item.size > max_bytes:
        raise MediaTooLarge(f"signal: {name} is {item.size} bytes, over {max_bytes}")
    src = stored_path(attachments_dir, item.ref)
    safe = _SAFE_NAME.sub("_", Path(name).name).strip("._")[:80] or "attachment"
    dest = Path(dest_dir).absolute() / f"signal_{uuid.uuid4().hex[:12]}_{safe}"
    try:
        await asyncio.to_thread(copy_capped, src, dest, max_bytes, name)
    except OSError as e:  # anything copy_capped did not already translate
        dest.unlink(missing_ok=True)
        raise ChannelError(f"signal: copying attachment {name} failed ({e})") from None
    return dataclasses.replace(item, target=str(dest))


def copy_capped(src: Path, dest: Path, max_bytes: int, name: str) -> None:
    """Copy the regular file ``src`` (a symlink is refused, not followed) to the new file
    ``dest`` (mode 0600), reading at most ``max_bytes`` + 1 bytes.  On any failure ``dest``
    is removed.  Raises ``MediaTooLarge`` or ``ChannelError``."""
    try:
        # O_NONBLOCK: opening a FIFO planted there must not hang the worker thread
        src_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ChannelError(
            f"signal: attachment {name} not found at {src} (is attachments_dir right?)"
        ) from None
    except OSError as e:
        raise ChannelError(f"signal: cannot open attachment {name} ({e.strerror or e})") from None
    with os.fdopen(src_fd, "rb", buffering=0) as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ChannelError(f"signal: attachment {name} is not a regular file")
        if info.st_size > max_bytes:
            raise MediaTooLarge(f"signal: {name} is {info.st_size} bytes, over {max_bytes}")
        with capped_file(dest, max_bytes, f"signal: copying attachment {name}") as out:
            while chunk := source.read(_COPY_CHUNK):
                out.write(chunk)  # raises past the cap if the file grew after the check
