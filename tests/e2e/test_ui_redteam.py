"""Red-team attacks on the Control UI (SPEC §16) through the real daemon on the wire that
found holes, each next to its legitimate twin.  A hole still open is a ``strict`` xfail (its
fix turns it into an XPASS failure, which forces removing the marker); a closed one is a
plain test (63926b3 and 718bc0a closed the stream, nested JSON, client_msg_id, row id and
scrubbing ones; the UI-FIX commits of 27 Nov the turn stream, chunked body, loopback budget,
browser command line and shadow cookie ones, so none is open now):

* an open event stream outlives the revocation of its browser session (live log lines and
  notices keep flowing to a session the owner ended), and so does an open turn stream;
* a JSON body sent chunked (no ``Content-Length``) is not held to the 1 MiB cap, login
  included (no session needed);
* deeply nested JSON on an authenticated route answers a bare 500, not §16.4's JSON error;
* the login rate limit is per loopback address, so a local process that binds 127.0.0.2,
  127.0.0.3, … gets five more attempts per address (loopback is never "one source");
* ``chela dashboard`` hands the login code to the browser on its command line, readable by
  every local user in ``/proc/<pid>/cmdline`` while the code is still unused;
* a ``client_msg_id`` with a trailing newline passes the 1-64 ``[A-Za-z0-9_-]`` check;
* a row id or ``before`` over 2**63 is a bare 500 (sqlite3's OverflowError);
* a channel's delivery error that quotes the bot token reaches the outbox route and the
  ``delivery.failed`` event unscrubbed (the log line of the same error is scrubbed), and a
  channel's start error quoting it reaches ``GET /ui/api/channels``;
* a shadow ``chela_ui`` cookie (path ``/``) that any page on another local port can set
  beside the real one wins, since the guard reads the last value of the Cookie header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from urllib.parse import quote

import aiohttp

from tests.e2e import TG_TOKEN, telegram_section
from tests.e2e.ui_api_helpers import events, turn
from tests.e2e.test_ui_dashboard_opener import run_dashboard
from tests.e2e.ui_client import UiClient, ui_config, ui_daemon
from tests.fakes.llm import delay, text

MARKER = "redteam marker after the session ended"
STOP = f"/ui/api/sessions/{quote('agent:main:main', safe='')}/stop"
COMPACT = f"/ui/api/sessions/{quote('agent:main:main', safe='')}/compact"


async def _code(r) -> str:
    return (await r.json())["error"]["code"]


async def _read_for(stream, seconds: float) -> list[tuple[str, dict]]:
    """What the event stream delivers within ``seconds`` (or until it ends)."""
    got: list[tuple[str, dict]] = []

    async def read() -> None:
        async for name, data, _ in stream:
            got.append((name, data))

    with contextlib.suppress(TimeoutError, StopAsyncIteration, OSError):
        await asyncio.wait_for(read(), seconds)
    return got


async def _revoke_other(owner: UiClient) -> None:
    sessions = (await (await owner.get("/ui/api/ui-sessions")).json())["sessions"]
    other = next(s["id"] for s in sessions if not s["current"])
    assert (await owner.delete(f"/ui/api/ui-sessions/{other}")).status == 204


# ------------------------------------------------------------ revoked session, open stream
async def test_a_revoked_sessions_open_event_stream_gets_nothing_more(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as owner:
        async with await ui.login() as intruder:
            stream = events(intruder, {"after": None, "logs": True})
            assert (await anext(stream))[0] == "hello"
            await _revoke_other(owner)  # the owner ends the session on the System page
            assert (await intruder.get("/ui/api/bootstrap")).status == 401
            logging.getLogger("chela.test").warning(MARKER)
            got = await _read_for(stream, 4)
            await stream.aclose()
    leaked = [d for n, d in got if n == "log.line" and MARKER in d.get("message", "")]
    assert not leaked, got


async def test_twin_a_live_sessions_event_stream_gets_the_log_line(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as owner:
        async with await ui.login() as other:
            stream = events(owner, {"after": None, "logs": True})
            assert (await anext(stream))[0] == "hello"
            await _revoke_other(owner)  # another session ends; this one is live
            assert (await other.get("/ui/api/bootstrap")).status == 401
            logging.getLogger("chela.test").warning(MARKER)
            got = await _read_for(stream, 4)
            await stream.aclose()
    assert [d for n, d in got if n == "log.line" and MARKER in d.get("message", "")], got


# --------------------------------------------------------------- chunked bodies, the cap
async def _chunked(client: UiClient, path: str, payload: bytes, **headers: str | None):
    async def gen():
        for i in range(0, len(payload), 64 * 1024):
            yield payload[i : i + 64 * 1024]

    hdrs = client.headers({"Content-Type": "application/json", **headers})
    try:
        async with client.http.post(client.base + path, data=gen(), headers=hdrs) as r:
            return r.status, await r.text()
    except aiohttp.ClientError as e:  # cut off mid-body: refused without an answer
        return 0, repr(e)


BIG = b'{"code": "' + b"A" * (2 * 1024 * 1024) + b'"}'  # 2 MiB: over the 1 MiB JSON cap


async def test_a_chunked_json_body_over_the_cap_is_too_large(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, body = await _chunked(c, STOP, BIG)
        assert status in (0, 413), body
        assert status == 0 or json.loads(body)["error"]["code"] == "too_large", body
        async with ui.client() as anyone:  # no session: the login route reads it all
            status, body = await _chunked(anyone, "/ui/api/login", BIG)
        assert status in (0, 413), body


async def test_twin_a_small_chunked_json_body_is_read(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, body = await _chunked(c, STOP, b"{}")
        assert status == 200 and json.loads(body) == {"stopped": False}
        async with ui.client() as anyone:
            status, body = await _chunked(
                anyone, "/ui/api/login", b'{"code": "' + b"A" * 22 + b'"}'
            )
        assert status == 401 and json.loads(body)["error"]["code"] == "login_code_invalid"


# ------------------------------------------------------------------- deeply nested JSON
DEEP = "[" * 100_000 + "]" * 100_000


async def test_deeply_nested_json_is_a_json_bad_request(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        r = await c.request(
            "POST", COMPACT, data=DEEP, headers={"Content-Type": "application/json"}
        )
        assert r.status == 400 and await _code(r) == "bad_request", await r.text()


async def test_twin_an_invalid_field_is_a_json_bad_request_and_login_survives_nesting(
    tmp_path, llm
):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        r = await c.post(COMPACT, {"focus": 1})
        assert r.status == 400 and await _code(r) == "bad_request"
        async with ui.client() as anyone:
            r = await anyone.request(
                "POST", "/ui/api/login", data=DEEP, headers={"Content-Type": "application/json"}
            )
            assert r.status == 400 and await _code(r) == "bad_request"


# ------------------------------------------------------- login attempts from 127.0.0.x
async def _login_from(port: int, src: str) -> int:
    """One login attempt with a wrong code, sent from the loopback address ``src``."""
    body = json.dumps({"code": "B" * 22})
    req = (
        f"POST /ui/api/login HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Origin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(src, 0))
    try:
        writer.write(req.encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readline(), 10)
    finally:
        writer.close()
    return int(head.split()[1])


async def test_loopback_addresses_share_one_login_budget(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui:
        assert [await _login_from(ui.port, "127.0.0.1") for _ in range(5)] == [401] * 5
        assert await _login_from(ui.port, "127.0.0.2") == 429


async def test_twin_the_sixth_attempt_from_the_same_address_is_limited(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui:
        assert [await _login_from(ui.port, "127.0.0.1") for _ in range(5)] == [401] * 5
        assert await _login_from(ui.port, "127.0.0.1") == 429


# --------------------------------------------- the login code on a browser command line
def _login_code(url: str) -> str:
    code = url.rsplit("#login=", 1)[1]
    assert len(code) == 22
    return code


def test_the_login_code_is_not_on_the_browsers_command_line(tmp_path, llm):
    url, argv = run_dashboard(tmp_path, llm)  # a $BROWSER that records its argv
    assert argv, "the browser was started"
    assert not any(_login_code(url) in arg for arg in argv)


def test_twin_the_owner_gets_the_code_on_stdout_and_no_browser_with_no_open(tmp_path, llm):
    url, argv = run_dashboard(tmp_path, llm, "--no-open")
    assert _login_code(url) and argv == []


# ------------------------------------------------------- client_msg_id: a trailing newline
async def test_a_client_msg_id_with_a_trailing_newline_is_refused(tmp_path, llm):
    llm.script(text("should not run"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, answer = await turn(c, "agent:main:main", "hi", "nl1\n")
    assert status == 400 and answer["error"]["code"] == "bad_request", answer
    assert llm.requests == []


async def test_twin_a_plain_client_msg_id_starts_a_turn(tmp_path, llm):
    llm.script(text("hello"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        status, evs = await turn(c, "agent:main:main", "hi", "nl1")
        bad, answer = await turn(c, "agent:main:main", "hi", "nl 1")
    assert status == 200 and evs[-1][1]["message"]["text"] == "hello"
    assert bad == 400 and answer["error"]["code"] == "bad_request"


# ------------------------------------------------------ numbers too large for SQLite
HUGE = "9" * 30


async def test_ids_too_large_for_the_database_get_a_json_error(tmp_path, llm):
    llm.script(text("hello"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        await turn(c, "agent:main:main", "hi", "big1")  # the session exists
        r = await c.post(f"/ui/api/outbox/{HUGE}/retry")
        assert r.status in (400, 404) and await _code(r) in ("bad_request", "not_found")
        r = await c.get(f"{STOP.removesuffix('/stop')}/messages?before={HUGE}")
        assert r.status in (200, 400) and r.content_type == "application/json", r.status


async def test_twin_ordinary_ids_get_their_answers(tmp_path, llm):
    llm.script(text("hello"))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        await turn(c, "agent:main:main", "hi", "big1")
        r = await c.post("/ui/api/outbox/12345/retry")
        assert r.status == 404 and await _code(r) == "not_found"
        r = await c.get(f"{STOP.removesuffix('/stop')}/messages?before=1000")
        assert r.status == 200 and len((await r.json())["messages"]) == 2


# ------------------------------------------- a channel error that quotes the bot token
async def _failed_delivery(tmp_path, llm, tg, description: str) -> tuple[str, str]:
    """The ``delivery.failed`` event and ``GET /ui/api/outbox?state=failed`` after Telegram
    refuses the owner's reply with ``description``."""
    llm.script(text("first reply"))
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        stream = events(c, {"after": None, "logs": False})
        assert (await anext(stream))[0] == "hello"
        tg.fail_chat(42, status=403, description=description, times=3)
        tg.inject_message(42, "one", from_id=42)
        event = None
        async for name, data, _ in stream:
            if name == "delivery.failed":
                event = data
                break
        await stream.aclose()
        listed = await (await c.get("/ui/api/outbox?state=failed")).text()
    return json.dumps(event), listed


async def test_a_delivery_error_quoting_the_token_is_scrubbed(tmp_path, llm, tg):
    event, listed = await _failed_delivery(
        tmp_path, llm, tg, f"Forbidden: bot {TG_TOKEN} was blocked by the user"
    )
    assert "was blocked" in event and "was blocked" in listed
    assert TG_TOKEN not in event and TG_TOKEN not in listed


async def test_twin_a_delivery_error_is_shown(tmp_path, llm, tg):
    event, listed = await _failed_delivery(
        tmp_path, llm, tg, "Forbidden: bot was blocked by the user"
    )
    assert "bot was blocked by the user" in event and "bot was blocked by the user" in listed


async def _channel_error(tmp_path, llm, tg, description: str) -> str:
    """``GET /ui/api/channels`` once Telegram's getMe keeps failing with ``description``."""
    tg.fail_next("getMe", status=409, description=description, times=100)
    cfg = ui_config(tmp_path, llm, channels=telegram_section(tg))
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        for _ in range(200):
            listed = await (await c.get("/ui/api/channels")).text()
            by_id = {ch["id"]: ch for ch in json.loads(listed)["channels"]}
            if by_id["telegram"]["error"]:
                return listed
            await asyncio.sleep(0.05)
    raise AssertionError(f"telegram never showed its error: {listed}")


async def test_a_channel_start_error_quoting_the_token_is_scrubbed(tmp_path, llm, tg):
    listed = await _channel_error(tmp_path, llm, tg, f"Conflict: bot {TG_TOKEN} polls")
    assert "polls" in listed and TG_TOKEN not in listed


async def test_twin_a_channel_start_error_is_shown(tmp_path, llm, tg):
    listed = await _channel_error(tmp_path, llm, tg, "Conflict: another instance polls")
    assert "Conflict: another instance polls" in listed


# ------------------------------------------------- a shadow cookie from another local port
# Script on any page of 127.0.0.1 (another port is the same host for cookies) may set
# ``chela_ui=junk; path=/``: it cannot overwrite the HttpOnly cookie (path /ui), but it sits
# beside it, and the browser sends the longer path first: "chela_ui=<real>; chela_ui=junk".


async def test_a_shadow_cookie_from_another_port_does_not_log_the_owner_out(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        both = f"chela_ui={c.cookie}; chela_ui=junk-set-by-another-port"
        r = await c.get("/ui/api/bootstrap", headers={"Cookie": both})
        assert r.status == 200, await r.text()


async def test_shadow_cookies_on_every_prefix_of_a_deep_path_do_not_log_the_owner_out(
    tmp_path, llm
):
    # one shadow per path prefix of a session route, each sent before the real one (path /ui)
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        shadows = "; ".join(f"chela_ui=junk{i}" for i in range(12))
        r = await c.get("/ui/api/bootstrap", headers={"Cookie": f"{shadows}; chela_ui={c.cookie}"})
        assert r.status == 200, await r.text()


async def test_twin_the_real_cookie_alone_or_last_is_the_session(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        assert (await c.get("/ui/api/bootstrap")).status == 200
        last = f"chela_ui=junk-set-by-another-port; chela_ui={c.cookie}"
        assert (await c.get("/ui/api/bootstrap", headers={"Cookie": last})).status == 200
        r = await c.get("/ui/api/bootstrap", headers={"Cookie": "chela_ui=junk"})
        assert r.status == 401  # the junk alone is nothing


# ------------------------------------------------- a revoked session's open turn stream
async def _turn_while(c: UiClient, on_started) -> list[tuple[str, dict]]:
    """POST a web message; call ``on_started`` once ``turn.started`` arrives; the events
    the stream delivers after that (until it ends)."""
    from tests.e2e.ui_api_helpers import parse_sse

    url = f"{c.base}/ui/api/sessions/{quote('agent:main:main', safe='')}/messages"
    body = {"text": "take your time", "client_msg_id": "slow1"}
    got: list[tuple[str, dict]] = []
    async with c.http.post(url, json=body, headers=c.headers()) as r:
        assert r.status == 200, await r.text()
        buf, started = "", False
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            while chunk := await asyncio.wait_for(r.content.readany(), 30):
                buf += chunk.decode()
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    for name, data, _ in parse_sse(block + "\n\n"):
                        if name == "turn.started" and not started:
                            started = True
                            await on_started()
                        elif started:
                            got.append((name, data))
    return got


async def test_a_revoked_sessions_open_turn_stream_gets_nothing_more(tmp_path, llm):
    llm.script(delay(3, then=text("the late answer")))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as owner:
        async with await ui.login() as intruder:
            got = await _turn_while(intruder, lambda: _revoke_other(owner))
    assert not [d for n, d in got if "the late answer" in json.dumps(d)], got


async def test_twin_a_live_sessions_turn_stream_gets_the_answer(tmp_path, llm):
    llm.script(delay(3, then=text("the late answer")))
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as owner:
        async with await ui.login() as other:
            got = await _turn_while(owner, lambda: _revoke_other(owner))
            assert (await other.get("/ui/api/bootstrap")).status == 401  # the other ended
    assert got[-1][0] == "final" and got[-1][1]["message"]["text"] == "the late answer"
