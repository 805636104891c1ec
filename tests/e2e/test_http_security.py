"""The HTTP API answers only its owner (SPEC §9.4), end to end: a real aiohttp client →
the daemon's HTTP channel → the fake LLM.  Each refusal has a twin showing that the
legitimate form of the same request works, and every refusal leaves the LLM untouched."""

from __future__ import annotations

import os
import stat

import aiohttp
import pytest

from bot.config import ConfigError
from bot.app.daemon import Daemon
from bot.app.http_token import describe_http_token, ensure_http_token
from tests.e2e import make_config, running
from tests.fakes.llm import text

ASK = {"messages": [{"role": "user", "content": "hi"}]}
ALLOWED = "http://localhost:3000"


def http_cfg(tmp_path, llm, **section):
    return make_config(
        tmp_path, llm, channels={"http": {"enabled": True, "listen": "127.0.0.1:0", **section}}
    )


def urls(d) -> tuple[str, int]:
    port = d.channels["http"].bound_port
    return f"http://127.0.0.1:{port}", port


def bearer(cfg) -> dict:
    return {"Authorization": f"Bearer {cfg.http_token_path.read_text().strip()}"}


async def error_of(r: aiohttp.ClientResponse, status: int) -> dict:
    """The OpenAI-shaped error body of a refusal with ``status``."""
    assert r.status == status, await r.text()
    assert r.content_type == "application/json"
    err = (await r.json())["error"]
    assert set(err) == {"message", "type", "code"} and err["message"]
    return err


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


async def answered(
    s: aiohttp.ClientSession, url: str, llm, reply: str, **kw
) -> aiohttp.ClientResponse:
    llm.script(text(reply))
    async with s.post(url, **kw) as r:
        assert r.status == 200, await r.text()
        assert (await r.json())["choices"][0]["message"]["content"] == reply
        return r


async def test_token_generated_private_and_required(tmp_path, llm, umask_022):
    cfg = http_cfg(tmp_path, llm)
    async with running(cfg) as d:
        base, _ = urls(d)
        path = cfg.http_token_path
        assert mode(path) == 0o600 and mode(path.parent) == 0o700
        token = path.read_text().strip()
        assert len(token) >= 32
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/v1/chat/completions", json=ASK) as r:
                err = await error_of(r, 401)
                assert "Authorization: Bearer" in err["message"] and str(path) in err["message"]
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
            async with s.post(
                f"{base}/v1/chat/completions", json=ASK, headers={"Authorization": "Bearer nope"}
            ) as r:
                await error_of(r, 401)
            async with s.post(
                f"{base}/v1/chat/completions", json=ASK, headers={"Authorization": token}
            ) as r:
                await error_of(r, 401)  # the scheme is part of it
            async with s.get(f"{base}/v1/models") as r:
                await error_of(r, 401)
            assert llm.requests == []
            # the twin: the right token gets the model's answer
            await answered(
                s,
                f"{base}/v1/chat/completions",
                llm,
                "hello owner",
                json=ASK,
                headers={"Authorization": f"Bearer {token}"},
            )
            async with s.get(
                f"{base}/v1/models", headers={"Authorization": f"Bearer {token}"}
            ) as r:
                assert r.status == 200 and (await r.json())["data"][0]["id"].startswith("chela/")
            # liveness needs no token and says nothing more
            async with s.get(f"{base}/healthz") as r:
                assert r.status == 200 and await r.json() == {"ok": True}
    assert len(llm.requests) == 1


async def test_text_plain_post_is_refused(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm)
    async with running(cfg) as d:
        base, _ = urls(d)
        url = f"{base}/v1/chat/completions"
        raw = b'{"messages": [{"role": "user", "content": "run a tool"}]}'
        async with aiohttp.ClientSession() as s:
            for ctype in (
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
            ):
                async with s.post(
                    url, data=raw, headers={**bearer(cfg), "Content-Type": ctype}
                ) as r:
                    err = await error_of(r, 415)
                    assert "send Content-Type: application/json" in err["message"]
            async with s.post(
                url, data=raw, headers=bearer(cfg), skip_auto_headers=["Content-Type"]
            ) as r:
                await error_of(r, 415)
            assert llm.requests == []
            await answered(
                s,
                url,
                llm,
                "json ok",
                data=raw,
                headers={**bearer(cfg), "Content-Type": "application/json"},
            )
            await answered(
                s,
                url,
                llm,
                "charset ok",
                data=raw,
                headers={**bearer(cfg), "Content-Type": "Application/JSON; charset=utf-8"},
            )


async def test_foreign_host_header_is_refused(tmp_path, llm):
    """DNS rebinding: a page on evil.example re-pointed at 127.0.0.1 sends its own Host."""
    cfg = http_cfg(tmp_path, llm)
    async with running(cfg) as d:
        base, port = urls(d)
        url = f"{base}/v1/chat/completions"
        async with aiohttp.ClientSession() as s:
            for host in (
                f"evil.example:{port}",
                "evil.example",
                f"127.0.0.1.evil.example:{port}",
                "10.0.0.1",
            ):
                async with s.post(url, json=ASK, headers={**bearer(cfg), "Host": host}) as r:
                    err = await error_of(r, 403)
                    assert (
                        f"use http://127.0.0.1:{port}" in err["message"] and host in err["message"]
                    )
            async with s.get(f"{base}/healthz", headers={"Host": f"evil.example:{port}"}) as r:
                await error_of(r, 403)
            assert llm.requests == []
            for host in (
                f"127.0.0.1:{port}",
                f"localhost:{port}",
                "localhost",
                f"127.0.0.2:{port}",
                f"[::1]:{port}",
            ):
                await answered(
                    s, url, llm, f"via {host}", json=ASK, headers={**bearer(cfg), "Host": host}
                )


async def test_foreign_origin_is_refused_and_gets_no_cors(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm, allowed_origins=[ALLOWED])
    async with running(cfg) as d:
        base, _ = urls(d)
        url = f"{base}/v1/chat/completions"
        evil = "https://evil.example"
        async with aiohttp.ClientSession() as s:
            async with s.post(url, json=ASK, headers={**bearer(cfg), "Origin": evil}) as r:
                err = await error_of(r, 403)
                assert "channels.http.allowed_origins" in err["message"]
                assert not [h for h in r.headers if h.lower().startswith("access-control-")]
            async with s.options(
                url,
                headers={
                    "Origin": evil,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            ) as r:
                assert r.status == 403
                assert not [h for h in r.headers if h.lower().startswith("access-control-")]
            async with s.post(url, json=ASK, headers={**bearer(cfg), "Origin": "null"}) as r:
                await error_of(r, 403)
            assert llm.requests == []
            # the listed origin: a proper preflight, then the answer carries the CORS header
            async with s.options(
                url,
                headers={
                    "Origin": ALLOWED,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            ) as r:
                assert r.status == 204
                assert r.headers["Access-Control-Allow-Origin"] == ALLOWED
                assert "POST" in r.headers["Access-Control-Allow-Methods"]
                assert "authorization" in r.headers["Access-Control-Allow-Headers"].lower()
            r = await answered(
                s, url, llm, "hi page", json=ASK, headers={**bearer(cfg), "Origin": ALLOWED}
            )
            assert r.headers["Access-Control-Allow-Origin"] == ALLOWED
            # an allowed origin still needs the token
            async with s.post(url, json=ASK, headers={"Origin": ALLOWED}) as r:
                await error_of(r, 401)
                assert (
                    r.headers["Access-Control-Allow-Origin"] == ALLOWED
                )  # so the page can read why
    assert len(llm.requests) == 1


async def test_huge_body_gets_json_413_and_daemon_keeps_serving(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm)
    async with running(cfg) as d:
        base, _ = urls(d)
        url = f"{base}/v1/chat/completions"
        huge = b'{"messages": [{"role": "user", "content": "' + b"x" * (40 * 1024 * 1024) + b'"}]}'
        headers = {**bearer(cfg), "Content-Type": "application/json"}

        async def chunked():
            for i in range(0, len(huge), 1 << 20):
                yield huge[i : i + (1 << 20)]

        async with aiohttp.ClientSession() as s:
            async with s.post(url, data=huge, headers=headers) as r:
                assert "MB" in (await error_of(r, 413))["message"]
            async with s.post(url, data=chunked(), headers=headers) as r:  # no Content-Length
                await error_of(r, 413)
            assert llm.requests == []
        async with aiohttp.ClientSession() as s:
            await answered(s, url, llm, "still here", json=ASK, headers=bearer(cfg))


async def test_bad_requests_get_openai_shaped_errors(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm)
    async with running(cfg) as d:
        base, _ = urls(d)
        url = f"{base}/v1/chat/completions"
        async with aiohttp.ClientSession(headers=bearer(cfg)) as s:
            async with s.post(
                url, data=b"{not json", headers={"Content-Type": "application/json"}
            ) as r:
                await error_of(r, 400)
            async with s.post(url, json=[1, 2]) as r:
                await error_of(r, 400)
            async with s.post(url, json={"messages": []}) as r:
                await error_of(r, 400)
            async with s.get(url) as r:
                assert "POST" in (await error_of(r, 405))["message"]
            async with s.get(f"{base}/v1/nothing") as r:
                assert "/v1/chat/completions" in (await error_of(r, 404))["message"]
        async with aiohttp.ClientSession() as s:  # without the token nothing is disclosed
            async with s.get(f"{base}/v1/nothing") as r:
                await error_of(r, 401)
    assert llm.requests == []


async def test_unset_token_env_stops_start_and_set_one_works(tmp_path, llm, monkeypatch):
    monkeypatch.delenv("SOME_UNSET_VAR", raising=False)
    cfg = http_cfg(tmp_path, llm, token_env="SOME_UNSET_VAR")
    with pytest.raises(ConfigError, match=r"channels\.http\.token_env.*SOME_UNSET_VAR"):
        Daemon(cfg)  # the daemon is built before it starts: no channel, nothing opened
    monkeypatch.setenv("SOME_UNSET_VAR", "an-owner-chosen-token-123")
    async with running(cfg) as d:
        base, _ = urls(d)
        async with aiohttp.ClientSession() as s:
            async with s.post(
                f"{base}/v1/chat/completions", json=ASK, headers=bearer_of("wrong")
            ) as r:
                await error_of(r, 401)
            await answered(
                s,
                f"{base}/v1/chat/completions",
                llm,
                "env token",
                json=ASK,
                headers=bearer_of("an-owner-chosen-token-123"),
            )
    assert not cfg.http_token_path.exists()
    assert "SOME_UNSET_VAR (set)" in describe_http_token(cfg)
    assert "an-owner-chosen-token-123" not in describe_http_token(cfg)


def bearer_of(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


async def test_token_file_reused_across_starts(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm)
    tokens = []
    for reply in ("first", "second"):
        async with running(cfg) as d:
            base, _ = urls(d)
            tokens.append(cfg.http_token_path.read_text().strip())
            async with aiohttp.ClientSession() as s:
                await answered(
                    s,
                    f"{base}/v1/chat/completions",
                    llm,
                    reply,
                    json=ASK,
                    headers=bearer_of(tokens[0]),
                )
    assert tokens[0] == tokens[1]
    line = describe_http_token(cfg)
    assert str(cfg.http_token_path) in line and tokens[0] not in line


# ------------------------------------------------------------------ the token file alone
def test_broken_or_loose_token_file_is_repaired(tmp_path, umask_022):
    from bot.config import parse_config

    cfg = parse_config({"agent": {"state_dir": str(tmp_path / "state")}})
    path = cfg.http_token_path
    assert "generated on first start" in describe_http_token(cfg)
    first = ensure_http_token(cfg)
    assert path.read_text() == first + "\n" and ensure_http_token(cfg) == first
    for broken in (b"", b"   \n", b"\xff\xfe garbage", b"short"):
        path.write_bytes(broken)
        fresh = ensure_http_token(cfg)
        assert fresh != first and len(fresh) >= 32 and path.read_text().strip() == fresh
        assert mode(path) == 0o600
    # an owner-written token is kept, and its loose mode (and its directory's) tightened
    path.write_text("my-own-long-token-value\n")
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    assert ensure_http_token(cfg) == "my-own-long-token-value"
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["http-token"]  # no temporary files left


def test_token_file_private_under_a_strict_umask(tmp_path):
    from bot.config import parse_config

    cfg = parse_config({"agent": {"state_dir": str(tmp_path / "deep" / "state")}})
    old = os.umask(0o277)  # would leave the owner unable to write
    try:
        ensure_http_token(cfg)
    finally:
        os.umask(old)
    assert mode(cfg.http_token_path) == 0o600 and mode(cfg.http_token_path.parent) == 0o700


@pytest.mark.parametrize(
    "body, says",
    [
        ('{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}', "list of"),
        ('{"messages": [{"role": "user", "content": [{"type": "text"}]}]}', "list of"),
        ('{"messages": [{"role": "user", "content": null}]}', "list of"),
        ('{"messages": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        (
            '{"messages": [{"role": "user", "content": "hi"}], "user": {"id": 1}}',
            "user must be a string",
        ),
    ],
)
async def test_bad_input_gets_a_400_and_the_daemon_keeps_serving(tmp_path, llm, body, says):
    cfg = http_cfg(tmp_path, llm)
    llm.script(text("still here"))
    async with running(cfg) as d:
        base, _ = urls(d)
        async with aiohttp.ClientSession(
            headers={**bearer(cfg), "Content-Type": "application/json"}
        ) as s:
            async with s.post(f"{base}/v1/chat/completions", data=body) as r:
                assert says in (await error_of(r, 400))["message"]
            assert llm.requests == []
            ok = {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    }
                ]
            }
            async with s.post(
                f"{base}/v1/chat/completions", json=ok
            ) as r:  # the twin: parts as text
                assert (
                    r.status == 200
                    and (await r.json())["choices"][0]["message"]["content"] == "still here"
                )
    assert llm.requests[0]["messages"][-1]["content"].endswith("a\nb")


async def test_a_lone_surrogate_is_stored_and_answered(tmp_path, llm):
    cfg = http_cfg(tmp_path, llm)
    llm.script(text("answered"))
    async with running(cfg) as d:
        base, _ = urls(d)
        async with aiohttp.ClientSession(
            headers={**bearer(cfg), "Content-Type": "application/json"}
        ) as s:
            body = '{"messages": [{"role": "user", "content": "hi \\ud800 there"}]}'
            async with s.post(f"{base}/v1/chat/completions", data=body) as r:
                assert (await r.json())["choices"][0]["message"]["content"] == "answered"
        assert [row[0] for row in d.store.db.execute("SELECT status FROM inbound")] == ["done"]
    assert "hi \ufffd there" in llm.requests[0]["messages"][-1]["content"]
