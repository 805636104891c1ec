"""Red-team attacks on the Control UI (SPEC §16) that the real daemon refuses, kept where
the other UI tests do not already cover them, each with its legitimate twin: static-file
path traversal spelled every way a raw request can spell it; Host spellings (DNS rebinding
names, userinfo, 0.0.0.0, short and mapped addresses, duplicates); Origin spellings (null,
another scheme, a path, another loopback name); every write route under ``read_only``;
an upload named with ``../``; a chunked upload over ``media.max_download_mb``;
``client_msg_id`` reused in another session; a provider error and tool output that carry
the API key, on the turn stream and in the transcript; login with an attacker-chosen cookie,
with the code in the query string, and with forwarded-address headers past the rate limit;
the agent's web_fetch, allowed onto localhost by the owner, reaching the UI's port."""

from __future__ import annotations

import asyncio
import json
import os
from urllib.parse import quote

import aiohttp

from tests.e2e.ui_api_helpers import turn
from tests.e2e.ui_client import mint_code, ui_config, ui_daemon
from tests.fakes.llm import error, text, tool_calls

MAIN = "agent:main:main"
Q = quote(MAIN, safe="")


async def _raw(port: int, request: str) -> tuple[int, str]:
    """A request sent byte for byte (no client normalises its path or headers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request.encode("latin-1"))
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = data.decode("latin-1").partition("\r\n\r\n")
    return int(head.split()[1]), body


def _get(path: str, host: str) -> str:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"


TRAVERSALS = (
    "/ui/../pyproject.toml",
    "/ui/..%2f..%2fauth.py",
    "/ui/%2e%2e/%2e%2e/pyproject.toml",
    "/ui/js/../../auth.py",
    "/ui/js/..%2F..%2Fauth.py",
    "/ui/js/%2e%2e/%2e%2e/guard.py",
    "/ui//etc/passwd",
    "/ui/js\\..\\..\\auth.py",
    "/ui/%2e%2e/v1/models",
    "/ui/.hidden",
    "/ui/js/./app.js",
    "/ui/API/config",
)


async def test_static_traversal_in_every_spelling_serves_nothing_outside(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui:
        host = f"127.0.0.1:{ui.port}"
        for path in TRAVERSALS:
            status, body = await _raw(ui.port, _get(path, host))
            assert status in (400, 404), (path, status, body[:200])
            assert "import" not in body and "root:" not in body, path
        status, body = await _raw(ui.port, _get("/ui/js/app.js", host))  # twin
        assert status == 200 and "import" in body


REFUSED_HOSTS = (
    "127.0.0.1.nip.io",
    "localhost.evil.example",
    "foo.localhost",
    "u@127.0.0.1",
    "0.0.0.0",
    "127.1",
    "2130706433",
    "localhost:abc",
    "127.0.0.1:1:2",
    "",
)
ACCEPTED_HOSTS = ("localhost.", "LOCALHOST", "[::1]", "127.0.0.1", "127.0.0.2")


async def test_host_spellings_only_loopback_names_pass(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui:
        for host in REFUSED_HOSTS:
            status, body = await _raw(ui.port, _get("/ui/", host))
            assert status == 403 and "forbidden_host" in body, host
        for first, second in (("evil.example", "127.0.0.1"), ("127.0.0.1", "evil.example")):
            req = (
                f"GET /ui/ HTTP/1.1\r\nHost: {first}\r\nHost: {second}\r\nConnection: close\r\n\r\n"
            )
            status, _ = await _raw(ui.port, req)
            assert status in (400, 403), (first, second)  # two Hosts: never served
        for host in ACCEPTED_HOSTS:  # twin: loopback, spelled as browsers may send it
            status, _ = await _raw(ui.port, _get("/ui/", f"{host}:{ui.port}"))
            assert status == 200, host


async def test_origin_spellings_other_than_the_uis_own_are_refused(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        p = ui.port
        for origin in (
            "null",
            f"https://127.0.0.1:{p}",
            f"http://localhost:{p}",
            f"http://[::1]:{p}",
            "http://127.0.0.1",
            f"http://127.0.0.1:{p}/ui/",
            f"http://u@127.0.0.1:{p}",
            f"http://127.0.0.1:{p}.evil.example",
        ):
            r = await c.post(f"/ui/api/sessions/{Q}/stop", headers={"Origin": origin})
            assert r.status == 403, origin
            assert (await r.json())["error"]["code"] == "forbidden_origin", origin
        r = await c.post(f"/ui/api/sessions/{Q}/stop")  # twin: the UI's own origin
        assert r.status == 200 and await r.json() == {"stopped": False}


WRITES = (
    (f"/ui/api/sessions/{Q}/messages", {"text": "hi", "client_msg_id": "ro1"}),
    (f"/ui/api/sessions/{Q}/stop", {}),
    (f"/ui/api/sessions/{Q}/reset", {}),
    (f"/ui/api/sessions/{Q}/compact", {}),
    ("/ui/api/approvals/ABC123", {"decision": "approve"}),
    ("/ui/api/pairing/telegram/ABC123", {"decision": "approve"}),
    ("/ui/api/outbox/1/retry", {}),
    ("/ui/api/outbox/1/discard", {}),
    ("/ui/api/schedule/heartbeat/run", {}),
    ("/ui/api/schedule/heartbeat/pause", {}),
    ("/ui/api/schedule/heartbeat/resume", {}),
)


async def test_read_only_refuses_every_write_route_uploads_included(tmp_path, llm):
    async with ui_daemon(tmp_path, llm, ui={"read_only": True}) as ui, await ui.login() as c:
        for path, body in WRITES:
            r = await c.post(path, body)
            assert r.status == 403 and (await r.json())["error"]["code"] == "read_only", path
        form = aiohttp.FormData()
        form.add_field("file", b"hello", filename="a.txt", content_type="text/plain")
        async with c.http.post(ui.base + "/ui/api/uploads", data=form, headers=c.headers()) as r:
            assert r.status == 403 and (await r.json())["error"]["code"] == "read_only"
        assert llm.requests == []  # no turn ran
        for path in ("/ui/api/sessions", "/ui/api/schedule", "/ui/api/approvals"):  # twin
            assert (await c.get(path)).status == 200, path


async def test_an_upload_named_with_dot_dots_stays_in_the_media_dir(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        before = set(os.listdir(tmp_path))
        form = aiohttp.FormData()
        png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
        form.add_field("file", png, filename="../../../evil.png", content_type="image/png")
        async with c.http.post(ui.base + "/ui/api/uploads", data=form, headers=c.headers()) as r:
            assert r.status == 201, await r.text()
            meta = await r.json()
        stored = os.listdir(ui.cfg.media_dir)
        assert len(stored) == 1 and "/" not in stored[0] and not stored[0].startswith(".")
        assert (ui.cfg.media_dir / stored[0]).read_bytes() == png
        assert set(os.listdir(tmp_path)) == before and meta["size"] == len(png)
        r = await c.request(  # a form to a JSON route, JSON to the upload route: refused
            "POST", "/ui/api/uploads", data="{}", headers={"Content-Type": "application/json"}
        )
        assert r.status == 415


async def test_a_client_msg_id_is_per_session(tmp_path, llm):
    llm.script(text("answer A"), text("answer B"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        _, a = await turn(c, "agent:main:direct:a", "x", "same-id")
        _, b = await turn(c, "agent:main:direct:b", "x", "same-id")
        _, again = await turn(c, "agent:main:direct:a", "x", "same-id")
    assert a[-1][1]["message"]["text"] == "answer A"
    assert b[-1][1]["message"]["text"] == "answer B"  # not A's answer replayed
    assert again[-1][1]["message"]["text"] == "answer A"  # twin: a replay in A
    assert len(llm.requests) == 2


SECRET = "sk-redteam-secret-0123456789abcdef"


async def test_a_provider_error_and_tool_output_never_carry_the_key(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("REDTEAM_UI_API_KEY", SECRET)
    tools = {"enabled": ["exec"], "exec": {"security": "full", "sandbox": "off"}}
    agent = {"api_key_env": "REDTEAM_UI_API_KEY"}
    async with ui_daemon(tmp_path, llm, agent=agent, tools=tools) as ui, await ui.login() as c:
        (ui.cfg.agent.workspace / "notes.txt").write_text(f"the key is {SECRET}\n")
        llm.script(
            error(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}}),
            tool_calls([("exec", {"command": "cat notes.txt; echo env=$REDTEAM_UI_API_KEY"})]),
            text("done"),
        )
        _, failed = await turn(c, MAIN, "hello", "e1")
        _, ran = await turn(c, MAIN, "read it", "t1")
        transcript = await (await c.get(f"/ui/api/sessions/{Q}/messages")).text()
        logs = await (await c.get("/ui/api/logs?limit=2000")).text()
    assert failed[-1][0] == "error" and ran[-1][1]["message"]["text"] == "done"
    for name, raw in (("error", json.dumps(failed)), ("turn", json.dumps(ran))):
        assert SECRET not in raw, name
    assert SECRET not in transcript and SECRET not in logs
    assert "the key is" in transcript  # twin: the tool's output is there, key scrubbed
    assert llm.headers[0].get("Authorization", "").endswith(SECRET)  # the key is in use


async def test_a_chunked_upload_over_the_cap_is_refused_and_not_kept(tmp_path, llm):
    async with (
        ui_daemon(tmp_path, llm, media={"max_download_mb": 1}) as ui,
        await ui.login() as c,
    ):
        for size, status in ((2 * 1024 * 1024, 413), (1000, 201)):  # the twin fits
            form = aiohttp.MultipartWriter("form-data")
            part = form.append(b"x" * size, {"Content-Type": "application/octet-stream"})
            part.set_content_disposition("form-data", name="file", filename="big.bin")

            async def chunks(form=form):  # no Content-Length: only the route's cap applies
                class Sink:
                    def __init__(self) -> None:
                        self.parts: list[bytes] = []

                    async def write(self, data: bytes) -> None:
                        self.parts.append(bytes(data))

                sink = Sink()
                await form.write(sink)  # type: ignore[arg-type]
                for piece in sink.parts:
                    yield piece

            headers = c.headers({"Content-Type": form.content_type})
            async with c.http.post(
                ui.base + "/ui/api/uploads", data=chunks(), headers=headers
            ) as r:
                assert r.status == status, (size, await r.text())
        kept = [p.stat().st_size for p in ui.cfg.media_dir.iterdir()]
        assert kept == [1000]


async def test_login_takes_no_attacker_cookie_no_query_code_and_no_forwarded_address(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, ui.client() as c:
        code = mint_code(ui.cfg)
        fixed = "attacker-chosen-cookie-value-0123456789abcdef"
        r = await c.request(  # the code in a query string is not read (nor consumed)
            "POST", f"/ui/api/login?code={code}", json={}, headers={"Cookie": f"chela_ui={fixed}"}
        )
        assert r.status == 400
        r = await c.request(
            "POST", "/ui/api/login", json={"code": code}, headers={"Cookie": f"chela_ui={fixed}"}
        )
        assert r.status == 200  # twin: the body's code logs in, once
        assert r.cookies["chela_ui"].value != fixed  # a fresh cookie, not the one presented
        csrf = (await r.json())["csrf"]
        r = await c.get(
            "/ui/api/bootstrap", headers={"Cookie": f"chela_ui={fixed}", "X-Chela-CSRF": csrf}
        )
        assert r.status == 401
        for _ in range(3):  # 1 + 1 + 3 = 5 attempts from 127.0.0.1 so far
            await c.login("C" * 22)
        for spoof in ("203.0.113.9", "::1", "127.0.0.2"):
            r = await c.request(
                "POST",
                "/ui/api/login",
                json={"code": "C" * 22},
                headers={"X-Forwarded-For": spoof, "X-Real-IP": spoof, "Forwarded": f"for={spoof}"},
            )
            assert r.status == 429, spoof


async def test_the_agent_allowed_onto_loopback_still_gets_nothing_from_the_ui(tmp_path, llm, tg):
    """The owner lets ``web_fetch`` reach ``localhost`` (a local docs server, say): the model
    can then reach the UI's port, but holds no cookie and no CSRF token, so the API, its
    config view included, and the /v1 API answer 401; the twin is the static page, which
    shows the fetches really reached the UI."""
    from tests.e2e import telegram_section

    tools = {"enabled": ["web_fetch"], "web": {"allow_private_hosts": ["localhost"]}}
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg), tools=tools)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        base = f"http://localhost:{ui.port}"
        urls = ["/ui/api/bootstrap", "/ui/api/config", "/v1/models", "/ui/"]
        llm.script(
            tool_calls([("web_fetch", {"url": base + u}) for u in urls]), text("looked around")
        )
        tg.inject_message(42, "read the local pages", from_id=42)
        await tg.wait_for_sent(1, timeout=30)
    results = [m["content"] for m in llm.requests[1]["messages"] if m.get("role") == "tool"]
    assert len(results) == 4, results
    for url, result in zip(urls[:3], results[:3], strict=True):
        assert "Status: 401" in result, (url, result[-300:])
        assert "unauthenticated" in result or "invalid_api_key" in result, url
        assert ui.http_token not in result and "TEST-telegram-token" not in result, url
    assert "Status: 200" in results[3] and "Title: Chela" in results[3]  # twin: the page
