"""The light model path's HTTP client (bot.model.openai_compat over bot.net.fetch.endpoint_pool)
at the wire: what it keeps between requests."""

from __future__ import annotations

from aiohttp import web

from bot.model import openai_compat

ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


async def _endpoint(set_cookie: str | None) -> tuple[web.AppRunner, str, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        resp = web.json_response(ANSWER)
        if set_cookie:
            resp.headers["Set-Cookie"] = set_cookie
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # "localhost", not an IP address: aiohttp's cookie jar refuses cookies from addresses
    return runner, f"http://localhost:{port}/v1", seen


async def _ask(base: str) -> dict:
    kw = {"model": "openai/m", "messages": [{"role": "user", "content": "hi"}], "api_base": base}
    return await openai_compat.send(kw, openai_compat.route("openai/m"), 10.0)


async def test_no_cookie_from_a_model_endpoint_is_sent_back() -> None:
    runner, base, seen = await _endpoint("sid=from-the-endpoint; Path=/")
    try:
        for _ in range(3):
            assert (await _ask(base))["choices"][0]["message"]["content"] == "ok"
    finally:
        await runner.cleanup()
    assert len(seen) == 3
    assert [h.get("Cookie") for h in seen] == [None, None, None]


async def test_an_endpoint_without_cookies_answers_on_kept_alive_connections() -> None:
    # the twin: the ordinary endpoint, several calls on the loop's one session
    runner, base, seen = await _endpoint(None)
    try:
        for _ in range(3):
            assert (await _ask(base))["choices"][0]["message"]["content"] == "ok"
    finally:
        await runner.cleanup()
    assert len(seen) == 3
    assert all("Cookie" not in h for h in seen)
