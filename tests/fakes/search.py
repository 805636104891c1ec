"""Fake web search providers on 127.0.0.1.  Response shapes follow the providers' public API
documentation: Brave Search (``GET /res/v1/web/search``, ``X-Subscription-Token``), Tavily
(``POST /search``, bearer key), SearXNG (``GET /search?format=json``) and DuckDuckGo's HTML
endpoint (``POST /html/``)."""

from __future__ import annotations

import json
from urllib.parse import quote

from aiohttp import web

from tests.fakes.web import serve

BRAVE_KEY = "brave-test-key-123456"
TAVILY_KEY = "tvly-test-key-123456"


class FakeSearch:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/res/v1/web/search", self._brave)
        app.router.add_post("/search", self._tavily)
        app.router.add_get("/search", self._searxng)
        app.router.add_post("/html/", self._ddg)
        self._runner, self.port = await serve(app)

    async def stop(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    async def __aenter__(self) -> FakeSearch:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def _brave(self, request: web.Request) -> web.Response:
        self.requests.append(
            {"provider": "brave", "query": dict(request.query), "headers": dict(request.headers)}
        )
        if request.headers.get("X-Subscription-Token") != BRAVE_KEY:
            return web.json_response(
                {
                    "type": "ErrorResponse",
                    "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "status": 422},
                },
                status=401,
            )
        q = request.query["q"]
        n = int(request.query.get("count", "20"))
        results = [
            {
                "title": f"Brave result {i} for {q}",
                "url": f"https://brave.example/{i}",
                "description": f"About <strong>{q}</strong> number {i}",
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
            }
            for i in range(1, n + 1)
        ]
        return web.json_response(
            {
                "type": "search",
                "query": {"original": q, "more_results_available": True},
                "mixed": {"type": "mixed", "main": []},
                "web": {"type": "search", "results": results, "family_friendly": True},
            }
        )

    async def _tavily(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"provider": "tavily", "body": body, "headers": dict(request.headers)})
        if request.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            return web.json_response(
                {"detail": {"error": "Unauthorized: missing or invalid API key."}}, status=401
            )
        q = body["query"]
        n = int(body.get("max_results", 5))
        return web.json_response(
            {
                "query": q,
                "follow_up_questions": None,
                "answer": None,
                "images": [],
                "results": [
                    {
                        "title": f"Tavily result {i}",
                        "url": f"https://tavily.example/{i}",
                        "content": f"Tavily says {q} #{i}",
                        "score": 0.9 - i / 100,
                        "raw_content": None,
                    }
                    for i in range(1, n + 1)
                ],
                "response_time": 0.42,
            }
        )

    async def _searxng(self, request: web.Request) -> web.Response:
        self.requests.append({"provider": "searxng", "query": dict(request.query)})
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        q = request.query["q"]
        return web.json_response(
            {
                "query": q,
                "number_of_results": 0,
                "results": [
                    {
                        "url": f"https://searx.example/{i}",
                        "title": f"SearXNG result {i}",
                        "content": f"searx {q} {i}",
                        "engine": "bing",
                        "engines": ["bing", "brave"],
                        "score": 2.0,
                        "category": "general",
                    }
                    for i in range(1, 4)
                ],
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    async def _ddg(self, request: web.Request) -> web.Response:
        form = await request.post()
        q = form["q"]
        self.requests.append({"provider": "duckduckgo", "form": dict(form)})
        rows = []
        for i in range(1, 4):
            target = quote(f"https://ddg.example/{i}?a=1&b=2", safe="")
            rows.append(f"""<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a"
       href="//duckduckgo.com/l/?uddg={target}&amp;rut=abc{i}">DDG <b>result</b> {i}</a></h2>
    <div class="result__extras"><a class="result__url" href="x">ddg.example/{i}</a></div>
    <a class="result__snippet" href="x">Snippet about <b>{q}</b> {i}</a>
  </div></div>""")
        html = f"<html><body><div id='links' class='results'>{''.join(rows)}</div></body></html>"
        return web.Response(text=html, content_type="text/html")


def dumps(x) -> str:
    return json.dumps(x)
