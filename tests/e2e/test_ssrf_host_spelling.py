"""SSRF through the spelling of a host (issue 23 item 1, SPEC §9.5 "URLs"), end to end through
the daemon: a URL whose host is ``127.0.0.<U+1FBF1 SEGMENTED DIGIT ONE>``.  Python's IDNA 2003
codec turns that host into the DNS name ``127.0.0.xn--ub0i``, which a wildcard resolver answers
with a public address; the HTTP client (yarl, UTS 46) maps the character to ``1`` and connects
to 127.0.0.1.  The guard must judge the host the client connects to.

The fake resolver (tests/fakes/dns.py) plays the wildcard resolver: every name it does not know
gets a public address.  Each refusal has a twin: an IDN or oddly cased host the owner allowed
still fetches, through one lookup."""

from __future__ import annotations

import aiohttp
import pytest

from tests.e2e import make_config, running, telegram_section
from tests.fakes.dns import WildcardDNS
from tests.fakes.llm import text, tool_calls
from tests.fakes.media_samples import decode_data_url, image_bytes
from tests.fakes.web import FakeWeb

SEGMENTED_ONE = "\U0001fbf1"
PUBLIC = "93.184.216.34"  # what the wildcard resolver answers for any unknown name
HTTP_TOKEN = "ssrf-test-token-0123456789"


@pytest.fixture
async def site():
    async with FakeWeb() as f:
        f.files["chart.png"] = (image_bytes(40, 40, fmt="PNG"), "image/png")
        yield f


def tool_result(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m.get("role") == "tool")


def owner_cfg(tmp_path, llm, tg, allow: list[str]):
    tools = {"enabled": ["web_fetch"], "web": {"allow_private_hosts": allow}}
    return make_config(tmp_path, llm, channels=telegram_section(tg), tools=tools)


async def fetch_through_the_daemon(tmp_path, llm, tg, url: str, allow: list[str]) -> str:
    llm.script(tool_calls([("web_fetch", {"url": url})]), text("done"))
    async with running(owner_cfg(tmp_path, llm, tg, allow)):
        tg.inject_message(42, "read this page", from_id=42)
        await tg.wait_for_sent(1, timeout=15)
    return tool_result(llm.requests[1])


# ------------------------------------------------------------------------- web_fetch
async def test_web_fetch_of_a_unicode_digit_loopback_host_is_refused(
    tmp_path, llm, tg, site, monkeypatch
):
    WildcardDNS(PUBLIC).install(monkeypatch)
    url = f"http://127.0.0.{SEGMENTED_ONE}:{site.port}/secret"
    result = await fetch_through_the_daemon(tmp_path, llm, tg, url, allow=["localhost"])
    assert result.startswith("Error: blocked address") and "127.0.0.1" in result
    assert site.hits == []  # the loopback server was never contacted
    assert all("internal secret page" not in str(r["messages"]) for r in llm.requests)


async def test_twin_an_allowed_idn_host_is_fetched_with_one_lookup(
    tmp_path, llm, tg, site, monkeypatch
):
    dns = WildcardDNS(PUBLIC, {"xn--bcher-kva.example": "127.0.0.1"}).install(monkeypatch)
    url = f"http://bücher.example:{site.port}/article"
    result = await fetch_through_the_daemon(tmp_path, llm, tg, url, allow=["BÜCHER.example"])
    assert "# Sea otters" in result and site.hits == ["/article"]
    assert dns.queries == ["xn--bcher-kva.example"]  # resolved once, then pinned


async def test_twin_an_allowed_host_in_capitals_with_a_trailing_dot_is_fetched(
    tmp_path, llm, tg, site, monkeypatch
):
    dns = WildcardDNS(PUBLIC, {"otters.example": "127.0.0.1"}).install(monkeypatch)
    url = f"http://Otters.EXAMPLE.:{site.port}/article"
    result = await fetch_through_the_daemon(tmp_path, llm, tg, url, allow=["otters.example"])
    assert "# Sea otters" in result and site.hits == ["/article"]
    assert dns.queries == ["otters.example"]


# ----------------------------------------------------------------- HTTP API image_url
def http_cfg(tmp_path, llm, monkeypatch, allow: list[str]):
    monkeypatch.setenv("TEST_HTTP_TOKEN", HTTP_TOKEN)
    section = {"enabled": True, "listen": "127.0.0.1:0", "token_env": "TEST_HTTP_TOKEN"}
    return make_config(
        tmp_path,
        llm,
        channels={"http": section},
        media={"vision": "on", "image_max_px": 200},
        tools={"web": {"allow_private_hosts": allow}},
    )


async def ask_with_image(cfg, image_url: str) -> int:
    async with running(cfg) as d:
        port = d.channels["http"].bound_port
        content = [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": image_url}},
        ]
        async with (
            aiohttp.ClientSession() as s,
            s.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "chela", "messages": [{"role": "user", "content": content}]},
                headers={"Authorization": f"Bearer {HTTP_TOKEN}"},
            ) as r,
        ):
            await r.read()
            return r.status


def user_text(request: dict) -> str:
    turn = [m for m in request["messages"] if m["role"] == "user"][-1]
    c = turn["content"]
    return c if isinstance(c, str) else "\n".join(p.get("text", "") for p in c)


async def test_image_url_with_a_unicode_digit_loopback_host_is_refused(
    tmp_path, llm, site, monkeypatch
):
    WildcardDNS(PUBLIC).install(monkeypatch)
    llm.script(text("no picture"))
    url = f"http://127.0.0.{SEGMENTED_ONE}:{site.port}/files/chart.png"
    status = await ask_with_image(http_cfg(tmp_path, llm, monkeypatch, allow=[]), url)
    assert status == 200  # the turn runs, without the image, with a note
    assert site.hits == []
    assert llm.image_parts == [[]]
    note = user_text(llm.requests[0])
    assert "image not loaded" in note and "blocked address" in note


async def test_twin_an_image_url_on_an_allowed_idn_host_reaches_the_model(
    tmp_path, llm, site, monkeypatch
):
    dns = WildcardDNS(PUBLIC, {"xn--bcher-kva.example": "127.0.0.1"}).install(monkeypatch)
    llm.script(text("a square"))
    url = f"http://bücher.example:{site.port}/files/chart.png"
    cfg = http_cfg(tmp_path, llm, monkeypatch, allow=["bücher.example"])
    assert await ask_with_image(cfg, url) == 200
    assert site.hits == ["/files/chart.png"] and dns.queries == ["xn--bcher-kva.example"]
    (image,) = llm.image_parts[0]
    assert decode_data_url(image).size == (40, 40)


def test_the_fake_resolver_answers_what_the_stdlib_codec_spells():
    """The premise: Python's codec and the HTTP client read the same host differently."""
    import yarl

    host = f"127.0.0.{SEGMENTED_ONE}"
    assert host.encode("idna") == b"127.0.0.xn--ub0i"
    assert yarl.URL(f"http://{host}:8080/").raw_host == "127.0.0.1"
