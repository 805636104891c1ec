"""A tool's images (``ToolResult.images``, a browser screenshot) reach a model that can see
as an image part after the tool results, resized into ``media.image_max_px``, and fenced as
untrusted; a model that cannot see gets the tool's text with the file named and no image.
Fake OpenAI-compatible server <- real client <- loop <- a tool returning a ToolResult."""

from __future__ import annotations

import pytest

from bot.agent.loop import run_agent_loop
from bot.agent.tools import Tool, ToolContext, ToolRegistry, ToolResult, schema
from bot.media import MediaPolicy, request_messages
from bot.model import LLMClient
from tests.fakes.llm import FakeLLM, image_urls, text, tool_calls
from tests.fakes.media_samples import decode_data_url, image_bytes

SYSTEM = {"role": "system", "content": "You are a test."}
USER = {"role": "user", "content": "show me the page"}


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


@pytest.fixture(autouse=True)
def _forget_blind_models():
    import bot.media

    bot.media._BLIND.clear()
    yield
    bot.media._BLIND.clear()


def shooter(png) -> Tool:
    async def run(ctx: ToolContext, args: dict) -> ToolResult:
        png.write_bytes(image_bytes(2000, 1000, fmt="PNG"))
        return ToolResult(f"Screenshot saved: {png}", (png,))

    return Tool("shoot", "take a screenshot", schema({}), run)


async def _turn(
    fake,
    tmp_path,
    policy: MediaPolicy,
    native_tools: bool = True,
    png=None,
    trust: str = "owner",
):
    png = png or tmp_path / "shot.png"
    call = '<tool_call>{"name": "shoot", "arguments": {}}</tool_call>'
    fake.script(tool_calls([("shoot", {})]) if native_tools else text(call), text("I see it."))
    llm = LLMClient("openai/fake-model", api_base=fake.base_url, backoff_base=0.001)
    ctx = ToolContext(file_root=tmp_path, session_key="s", agent_id="main", trust=trust)
    reg = ToolRegistry([shooter(png)])
    res = await run_agent_loop(
        llm, [SYSTEM, USER], reg, ctx, media=policy, native_tools=native_tools
    )
    return res, png


@pytest.mark.parametrize("native", [True, False])
async def test_a_seeing_model_is_shown_the_tools_image_resized_and_fenced(fake, tmp_path, native):
    policy = MediaPolicy(
        "openai/fake-model", vision="on", image_max_px=500, tool_image_dir=tmp_path
    )
    res, png = await _turn(fake, tmp_path, policy, native_tools=native)
    assert res.text == "I see it." and image_urls(fake.requests[0]) == []
    [url] = image_urls(fake.requests[1])
    assert decode_data_url(url).size == (500, 250)  # within media.image_max_px
    last = fake.requests[1]["messages"][-1]
    assert last["role"] == "user" and "media" not in last
    note = last["content"][0]["text"]
    assert note.startswith('<tool_result name="shoot">') and "untrusted" in note
    assert str(png) in str(fake.requests[1]["messages"])  # the text still names the file
    roles = [m["role"] for m in fake.requests[1]["messages"]]  # after the tool results
    assert roles[-3:] == (
        ["assistant", "tool", "user"] if native else ["assistant", "user", "user"]
    )
    # stored as a reference to the resized copy, never as bytes
    stored = res.new_messages[-2]
    assert stored["media"][0]["path"].endswith(".model.jpg") and "base64" not in str(stored)


async def test_a_model_that_cannot_see_gets_the_text_and_no_image(fake, tmp_path):
    policy = MediaPolicy("openai/fake-model", vision="off")
    res, png = await _turn(fake, tmp_path, policy)
    assert res.text == "I see it." and image_urls(fake.requests[1]) == []
    tool = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert tool[0]["content"] == f"Screenshot saved: {png}"
    assert not any("media" in m for m in res.new_messages)


@pytest.mark.parametrize("where", ["elsewhere", "link", "guest"])
async def test_an_image_is_shown_only_from_the_tools_image_dir_and_to_owners(fake, tmp_path, where):
    """A tool's image outside ``tool_image_dir`` (or reached through a link out of it) is not
    shown, nor any image in a guest's turn: the model gets the text alone.  The twin above
    (inside, an owner's turn) is shown."""
    shots = tmp_path / "shots"
    shots.mkdir()
    policy = MediaPolicy("openai/fake-model", vision="on", tool_image_dir=shots)
    png, trust = shots / "shot.png", "owner"
    if where == "elsewhere":
        png = tmp_path / "shot.png"
    elif where == "link":
        (tmp_path / "out").mkdir()
        (shots / "out").symlink_to(tmp_path / "out")
        png = shots / "out" / "shot.png"
    else:
        trust = "guest"
    res, _png = await _turn(fake, tmp_path, policy, png=png, trust=trust)
    assert res.text == "I see it." and image_urls(fake.requests[1]) == []
    assert not any("media" in m for m in res.new_messages)


async def test_a_provider_refusing_the_image_gets_the_step_again_without_it(fake, tmp_path):
    fake.reject_images = True
    policy = MediaPolicy("openai/fake-model-2", vision="on", tool_image_dir=tmp_path)
    res, _png = await _turn(fake, tmp_path, policy)
    assert res.text == "I see it." and fake.image_rejections == 1
    assert image_urls(fake.requests[-1]) == []
    assert "cannot see images" in str(fake.requests[-1]["messages"][-1]["content"])


def test_the_image_message_is_no_turn_of_the_users_for_the_history_window(tmp_path):
    """images_in_history counts the user's turns: a screenshot message inside a turn does
    not push the user's own image of that turn out of the window."""
    from bot.media.policy import tool_images_message

    photo, shot = tmp_path / "photo.jpg", tmp_path / "shot.png"
    photo.write_bytes(image_bytes(64, 64))
    shot.write_bytes(image_bytes(64, 64, fmt="PNG"))
    user = {
        "role": "user",
        "content": "look",
        "media": [{"kind": "image", "path": str(photo), "mime": "image/jpeg", "name": "p"}],
    }
    shots = [tool_images_message([("browser", shot)], 500, tmp_path) for _ in range(3)]
    policy = MediaPolicy("m", vision="on", images_in_history=1)
    sent = request_messages([SYSTEM, user, *shots], policy)
    assert all(m is not None for m in shots)
    assert sum(len(image_urls({"messages": [m]})) for m in sent) == 4
