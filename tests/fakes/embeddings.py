"""A fake OpenAI-compatible ``POST /v1/embeddings`` that is meaning-aware by construction.

Each vector has one dimension per concept of a small lexicon, where synonyms share the
dimension ("celebration", "party" and "birthday" are one; "kid", "child", "son", "daughter"
and "Anna" another), plus a few dimensions every other word is hashed into.  So two texts
with no word in common but the same concepts are close, and a text is far from another
that only shares its filler words.  It records every text it embedded (``inputs``) so a
test can count what was (re-)embedded, and it can be taken down (``go_down``).

    async with FakeEmbeddings() as emb:
        cfg = {"memory": {"embedding_model": "openai/fake-embed",
                          "embedding_api_base": emb.base_url}}
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from aiohttp import web

CONCEPTS: tuple[tuple[str, ...], ...] = (
    ("celebration", "celebrate", "party", "birthday", "festivity", "anniversary"),
    ("kid", "kids", "child", "children", "son", "daughter", "anna", "boy", "girl"),
    ("when", "date", "day", "march", "april", "monday", "friday", "tuesday", "week"),
    ("car", "vehicle", "automobile", "garage", "tyres", "tires", "service"),
    ("doctor", "dentist", "clinic", "appointment", "health", "teeth"),
    ("food", "dinner", "lunch", "restaurant", "pizza", "meal", "eat"),
    ("work", "office", "job", "meeting", "deploy", "project", "colleague"),
    ("animal", "pet", "dog", "cat", "otter", "heron", "bird"),
    ("travel", "trip", "flight", "holiday", "vacation", "journey", "lisbon"),
    ("money", "bank", "salary", "invoice", "payment", "budget"),
)
OTHER_DIMS = 8
STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "on",
        "at",
        "in",
        "of",
        "for",
        "to",
        "and",
        "or",
        "it",
        "its",
        "be",
        "by",
        "with",
        "this",
        "that",
        "what",
        "who",
    ]
)
_WORD = re.compile(r"[a-z0-9]+")
_CONCEPT_OF = {w: i for i, words in enumerate(CONCEPTS) for w in words}
DIMS = len(CONCEPTS) + OTHER_DIMS


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower().replace("'s", "")) if w not in STOP]


def vector(text: str) -> list[float]:
    """The fake's embedding of ``text`` (not normalised: the client normalises)."""
    vec = [0.0] * DIMS
    for w in words(text):
        if w in _CONCEPT_OF:
            vec[_CONCEPT_OF[w]] += 1.0
        else:
            h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
            vec[len(CONCEPTS) + h % OTHER_DIMS] += 0.3
    if not any(vec):
        vec[-1] = 0.01
    return vec


class FakeEmbeddings:
    def __init__(self) -> None:
        self.inputs: list[str] = []  # every text embedded, in order
        self.requests: list[dict[str, Any]] = []  # every request body
        self.headers: list[dict[str, str]] = []
        self.down = False  # answer 503 (and count nothing) while set
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def go_down(self) -> None:
        self.down = True

    def come_up(self) -> None:
        self.down = False

    def count(self, text_part: str) -> int:
        """How many embedded texts contained ``text_part``."""
        return sum(text_part in t for t in self.inputs)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeEmbeddings:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def _embeddings(self, request: web.Request) -> web.Response:
        if self.down:
            return web.json_response(
                {"error": {"message": "embeddings unavailable", "type": "server_error"}},
                status=503,
            )
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        self.inputs += texts
        data = [
            {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)
        ]
        tokens = sum(max(1, len(t) // 4) for t in texts)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
