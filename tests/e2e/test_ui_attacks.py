"""Attacks on the Control UI through the real daemon and an aiohttp client on the wire
(SPEC §16.3), each with its legitimate twin: DNS rebinding (a foreign Host), a page on
another local port (a foreign Origin), a write without Origin, a cookie replayed without its
CSRF token, the /v1 bearer token and the UI cookie swapped, CORS preflights, WebSocket
upgrades, bodies of the wrong type or size, read-only mode; the security headers on every
answer; the UI not served on a non-loopback listen without public_origin."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from tests.e2e.ui_client import mint_code, ui_config, ui_daemon

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


async def _code(r: aiohttp.ClientResponse) -> str:
    return (await r.json())["error"]["code"]


async def test_a_foreign_host_is_refused_static_files_too(tmp_path, llm):
    """DNS rebinding: evil.example resolves to 127.0.0.1, the browser sends Host: evil.example."""
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        evil = {"Host": f"evil.example:{ui.port}", "Origin": f"http://evil.example:{ui.port}"}
        for path in ("/ui/", "/ui/api/bootstrap"):
            r = await c.get(path, headers=evil)
            assert r.status == 403 and await _code(r) == "forbidden_host", path
            # twin: the loopback Host (and its own origin) of the same request
            assert (await c.get(path)).status == 200, path
        async with ui.client() as local:  # twin of the login below: a loopback Host
            assert (await local.login("C" * 22)).status == 401  # the code is looked at
        async with ui.client(origin=evil["Origin"]) as rebound:
            r = await rebound.request(
                "POST", "/ui/api/login", json={"code": "C" * 22}, headers={"Host": evil["Host"]}
            )
            assert r.status == 403 and await _code(r) == "forbidden_host"


async def test_an_origin_on_another_local_port_is_refused(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        other = f"http://127.0.0.1:{ui.port + 1}"
        for method, path in (("GET", "/ui/api/bootstrap"), ("POST", "/ui/api/logout")):
            r = await c.request(method, path, json={}, headers={"Origin": other})
            assert r.status == 403 and await _code(r) == "forbidden_origin", path
        async with ui.client(origin=other) as page:
            r = await page.login(mint_code(ui.cfg))
            assert r.status == 403 and await _code(r) == "forbidden_origin"
        assert (await c.get("/ui/api/bootstrap")).status == 200  # twin: its own origin


async def test_a_write_without_origin_is_refused(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        r = await c.post("/ui/api/logout", headers={"Origin": None})
        assert r.status == 403 and await _code(r) == "forbidden_origin"
        assert (await c.get("/ui/api/bootstrap", headers={"Origin": None})).status == 200  # a read
        assert (await c.post("/ui/api/logout")).status == 204  # twin: with its Origin


async def test_a_cookie_replayed_without_its_csrf_token_is_refused_reads_included(tmp_path, llm):
    """What a server on another local port gets (cookies ignore ports): the cookie alone."""
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        for method, path in (
            ("GET", "/ui/api/bootstrap"),
            ("GET", "/ui/api/ui-sessions"),
            ("POST", "/ui/api/logout"),
        ):
            for csrf in (None, "x" * 43, c.csrf[:-1]):
                r = await c.request(method, path, json={}, headers={"X-Chela-CSRF": csrf})
                assert r.status == 403 and await _code(r) == "csrf", (path, csrf)
        assert (await c.get("/ui/api/ui-sessions")).status == 200  # twin: the pair


async def test_the_v1_token_is_not_a_ui_session_and_the_cookie_is_not_a_v1_credential(
    tmp_path, llm
):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        bearer = {"Authorization": f"Bearer {ui.http_token}"}
        async with ui.client() as api_client:
            r = await api_client.get("/ui/api/bootstrap", headers=bearer)
            assert r.status == 401 and await _code(r) == "unauthenticated"
            twin = await api_client.get("/v1/models", headers={**bearer, "Origin": None})
            assert twin.status == 200  # the token is a /v1 credential
        r = await c.get("/v1/models", headers={"Origin": None})
        assert r.status == 401 and (await r.json())["error"]["code"] == "invalid_api_key"
        assert (await c.get("/ui/api/bootstrap")).status == 200  # twin: the cookie is the UI's


async def test_options_and_websocket_upgrades_are_refused(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        origins = (ui.base, f"http://127.0.0.1:{ui.port + 1}")
        for path, origin in [(p, o) for p in ("/ui/api/login", "/ui/") for o in origins]:
            r = await c.request(
                "OPTIONS",
                path,
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "x-chela-csrf, content-type",
                },
            )
            assert r.status == 403, path
            assert not [h for h in r.headers if h.lower().startswith("access-control-")]
        for path in ("/ui/api/events", "/ui/", "/ui/api/bootstrap"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                await c.http.ws_connect(ui.base + path, headers=c.headers())
            assert e.value.status in (403, 404), path
        assert (await c.get("/ui/api/bootstrap")).status == 200  # twin: the plain request


async def test_get_events_is_405_with_allow(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        r = await c.get("/ui/api/events")
        assert r.status == 405 and await _code(r) == "method_not_allowed"
        assert "POST" in r.headers["Allow"]


async def test_bodies_must_be_json_within_the_cap(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        r = await c.request(
            "POST", "/ui/api/logout", data="{}", headers={"Content-Type": "text/plain"}
        )
        assert r.status == 415 and await _code(r) == "unsupported_media_type"
        big = '{"pad": "' + "x" * (1024 * 1024 + 1) + '"}'
        r = await c.request(
            "POST", "/ui/api/logout", data=big, headers={"Content-Type": "application/json"}
        )
        assert r.status == 413 and await _code(r) == "too_large"
        assert (await c.post("/ui/api/logout")).status == 204  # twin: a small JSON body


async def test_read_only_refuses_writes_but_login_and_logout(tmp_path, llm):
    async with ui_daemon(tmp_path, llm, ui={"read_only": True}) as ui, await ui.login() as c:
        boot = await (await c.get("/ui/api/bootstrap")).json()
        assert boot["read_only"] is True
        mine = (await (await c.get("/ui/api/ui-sessions")).json())["sessions"][0]["id"]
        r = await c.delete(f"/ui/api/ui-sessions/{mine}")
        assert r.status == 403 and await _code(r) == "read_only"
        assert (await c.post("/ui/api/logout")).status == 204  # twin: logout still works


async def test_security_headers_on_every_ui_answer_no_store_on_the_api(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        answers = {
            "/ui/": await c.get("/ui/"),
            "/ui/nope.js": await c.get("/ui/nope.js"),
            "/ui/api/bootstrap": await c.get("/ui/api/bootstrap"),
            "401": await c.get("/ui/api/bootstrap", headers={"Cookie": None}),
            "403 host": await c.get("/ui/", headers={"Host": "evil.example"}),
        }
        statuses = {k: r.status for k, r in answers.items()}
        assert statuses == {
            "/ui/": 200,
            "/ui/nope.js": 404,
            "/ui/api/bootstrap": 200,
            "401": 401,
            "403 host": 403,
        }
        for name, r in answers.items():
            for header, value in HEADERS.items():
                assert r.headers.get(header) == value, (name, header)
            api = name in ("/ui/api/bootstrap", "401")
            assert (r.headers.get("Cache-Control") == "no-store") is api, name
        assert (await c.get("/ui/../v1/models", headers={"Origin": None})).status in (401, 404)


async def test_non_loopback_listen_without_public_origin_does_not_serve_the_ui(
    tmp_path, llm, caplog
):
    caplog.set_level(logging.WARNING, logger="chela.daemon")
    cfg = ui_config(tmp_path / "wide", llm, listen="0.0.0.0:0")
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, ui.client() as c:
        r = await c.get("/ui/")
        assert r.status == 404 and "ui.public_origin is empty" in await r.text()
        assert (await c.login("D" * 22)).status == 404
    assert any("Control UI is not served" in rec.getMessage() for rec in caplog.records)
    twin = ui_config(
        tmp_path / "tls", llm, listen="0.0.0.0:0", ui={"public_origin": "https://chela.example.net"}
    )
    async with ui_daemon(tmp_path, llm, cfg=twin) as ui, ui.client() as c:
        assert (await c.get("/ui/")).status == 200


async def test_the_root_redirects_to_the_ui_only_when_it_is_served(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, ui.client() as c:
        r = await c.get("/", headers={"Origin": None})
        assert r.status == 302 and r.headers["Location"] == "/ui/"
        bare = await c.get("/ui", headers={"Origin": None})
        assert bare.status == 308 and bare.headers["Location"] == "/ui/"
        evil = await c.get("/", headers={"Origin": None, "Host": "evil.example"})
        assert evil.status == 403  # the API's own Host rule still applies
    off = ui_config(tmp_path / "off", llm, ui={"enabled": False})
    async with ui_daemon(tmp_path, llm, cfg=off) as ui, ui.client() as c:
        assert (await c.get("/", headers={"Origin": None})).status == 401  # the token's door
        assert (await c.get("/ui/", headers={"Origin": None})).status == 401
