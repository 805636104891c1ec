"""Remote images (the HTTP API's ``image_url`` parts) fetched through the URL guard."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.private import private_dir, write_private


async def fetch_image_url(cfg: Any, url: str, dest_dir: Path) -> Path:
    """Download an image URL (the HTTP API's ``image_url`` parts) into ``dest_dir``
    through web_fetch's SSRF guard: every hop's addresses are checked and pinned
    (``tools.web.allow_private_hosts`` applies), at most ``media.max_download_mb``."""
    import uuid
    from urllib.parse import urljoin

    import aiohttp

    from bot.agent.tools.web import (
        HostRules,
        PinnedResolver,
        _check_url,
        resolve_host,
    )

    max_bytes = int(cfg.media.max_download_mb * 1024 * 1024)
    rules = HostRules(cfg.tools.web.allow_private_hosts)
    resolver = PinnedResolver()
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60, connect=10)
    dest = private_dir(dest_dir) / f"http_{uuid.uuid4().hex[:12]}"
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, trust_env=False
    ) as session:
        current = url
        for _hop in range(6):
            parts = _check_url(current)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
            addrs = await resolve_host(host, port)
            rules.check(host, addrs)
            resolver.pinned = {host.lower().rstrip("."): addrs}
            async with session.get(current, allow_redirects=False) as resp:
                if resp.status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                    current = urljoin(current, resp.headers["Location"])
                    continue
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
                if resp.content_length is not None and resp.content_length > max_bytes:
                    raise ValueError(f"larger than {cfg.media.max_download_mb:g} MB")
                buf = bytearray()
                async for chunk in resp.content.iter_chunked(65536):
                    buf += chunk
                    if len(buf) > max_bytes:
                        raise ValueError(f"larger than {cfg.media.max_download_mb:g} MB")
                await asyncio.to_thread(write_private, dest, bytes(buf))
                return dest
        raise ValueError("too many redirects")
