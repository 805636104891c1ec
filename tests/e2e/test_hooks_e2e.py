"""Webhooks end to end: a daemon with the HTTP channel and the fake Telegram, real aiohttp
requests signed the way each sender signs them.  A correctly signed request is answered
202 at once and becomes one turn whose reply reaches Telegram; each twin (wrong, missing,
other body, stale, replayed, unknown route, too large, too many) is refused with no turn."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time

import aiohttp
import pytest

from tests.e2e import make_config, running, telegram_section
from tests.e2e.harness import eventually
from tests.fakes.llm import text

SECRET = "hook-secret-value-4f1c9"
WHSEC = "whsec_" + base64.b64encode(b"standard-key-bytes-0123456789").decode()
API_TOKEN = "owner-api-token-value-77"
OWNER = 42


def hex_sig(secret: str, msg: bytes) -> str:
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def signed(scheme: str, body: bytes, delivery: str = "d-1", *, at: float | None = None) -> dict:
    """The headers a sender of ``scheme`` puts on ``body``."""
    t = str(int(time.time() if at is None else at))
    if scheme == "github":
        return {
            "X-Hub-Signature-256": "sha256=" + hex_sig(SECRET, body),
            "X-GitHub-Delivery": delivery,
            "X-GitHub-Event": "push",
        }
    if scheme == "stripe":
        return {"Stripe-Signature": f"t={t},v1={hex_sig(SECRET, t.encode() + b'.' + body)}"}
    if scheme == "standard":
        key = base64.b64decode(WHSEC.removeprefix("whsec_"))
        mac = hmac.new(key, f"{delivery}.{t}.".encode() + body, hashlib.sha256).digest()
        return {
            "webhook-id": delivery,
            "webhook-timestamp": t,
            "webhook-signature": "v1," + base64.b64encode(mac).decode(),
        }
    if scheme == "hmac":
        return {"X-Signature": hex_sig(SECRET, body), "X-Delivery-Id": delivery}
    return {"Authorization": f"Bearer {SECRET}", "X-Delivery-Id": delivery}


def hook(name: str, scheme: str, **kw) -> dict:
    out = {
        "name": name,
        "scheme": scheme,
        "secret_env": "TEST_WHSEC" if scheme == "standard" else "TEST_HOOK_SECRET",
        "prompt": "Event {event} arrived:\n{body}",
        "deliver": f"telegram:{OWNER}",
    }
    if scheme == "hmac":
        out["header"] = "X-Signature"
    return {**out, **kw}


SCHEMES = ["github", "stripe", "standard", "hmac", "token"]


def config(tmp_path, llm, tg, monkeypatch, hooks: list[dict] | None = None):
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)
    monkeypatch.setenv("TEST_WHSEC", WHSEC)
    monkeypatch.setenv("TEST_HTTP_TOKEN", API_TOKEN)
    http = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    return make_config(
        tmp_path,
        llm,
        channels={"http": http, **telegram_section(tg)},
        hooks=hooks if hooks is not None else [hook(s, s) for s in SCHEMES],
    )


def body_of(scheme: str, n: int = 1) -> bytes:
    return json.dumps({"id": f"evt_{scheme}_{n}", "type": "ping", "n": n}).encode()


async def post(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s, s.post(url, data=body, headers=headers) as r:
        raw = await r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, {"raw": raw.decode("utf-8", "replace")}


def url(d, name: str) -> str:
    return f"http://127.0.0.1:{d.channels['http'].bound_port}/hooks/{name}"


def hook_turns(d) -> list[str]:
    rows = d.store.db.execute(
        "SELECT session_key FROM messages WHERE role='user' AND kind IN ('hook','mail')"
    )
    return [r[0] for r in rows]


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_each_scheme_signed_correctly_runs_one_turn_and_delivers(
    tmp_path, llm, tg, monkeypatch, scheme
):
    llm.default = lambda request: text(f"the {scheme} event needs you")
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        body = body_of(scheme)
        status, answer = await post(url(d, scheme), body, signed(scheme, body))
        assert status == 202 and answer["status"] == "accepted"
        assert answer["id"].startswith("evt_")
        await tg.wait_for(lambda: [s for s in tg.sent if scheme in s.text], timeout=10)
        assert hook_turns(d) == [f"agent:main:hook:{scheme}"]
        prompt = json.dumps(llm.requests[-1]["messages"])
        assert "Untrusted data" in prompt and f"evt_{scheme}_1" in prompt
        assert SECRET not in prompt and WHSEC not in prompt  # signatures are not shown either
        assert hex_sig(SECRET, body) not in prompt
        # a redelivery (stripe: the same event id) is a duplicate: no second turn
        again = signed(scheme, body)
        status, answer = await post(url(d, scheme), body, again)
        assert (status, answer) == (200, {"status": "duplicate"})
        assert len(hook_turns(d)) == 1
        verdicts = [r["verdict"] for r in d.store.trigger_log(scheme)]
        assert verdicts == ["duplicate", "accepted"]


def _twins(scheme: str, body: bytes) -> list[tuple[str, bytes, dict]]:
    good = signed(scheme, body, "d-twin")
    other = body.replace(b"ping", b"pong")
    missing = {
        k: v
        for k, v in good.items()
        if k.lower() not in ("x-hub-signature-256", "stripe-signature", "webhook-signature")
        and k.lower() not in ("x-signature", "authorization")
    }
    wrong = {k: v for k, v in good.items()}
    out = [("missing", body, missing)]
    if scheme != "token":  # a bearer token does not sign the body
        out.append(("other body", other, good))
    if scheme == "github":
        wrong["X-Hub-Signature-256"] = "sha256=" + "0" * 64
    elif scheme == "stripe":
        wrong["Stripe-Signature"] = "t=1,v1=zzzz,,garbage"
    elif scheme == "standard":
        wrong["webhook-signature"] = "v1,AAAA v2,"
    elif scheme == "hmac":
        wrong["X-Signature"] = "sha256=" + hex_sig("another secret", body)
    else:
        wrong["Authorization"] = f"Bearer {API_TOKEN}"  # the owner's API token opens nothing here
    out.append(("wrong", body, wrong))
    if scheme in ("stripe", "standard"):
        out.append(("stale", body, signed(scheme, body, "d-old", at=time.time() - 3600)))
        out.append(("future", body, signed(scheme, body, "d-new", at=time.time() + 3600)))
    return out


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_each_refusal_twin_is_401_without_detail_and_runs_nothing(
    tmp_path, llm, tg, monkeypatch, scheme, caplog
):
    caplog.set_level(logging.DEBUG)
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        for what, body, headers in _twins(scheme, body_of(scheme)):
            status, answer = await post(url(d, scheme), body, headers)
            assert (status, answer) == (401, {"error": "unauthorized"}), what
        assert hook_turns(d) == [] and llm.requests == []
        assert {r["verdict"] for r in d.store.trigger_log(scheme)} == {"unauthorized"}
    assert SECRET not in caplog.text and WHSEC not in caplog.text


async def test_unknown_route_large_body_rate_limit_and_api_token_not_a_door(
    tmp_path, llm, tg, monkeypatch
):
    llm.default = lambda request: text("NO_REPLY")
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        body = body_of("token")
        status, _ = await post(url(d, "nope"), body, signed("token", body))
        assert status == 404
        big = b"x" * (2 * 1024 * 1024)
        status, answer = await post(url(d, "token"), big, signed("token", big, "big"))
        assert (status, answer) == (413, {"error": "too large"})
        # twin: a body just under 1 MiB is taken
        fits = b"y" * (1024 * 1024 - 10)
        status, _ = await post(url(d, "token"), fits, signed("token", fits, "fits"))
        assert status == 202
        # the hook's secret opens nothing else: not the API
        port = d.channels["http"].bound_port
        async with (
            aiohttp.ClientSession() as s,
            s.get(f"http://127.0.0.1:{port}/v1/models", headers=signed("token", b"")) as r,
        ):
            assert r.status == 401
        # 60 a minute per route; the 61st (counting the ones above) is refused
        codes = []
        for i in range(60):
            b = body_of("token", i + 10)
            codes.append((await post(url(d, "token"), b, signed("token", b, f"r{i}")))[0])
        assert codes.count(429) >= 1 and codes[:55].count(202) == 55
        # another route has its own window
        b = body_of("github", 99)
        assert (await post(url(d, "github"), b, signed("github", b, "g99")))[0] == 202
        verdicts = {r["verdict"] for r in d.store.trigger_log("token", limit=500)}
        assert {"too large", "rate limited", "accepted"} <= verdicts


async def test_no_reply_delivers_nothing_and_tools_are_exactly_the_hooks(
    tmp_path, llm, tg, monkeypatch
):
    llm.default = lambda request: text("NO_REPLY")
    hooks = [hook("bare", "token"), hook("tooled", "hmac", tools=["session_status"])]
    async with running(config(tmp_path, llm, tg, monkeypatch, hooks)) as d:
        for name, scheme in (("bare", "token"), ("tooled", "hmac")):
            b = body_of(name)
            assert (await post(url(d, name), b, signed(scheme, b, name)))[0] == 202
        await eventually(lambda: len(llm.requests) == 2, timeout=10)
        await eventually(lambda: all(r["status"] == "done" for r in d.store.trigger_log()))
        by_session = {}
        for req in llm.requests:
            names = [t["function"]["name"] for t in req.get("tools") or []]
            joined = json.dumps(req["messages"])
            by_session["bare" if "evt_bare" in joined else "tooled"] = names
        assert by_session == {"bare": [], "tooled": ["session_status"]}
        assert [s for s in tg.sent if s.chat_id == OWNER] == []  # NO_REPLY: nothing sent
        assert {r["result"] for r in d.store.trigger_log()} == {"silent (NO_REPLY)"}


async def test_bad_input_is_answered_and_nothing_crashes(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("noted")
    async with running(config(tmp_path, llm, tg, monkeypatch)) as d:
        plain = b"not json at all {"
        headers = {**signed("hmac", plain, "plain"), "Content-Type": "text/plain"}
        assert (await post(url(d, "hmac"), plain, headers))[0] == 202
        huge = {**signed("hmac", plain, "huge"), "X-Huge": "h" * 20000}
        assert (await post(url(d, "hmac"), plain, huge))[0] in (400, 431)
        garbage = {"Stripe-Signature": "t=abc,,==;;v1=%%%,v1=" + "Z" * 500}
        assert (await post(url(d, "stripe"), plain, garbage))[0] == 401
        await tg.wait_for(lambda: [s for s in tg.sent if "noted" in s.text], timeout=10)
        prompt = json.dumps(llm.requests[-1]["messages"])
        assert "not json at all" in prompt
        assert (await post(url(d, "github"), b"{}", signed("github", b"{}", "ok")))[0] == 202


def test_an_unset_secret_variable_is_a_config_error_naming_the_key(tmp_path, llm, monkeypatch):
    from bot.config.load import ConfigError

    monkeypatch.delenv("TEST_HOOK_SECRET", raising=False)
    http = {"enabled": True, "listen": "127.0.0.1:0"}
    gh = hook("gh", "github", deliver="owner")
    with pytest.raises(ConfigError, match=r"hooks\[0\]\.secret_env: .*TEST_HOOK_SECRET"):
        make_config(tmp_path, llm, channels={"http": http}, hooks=[gh])
    monkeypatch.setenv("TEST_HOOK_SECRET", SECRET)  # twin: set, it loads
    assert make_config(tmp_path, llm, channels={"http": http}, hooks=[gh])
