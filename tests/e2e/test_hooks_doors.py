"""Webhooks against a running daemon, as someone probing its door would: a refused request
never burns a delivery id, the owner's API token neither opens nor blocks a hook, proxy and
loopback headers buy nothing, a body too large is refused while it streams (never read to
its end), a header of 1 MB or a body nested too deep is answered and the daemon goes on."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from tests.e2e.harness import eventually
from tests.e2e.test_hooks_e2e import API_TOKEN, SECRET, body_of, config, post, signed, url
from tests.fakes.llm import text


def verdicts(d, name: str) -> list[str]:
    return [r["verdict"] for r in d.store.trigger_log(name, limit=500)]


def turns(d) -> int:
    q = "SELECT count(*) FROM messages WHERE role='user' AND kind='hook'"
    return d.store.db.execute(q).fetchone()[0]


async def test_a_refused_delivery_does_not_burn_its_id(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        for scheme in ("github", "standard", "hmac"):
            body = body_of(scheme)
            forged = signed(scheme, body, "pre-burnt")
            if scheme == "github":
                forged["X-Hub-Signature-256"] = "sha256=" + "0" * 64
            elif scheme == "standard":
                forged["webhook-signature"] = "v1,AAAA"
            else:
                forged["X-Signature"] = "0" * 64
            assert (await post(url(d, scheme), body, forged))[0] == 401
            # the sender's real delivery with that id is taken, once
            good = signed(scheme, body, "pre-burnt")
            assert (await post(url(d, scheme), body, good))[0] == 202, scheme
            assert (await post(url(d, scheme), body, good))[0] == 200, scheme
            assert verdicts(d, scheme) == ["duplicate", "accepted", "unauthorized"]
        await eventually(lambda: turns(d) == 3)


async def test_the_api_token_neither_opens_nor_blocks_a_hook(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        body = body_of("github")
        owner = {"Authorization": f"Bearer {API_TOKEN}", "X-GitHub-Delivery": "tok"}
        assert (await post(url(d, "github"), body, owner)) == (401, {"error": "unauthorized"})
        both = {**signed("github", body, "tok"), "Authorization": f"Bearer {API_TOKEN}"}
        assert (await post(url(d, "github"), body, both))[0] == 202  # handled as a hook
        port = d.channels["http"].bound_port
        async with aiohttp.ClientSession() as s:
            for path in ("/v1/models", "/ui/api/inbox/events", "/ui/api/sessions"):
                hdrs = {"Authorization": f"Bearer {SECRET}"}
                async with s.get(f"http://127.0.0.1:{port}{path}", headers=hdrs) as r:
                    assert r.status == 401, path  # the hook's secret opens nothing
            ok = {"Authorization": f"Bearer {API_TOKEN}"}
            async with s.get(f"http://127.0.0.1:{port}/v1/models", headers=ok) as r:
                assert r.status == 200  # twin: the API's own token does


async def test_proxy_and_loopback_headers_buy_nothing(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        body = body_of("hmac")
        local = {"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1", "Host": "localhost"}
        unsigned = {**local, "X-Delivery-Id": "x"}
        assert (await post(url(d, "hmac"), body, unsigned))[0] == 401
        # the window is the route's: a new forwarded address each time does not reset it
        codes = []
        for i in range(61):
            hdrs = {**signed("hmac", body, f"f{i}"), "X-Forwarded-For": f"10.0.0.{i}"}
            codes.append((await post(url(d, "hmac"), body, hdrs))[0])
        assert codes[:59] == [202] * 59 and codes[59:] == [429, 429]
        for i in range(30):  # a flood is one ledger row (and one log line) a minute
            assert (await post(url(d, "hmac"), body, {"X-Delivery-Id": f"z{i}"}))[0] == 429
        assert verdicts(d, "hmac").count("rate limited") == 1
        # a machine sender behind a proxy: any Host, any Origin, text/plain (the twin)
        other = body_of("github")
        hdrs = {
            **signed("github", other, "proxied"),
            "Host": "hooks.example.org",
            "Origin": "https://elsewhere.example",
            "Content-Type": "text/plain",
        }
        assert (await post(url(d, "github"), other, hdrs))[0] == 202


async def _raw(port: int, head: bytes, chunks=None, limit: int = 0) -> tuple[bytes, int]:
    """Send ``head`` then ``chunks`` (chunked encoding) until the server answers or
    ``limit`` bytes went out: (the status line, bytes of body sent)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    try:
        writer.write(head)
        answer = asyncio.ensure_future(reader.readline())
        while chunks is not None and not answer.done() and sent < limit:
            chunk = next(chunks)
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            try:
                await asyncio.wait_for(writer.drain(), 5)
            except (ConnectionError, TimeoutError):
                break
            await asyncio.sleep(0)
        return await asyncio.wait_for(answer, 10), sent
    finally:
        writer.close()


def _head(port: int, name: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST /hooks/{name} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_a_body_too_large_is_refused_while_it_streams(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        port = d.channels["http"].bound_port
        chunk = b"z" * (64 * 1024)
        endless = iter(lambda: chunk, None)  # "2 GiB": as much as the server will take
        head = _head(port, "token", {**signed("token", b""), "Transfer-Encoding": "chunked"})
        status, sent = await _raw(port, head, endless, limit=2 * 1024**3)
        assert status.startswith(b"HTTP/1.1 413"), status
        assert sent < 64 * 1024**2  # answered long before the end: never buffered whole
        declared = {**signed("token", b""), "Content-Length": str(2 * 1024**3)}
        status, _ = await _raw(port, _head(port, "token", declared))
        assert status.startswith(b"HTTP/1.1 413"), status
        assert verdicts(d, "token") == ["too large", "too large"]
        body = body_of("token")  # the twin, on the same route, after both
        assert (await post(url(d, "token"), body, signed("token", body, "after")))[0] == 202


async def test_a_1_mb_header_and_a_deep_body_are_answered(tmp_path, llm, tg, monkeypatch):
    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        port = d.channels["http"].bound_port
        huge = {**signed("hmac", b"{}", "huge"), "X-Huge": "h" * 1024 * 1024}
        status, _ = await _raw(port, _head(port, "hmac", {**huge, "Content-Length": "2"}) + b"{}")
        assert status.split()[1] in (b"400", b"431"), status
        deep = b"[" * 200_000  # signed, not JSON a parser can take: shown as text
        t = str(int(time.time()))
        assert (await post(url(d, "hmac"), deep, signed("hmac", deep, "deep")))[0] == 202
        stripe = signed("stripe", deep, at=float(t))
        assert (await post(url(d, "stripe"), deep, stripe))[0] == 202
        await eventually(lambda: turns(d) == 2)
        shown = json.dumps(llm.requests[-1]["messages"])
        assert "[[[[" in shown
        assert verdicts(d, "hmac") == ["accepted"]  # the 1 MB header never reached the route


def running_hooks(tmp_path, llm, tg, monkeypatch):
    from tests.e2e.harness import running

    return running(config(tmp_path, llm, tg, monkeypatch))


def signature_of(header: str, value: str) -> str:
    """The signature in a signature header (without its ``sha256=``/``v1=``/``v1,``)."""
    name = header.lower()
    if name in ("x-hub-signature-256", "x-signature"):
        return value.removeprefix("sha256=")
    if name == "stripe-signature":
        return value.split("v1=", 1)[1]
    if name == "webhook-signature":
        return value.split("v1,", 1)[1]
    return ""


async def test_no_secret_or_signature_is_stored_or_logged(tmp_path, llm, tg, monkeypatch, caplog):
    import logging

    from tests.e2e.test_hooks_e2e import SCHEMES, WHSEC

    caplog.set_level(logging.DEBUG)
    llm.default = lambda request: text("noted")
    signatures: list[str] = []
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        for scheme in SCHEMES:
            body = body_of(scheme)
            hdrs = {
                **signed(scheme, body, f"s-{scheme}"),
                "Cookie": "session=cookie-value-1f2e",
                "Proxy-Authorization": "Basic cHJveHk6cGFzcw==",
                "X-Api-Key": WHSEC if scheme == "standard" else SECRET,  # sent twice
            }
            if scheme != "token":  # the owner's API token rides along: ignored, not kept
                hdrs["Authorization"] = f"Bearer {API_TOKEN}"
            signatures += [signature_of(k, v) for k, v in hdrs.items() if signature_of(k, v)]
            assert (await post(url(d, scheme), body, hdrs))[0] == 202
            forged = {**hdrs, "X-Delivery-Id": "forged"}
            forged = {k: (v[:-4] + "0000" if "sig" in k.lower() else v) for k, v in forged.items()}
            await post(url(d, scheme), body + b" ", forged)  # refused: nothing kept either
        await eventually(lambda: len(tg.sent) == len(SCHEMES))
        stored = "\n".join(
            "\t".join(str(c) for c in row)
            for table in ("trigger_events", "messages", "kv")
            for row in d.store.db.execute(f"SELECT * FROM {table}")
        )
        log = caplog.text
    secrets = [SECRET, WHSEC, API_TOKEN, "cookie-value-1f2e", "cHJveHk6cGFzcw=="]
    assert len(signatures) == 4  # github, stripe, standard, hmac
    for value in secrets + signatures:
        assert value not in stored, value
        assert value not in log, value
    assert "X-GitHub-Delivery" in stored  # twin: the harmless headers are kept


async def test_the_raw_bytes_are_signed_not_the_json_they_parse_to(tmp_path, llm, tg, monkeypatch):
    from tests.e2e.test_hooks_e2e import SCHEMES

    llm.default = lambda request: text("NO_REPLY")
    async with running_hooks(tmp_path, llm, tg, monkeypatch) as d:
        for scheme in SCHEMES:
            # spacing, key order and escapes a re-serialiser would change
            raw = b'{ "type":"ping" ,\n\t"id" : "evt_raw_%s", "x":"\\u00e9\\/"}' % scheme.encode()
            assert (await post(url(d, scheme), raw, signed(scheme, raw, f"raw-{scheme}")))[0] == 202
            again = json.dumps(json.loads(raw)).encode()  # the same JSON, other bytes
            if scheme != "token":  # a bearer token does not sign the body
                hdrs = signed(scheme, raw, f"re-{scheme}")
                assert (await post(url(d, scheme), again, hdrs))[0] == 401, scheme
