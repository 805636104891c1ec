"""Channel states on the Control UI's event stream (SPEC §16.5 ``channel.state``): a channel
that cannot start yet is published as retrying, then as connected once it is up; the
Channels page's GET /ui/api/channels agrees.  The twin: a channel that starts at once is
published as connected only."""

from __future__ import annotations

import asyncio

from tests.e2e import eventually
from tests.e2e.test_ui_api_views import cfg_with_file
from tests.e2e.ui_api_helpers import events
from tests.e2e.ui_client import ui_config, ui_daemon


async def _states(client, channel: str, until: str) -> list[str]:
    """The channel's published states, replayed from the start, until ``until`` shows."""
    seen: list[str] = []
    stream = events(client, {"after": 0, "logs": False})  # replay from the first notice
    try:
        async with asyncio.timeout(20):
            async for name, data, _seq in stream:
                if name == "channel.state" and data["id"] == channel:
                    seen.append(data["state"])
                    if data["state"] == until:
                        break
    except TimeoutError:
        pass  # the assertion shows what was seen
    await stream.aclose()
    return seen


async def test_a_channel_that_retries_is_published_retrying_then_connected(tmp_path, llm, tg):
    tg.fail_next("getMe", 502, times=1)  # Telegram is down for the first attempt
    _, cfg = cfg_with_file(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        assert await _states(c, "telegram", until="connected") == ["retrying", "connected"]
        async with c.http.get(c.base + "/ui/api/channels", headers=c.headers()) as r:
            rows = {row["id"]: row for row in (await r.json())["channels"]}
        assert rows["telegram"]["state"] == "connected"


async def test_a_channel_up_at_once_is_published_connected_only(tmp_path, llm, tg):
    _, cfg = cfg_with_file(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await eventually(lambda: tg.calls_of("getUpdates"))
        assert await _states(c, "telegram", until="connected") == ["connected"]


async def test_a_channel_in_trouble_of_its_own_is_shown_retrying_then_failed(tmp_path, llm):
    """A state only the platform shows (WhatsApp's 409: another client polls the key) is
    published and listed as retrying with its reason, never as starting; three in ten
    minutes stop polling: failed, with why.  The twin above: a healthy channel is connected."""
    from tests.e2e.test_e2e_whatsapp import KEY, wa_section
    from tests.fakes.whatsapp import FakeWhatsApp

    async with FakeWhatsApp(key=KEY) as wa:
        cfg = ui_config(tmp_path, llm, channels=wa_section(wa))
        async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
            await eventually(lambda: wa.polls, timeout=10)
            wa.fail_next("updates", 409, 1752041, times=3)
            seen = await _states(c, "whatsapp", until="failed")
            async with c.http.get(c.base + "/ui/api/channels", headers=c.headers()) as r:
                rows = {row["id"]: row for row in (await r.json())["channels"]}
    assert "retrying" in seen and seen[-1] == "failed" and "starting" not in seen[1:]
    assert rows["whatsapp"]["state"] == "failed"
    assert "until restart" in rows["whatsapp"]["error"]
