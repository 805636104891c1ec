"""What the app hands a channel besides its section (channels never import ``bot``): the
stored position of a poll-based account, and the guarded fetch of a URL its platform named.

The position (an update offset the platform keeps no record of) lives in the store's kv
table under :func:`channels.base.cursor_key`.  The adapter gives it to the sink with a
message, and intake writes it in the same transaction as that message's row; these ports
read it at start and store it when a batch brings nothing to keep.  An offset file that an
older Chela kept in the state dir is taken over once (when the store has none) and removed.

A media URL that a platform's answer names is someone else's choice: it is fetched through
``bot.net`` (the host checked as the client connects to it, the connection pinned to the
checked addresses, ``tools.web.allow_private_hosts`` for a private one) like every such URL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from channels.base import ChannelError, FetchUrl, MediaTooLarge

if TYPE_CHECKING:
    from bot.net import Head
    from bot.store import Store

log = logging.getLogger("chela.channels")


def _legacy_offset(path: Path) -> int | None:
    from bot import fs

    try:
        return int(fs.read_in(path, 64).decode().strip())
    except (OSError, ValueError):
        return None


def load_cursor(store: Store | None, key: str, legacy: Path | None = None) -> int | None:
    """The stored position (None before the first start, or without a store: a send-only
    run never polls).  ``legacy``: the file an older Chela kept it in, read once."""
    if store is None:
        return None
    value = store.get(key)
    if legacy is not None and legacy.exists():
        if value is None and (value := _legacy_offset(legacy)) is not None:
            store.put(key, value)
        legacy.unlink(missing_ok=True)
        log.info("%s: the offset kept in %s is now in the state database", key, legacy)
    return value if isinstance(value, int) else None


def save_cursor(store: Store | None, key: str, value: int) -> None:
    if store is not None:
        store.put(key, value)


def cursor_ports(
    store: Store | None, key: str, legacy: Path | None = None
) -> tuple[Callable[[], int | None], Callable[[int], None]]:
    """``(load, save)`` for an adapter's cursor."""
    return (lambda: load_cursor(store, key, legacy)), (lambda v: save_cursor(store, key, v))


def _ok_only(head: Head) -> None:
    from bot.net import FetchError

    if head.status != 200:
        raise FetchError(f"HTTP {head.status}")


def media_fetch(allow_private_hosts: Iterable[str] = (), timeout: float = 120.0) -> FetchUrl:
    """The guarded fetch a channel downloads platform media with:
    ``(url, headers, max_bytes) -> (content type, body)``; no redirect is followed (the
    headers carry a key), ``MediaTooLarge`` over ``max_bytes``, ``ChannelError`` when the
    URL is refused or the download fails.  ``allow_private_hosts``: the owner's
    ``tools.web.allow_private_hosts``."""
    allow = tuple(allow_private_hosts)

    async def fetch(url: str, headers: Mapping[str, str], max_bytes: int) -> tuple[str, bytes]:
        from bot import net

        limits = net.Limits(max_bytes, timeout=timeout, max_redirects=0, overflow="refuse")
        try:
            got = await net.fetch_url(
                url, net.HostRules(allow), limits, headers=headers, check_head=_ok_only
            )
        except net.TooLarge as e:
            raise MediaTooLarge(f"{e}") from None
        except net.FetchError as e:
            raise ChannelError(f"media not fetched: {e}") from None
        return got.head.content_type, got.body

    return fetch
