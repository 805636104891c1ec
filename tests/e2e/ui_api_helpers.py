"""Reading the Control UI's streams (SPEC §16.5) in the API tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from tests.e2e.ui_client import UiClient


def parse_sse(raw: str) -> list[tuple[str, dict[str, Any], int | None]]:
    """(event, data, id) of every event in a ``text/event-stream`` body."""
    out = []
    for block in raw.split("\n\n"):
        name, data, seq = "", None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line.startswith("id: "):
                seq = int(line[4:])
        if name:
            out.append((name, data or {}, seq))
    return out


async def turn(client: UiClient, key: str, text: str, cid: str, **extra: Any):
    """POST a web message; the status and the stream's events (read to its end)."""
    from urllib.parse import quote

    r = await client.post(
        f"/ui/api/sessions/{quote(key, safe='')}/messages",
        {"text": text, "client_msg_id": cid, **extra},
    )
    body = await r.text()
    return r.status, (parse_sse(body) if r.status == 200 else json.loads(body))


async def events(client: UiClient, body: dict) -> AsyncIterator[tuple[str, dict, int | None]]:
    """The events stream, event by event, while the caller reads."""
    async with client.http.post(
        client.base + "/ui/api/events", json=body, headers=client.headers()
    ) as r:
        assert r.status == 200, await r.text()
        buf = ""
        while True:
            chunk = await asyncio.wait_for(r.content.readany(), 20)
            if not chunk:
                return
            buf += chunk.decode()
            while "\n\n" in buf:
                block, buf = buf.split("\n\n", 1)
                for ev in parse_sse(block + "\n\n"):
                    yield ev
