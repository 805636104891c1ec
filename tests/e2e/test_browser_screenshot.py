"""A browser screenshot reaches the model as an image, end to end: fake Telegram -> the daemon
-> fake LLM scripted to open a public page and take a screenshot -> the real Chromium through
Chela's proxy.  A model that can see gets the PNG as an image part of its next request
(resized into media.image_max_px, fenced as untrusted); one that cannot gets the tool's text
naming the file, and no image part."""

from __future__ import annotations

import contextlib

import pytest

from tests.e2e import make_config, running, telegram_section
from tests.e2e.browser_site import CHROMIUM, PUBLIC, Site, namespace, public_route
from tests.fakes.llm import image_urls, text, tool_calls
from tests.fakes.media_samples import decode_data_url

pytestmark = pytest.mark.timeout(120)

OWNER = 42
PAGES = {"/": "<title>Public home</title><h1>Welcome</h1><p>a page worth seeing</p>"}


@pytest.fixture(scope="module")
def netns():
    with namespace():
        yield


@pytest.fixture(autouse=True)
def _forget_blind_models():
    import bot.media

    bot.media._BLIND.clear()
    yield
    bot.media._BLIND.clear()


def _send_the_shot(request: dict):
    """The final answer: the screenshot's media marker, as the tool's text offered it."""
    for m in request["messages"]:
        if m["role"] == "tool" and "[IMAGE:" in str(m["content"]):
            marker = "[IMAGE:" + str(m["content"]).split("[IMAGE:", 1)[1].split("]", 1)[0] + "]"
            return text(f"It shows a welcome page. {marker}")
    return text("no screenshot")


async def screenshot_turn(tmp_path, llm, tg, vision: str, final=None, count: int = 1):
    """The owner asks; the model opens the page, takes a screenshot, closes the browser and
    answers.  The model's requests are in ``llm.requests`` (the third follows the shot)."""
    from bot.agent.tools.browser.launch import kill_groups

    cfg = make_config(
        tmp_path,
        llm,
        channels=telegram_section(tg),
        tools={"browser": {"enabled": True, "executable": CHROMIUM}},
        media={"vision": vision, "image_max_px": 800},
    )
    llm.script(
        tool_calls([("browser", {"action": "open", "url": f"http://{PUBLIC}/"})]),
        tool_calls([("browser", {"action": "screenshot"})]),
        tool_calls([("browser", {"action": "close", "tab": "all"})]),
        final or text("It shows a welcome page."),
    )
    try:
        with public_route():
            async with Site(PUBLIC, PAGES) as site, running(cfg):
                tg.inject_message(OWNER, "what does the page look like?", from_id=OWNER)
                sent = await tg.wait_for_sent(count, timeout=90)
    finally:
        with contextlib.suppress(OSError):
            kill_groups(cfg.agent.state_dir / "browser" / "profile-main")
    assert site.hits[0] == "/" and len(llm.requests) == 4
    if final is None:
        assert sent[0].visible_text == "It shows a welcome page."
    return cfg, sent


def tool_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_a_model_that_can_see_gets_the_screenshot_as_an_image(netns, tmp_path, llm, tg):
    cfg, _ = await screenshot_turn(tmp_path, llm, tg, vision="on")
    assert llm.image_parts[0] == [] and llm.image_parts[1] == []
    [url] = llm.image_parts[2]  # the request after the screenshot
    img = decode_data_url(url)
    assert max(img.size) == 800  # Chromium's 1280 x 720 page, resized into image_max_px
    after = llm.requests[2]["messages"]
    assert [m["role"] for m in after[-3:]] == ["assistant", "tool", "user"]
    note = after[-1]["content"][0]["text"]
    assert note.startswith('<tool_result name="browser">') and "untrusted" in note
    shots = cfg.agent.state_dir / "browser" / "shots"
    [png] = [p for p in shots.iterdir() if p.suffix == ".png"]
    assert f"[IMAGE:{png}]" in tool_texts(llm.requests[2])[-1]  # deliverable with a marker


async def test_a_model_that_cannot_see_gets_the_text_and_no_image(netns, tmp_path, llm, tg):
    await screenshot_turn(tmp_path, llm, tg, vision="auto")  # the fake model is not known to see
    assert all(parts == [] for parts in llm.image_parts)
    assert image_urls(llm.requests[2]) == []
    shot = tool_texts(llm.requests[2])[-1]
    assert shot.startswith("Screenshot saved") and "[IMAGE:" in shot
    assert llm.requests[2]["messages"][-1]["role"] == "tool"  # no image message after it


async def test_the_screenshot_is_delivered_with_its_media_marker(netns, tmp_path, llm, tg):
    """The owner gets the PNG the model names with the marker the tool's text offers."""
    _cfg, sent = await screenshot_turn(tmp_path, llm, tg, vision="off", final=_send_the_shot)
    photos = [m for m in sent if m.kind == "photo"]
    assert photos and photos[0].data is not None and photos[0].data.startswith(b"\x89PNG")
    assert "unavailable" not in " ".join(m.visible_text or "" for m in sent)
