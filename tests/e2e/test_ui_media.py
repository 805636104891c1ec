"""Images in the Control UI's transcript (SPEC §16.6: "images come only from the session's own
media through an authenticated /ui/api/ route"), through the real daemon: a photo the owner
sends on the fake Telegram is listed in the transcript as an image id (never a path) and
served by ``GET /ui/api/sessions/{key}/media/{id}``.  Each refusal next to its legitimate
twin: another session's id, path-like ids (nothing outside the media dir is opened), a
symbolic link out of the media dir, no CSRF token, an id no message of the session holds,
and for the assistant's image markers a file outside the roots, SVG, and bytes that are not
the image type they claim."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import yarl

from bot.rules.admission import guest_dir
from tests.e2e import telegram_section
from tests.e2e.ui_api_helpers import turn
from tests.e2e.ui_client import UiClient, ui_config, ui_daemon
from tests.fakes.llm import text
from tests.fakes.media_samples import image_bytes

MAIN = "agent:main:main"
OWNER, STRANGER = 42, 77
GUEST = f"agent:main:telegram:direct:{STRANGER}"

# ------------------------------------------------------------- what the daemon opens
_OPENED: list[str] | None = None  # paths opened in this process while a test records


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event in ("open", "os.listdir", "os.scandir") and args:
        _OPENED.append(os.fsdecode(args[0]) if isinstance(args[0], str | bytes) else "")


sys.addaudithook(_audit)


@contextmanager
def opened():
    global _OPENED
    _OPENED = seen = []
    try:
        yield seen
    finally:
        _OPENED = None


# --------------------------------------------------------------------------- helpers
def cfg_for(tmp_path, llm, tg, **tg_kw):
    return ui_config(tmp_path, llm, channels=telegram_section(tg, **tg_kw), media={"vision": "on"})


def media_url(key: str, image_id: str) -> str:
    return f"/ui/api/sessions/{quote(key, safe='')}/media/{image_id}"


async def transcript(c: UiClient, key: str) -> list[dict]:
    r = await c.get(f"/ui/api/sessions/{quote(key, safe='')}/messages")
    assert r.status == 200
    return (await r.json())["messages"]


async def images(c: UiClient, key: str, role: str = "user") -> list[dict]:
    return [i for m in await transcript(c, key) if m["role"] == role for i in m["images"]]


async def raw_get(c: UiClient, path: str, **headers: str | None):
    """A GET of ``path`` exactly as written (percent escapes and dots kept)."""
    url = yarl.URL(c.base + path, encoded=True)
    async with c.http.get(url, headers=c.headers(headers), allow_redirects=False) as r:
        return r.status, r.headers, await r.read()


async def web_photo(c: UiClient, llm, key: str, cid: str) -> None:
    """An image uploaded from the Chat page and sent in a web turn to session ``key``."""
    import aiohttp

    form = aiohttp.FormData()
    form.add_field("file", image_bytes(64, 48), filename="snap.jpg", content_type="image/jpeg")
    async with c.http.post(c.base + "/ui/api/uploads", data=form, headers=c.headers()) as r:
        assert r.status == 201
        up = await r.json()
    llm.script(text("Got it."))
    status, evs = await turn(c, key, "see", cid, attachments=[up["id"]])
    assert status == 200 and evs[-1][0] == "final"


async def owner_photo(tg, llm) -> None:
    llm.script(text("A red square."))
    tg.inject_message(OWNER, "what is this?", from_id=OWNER, photo=image_bytes(300, 200))
    await tg.wait_for_sent(1, timeout=15)


# ------------------------------------------------------------------------ the route
async def test_the_owners_photo_is_listed_by_id_and_served(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await owner_photo(tg, llm)
        r = await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")
        raw = await r.text()
        assert str(cfg.media_dir) not in raw and ".model.jpg" not in raw  # ids, never paths
        [img] = await images(c, MAIN)
        assert img["name"] and "/" not in img["name"]
        status, headers, body = await raw_get(c, media_url(MAIN, img["id"]))
    assert status == 200
    assert headers["Content-Type"] == "image/jpeg"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Content-Disposition"] == "inline"
    assert headers["Cache-Control"] == "no-store"
    [stored] = [p for p in cfg.media_dir.rglob("*.model.jpg")]
    assert body == stored.read_bytes() and body.startswith(b"\xff\xd8\xff")


async def test_without_the_csrf_token_the_image_is_refused(tmp_path, llm, tg):
    async with ui_daemon(tmp_path, llm, cfg=cfg_for(tmp_path, llm, tg)) as ui:
        async with await ui.login() as c:
            await owner_photo(tg, llm)
            [img] = await images(c, MAIN)
            url = media_url(MAIN, img["id"])
            status, _, body = await raw_get(c, url, **{"X-Chela-CSRF": None})
            assert status == 403 and b'"csrf"' in body and not body.startswith(b"\xff\xd8")
            status, _, body = await raw_get(c, url, Cookie=None)
            assert status == 401 and b"unauthenticated" in body
            status, _, body = await raw_get(c, url)  # twin: cookie and token
            assert status == 200 and body.startswith(b"\xff\xd8\xff")


async def test_another_sessions_image_is_not_served_under_this_session(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    other = "agent:main:second"  # another owner session: the same roots as the main one
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await owner_photo(tg, llm)
        llm.script(text("Nice."))
        tg.inject_message(STRANGER, "mine", from_id=STRANGER, photo=image_bytes(120, 80))
        await tg.wait_for_sent(2, timeout=15)
        await web_photo(c, llm, other, "w1")
        [mine] = await images(c, MAIN)
        [theirs] = await images(c, GUEST)
        [second] = await images(c, other)
        assert len({mine["id"], theirs["id"], second["id"]}) == 3
        wrong = [(GUEST, mine), (MAIN, theirs), (other, mine), (MAIN, second), (other, theirs)]
        for key, img in wrong:
            status, _, body = await raw_get(c, media_url(key, img["id"]))
            assert status == 404 and b"not_found" in body, (key, img)
        # twins: each under its own session; the owner sees the guest's photo too
        for key, img in ((MAIN, mine), (GUEST, theirs), (other, second)):
            status, _, body = await raw_get(c, media_url(key, img["id"]))
            assert status == 200 and body.startswith(b"\xff\xd8\xff"), (key, img)
    gdir = guest_dir(cfg, GUEST)
    assert any(p.name.endswith(".model.jpg") for p in (gdir / "media").iterdir())


async def test_path_like_ids_open_nothing(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    outside = tmp_path / "outside.jpg"
    outside.write_bytes(image_bytes(20, 20))
    rel = os.path.relpath(outside, cfg.media_dir)
    ids = [
        quote(rel, safe=""),  # ..%2F..%2Foutside.jpg
        rel.replace("/", "%2f"),
        quote(str(outside), safe=""),  # absolute
        "..%2f..%2f..%2fetc%2fpasswd",
        "1-0%2f..%2f..%2foutside.jpg",
        "%2e%2e",
        "1-0.jpg",
        "-1-0",
        "1-99999",
    ]
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await owner_photo(tg, llm)
        [img] = await images(c, MAIN)
        with opened() as seen:
            for image_id in ids:
                status, _, body = await raw_get(c, media_url(MAIN, image_id))
                assert status == 404 and not body.startswith(b"\xff\xd8"), image_id
        # the only file opened: the answer's secret scrubber reading the daemon's HTTP token
        assert set(seen) <= {str(cfg.agent.state_dir), "http-token"}, seen
        with opened() as seen:  # twin: the real id opens the file below the media dir
            status, _, _ = await raw_get(c, media_url(MAIN, img["id"]))
        assert status == 200
        assert str(cfg.media_dir) in seen and any(p.endswith(".model.jpg") for p in seen)


async def test_a_link_out_of_the_media_dir_is_not_followed(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    outside = tmp_path / "outside.jpg"
    secret = image_bytes(30, 30, color=(1, 2, 3))
    outside.write_bytes(secret)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await owner_photo(tg, llm)
        [img] = await images(c, MAIN)
        status, _, good = await raw_get(c, media_url(MAIN, img["id"]))
        assert status == 200 and good.startswith(b"\xff\xd8\xff")  # twin: the real file
        [stored] = list(cfg.media_dir.rglob("*.model.jpg"))
        stored.unlink()
        stored.symlink_to(outside)
        status, _, body = await raw_get(c, media_url(MAIN, img["id"]))
        assert status == 404 and secret not in body


async def test_only_images_the_sessions_messages_hold(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await owner_photo(tg, llm)
        (cfg.media_dir / "loose.jpg").write_bytes(image_bytes(10, 10))  # no message holds it
        msgs = await transcript(c, MAIN)
        [user] = [m for m in msgs if m["role"] == "user"]
        [answer] = [m for m in msgs if m["role"] == "assistant"]
        assert answer["images"] == []
        for image_id in (f"{user['id']}-1", f"{answer['id']}-0", f"{user['id'] + 1000}-0"):
            status, _, _ = await raw_get(c, media_url(MAIN, image_id))
            assert status == 404, image_id
        status, _, _ = await raw_get(c, media_url(MAIN, f"{user['id']}-0"))
        assert status == 200


# ------------------------------------------------------------ the assistant's images
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


async def test_assistant_image_markers_are_served_from_the_workspace_only(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg)
    ws = Path(cfg.agent.workspace)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "chart.png").write_bytes(image_bytes(40, 30, fmt="PNG"))
    (ws / "drawing.svg").write_bytes(SVG)
    (ws / "fake.png").write_bytes(b"<html><script>alert(1)</script></html>")
    outside = tmp_path / "outside.png"
    outside.write_bytes(image_bytes(20, 20, fmt="PNG"))
    reply = f"Here. [image: chart.png] [image: drawing.svg] [image: fake.png] [image: {outside}]"
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        llm.script(text(reply))
        tg.inject_message(OWNER, "draw it", from_id=OWNER)
        await tg.wait_for_sent(1, timeout=15)
        shown = await images(c, MAIN, role="assistant")
        assert [i["name"] for i in shown] == ["chart.png", "drawing.svg", "fake.png", "outside.png"]
        status, headers, body = await raw_get(c, media_url(MAIN, shown[0]["id"]))
        assert status == 200 and headers["Content-Type"] == "image/png"
        assert body == (ws / "chart.png").read_bytes()
        for img in shown[1:]:  # SVG never; HTML claiming to be PNG; outside the roots
            status, _, body = await raw_get(c, media_url(MAIN, img["id"]))
            assert status == 404 and b"<svg" not in body and b"<html" not in body, img


async def test_a_guests_reply_images_come_from_its_own_directory_only(tmp_path, llm, tg):
    cfg = cfg_for(tmp_path, llm, tg, dm_policy="open")
    ws = Path(cfg.agent.workspace)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "owner.png").write_bytes(image_bytes(40, 30, fmt="PNG"))
    gdir = guest_dir(cfg, GUEST)
    gdir.mkdir(parents=True, exist_ok=True)
    (gdir / "theirs.png").write_bytes(image_bytes(24, 24, fmt="PNG"))
    reply = f"Both. [image: theirs.png] [image: {ws / 'owner.png'}]"
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        llm.script(text(reply))
        tg.inject_message(STRANGER, "show me", from_id=STRANGER)
        await tg.wait_for_sent(1, timeout=15)
        theirs, owners = await images(c, GUEST, role="assistant")
        status, _, body = await raw_get(c, media_url(GUEST, owners["id"]))
        assert status == 404 and body != (ws / "owner.png").read_bytes()
        status, _, body = await raw_get(c, media_url(GUEST, theirs["id"]))  # twin
        assert status == 200 and body == (gdir / "theirs.png").read_bytes()


async def test_a_reply_that_is_only_an_image_is_listed_with_it(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        (ui.cfg.agent.workspace / "chart.png").write_bytes(image_bytes(40, 30, fmt="PNG"))
        llm.script(text("[image: chart.png]"))
        status, evs = await turn(c, MAIN, "just the chart", "only1")
        assert status == 200
        final = evs[-1][1]["message"]
        assert final["text"] == "" and [i["name"] for i in final["images"]] == ["chart.png"]
        [listed] = [m for m in await transcript(c, MAIN) if m["role"] == "assistant"]
        assert listed["id"] == final["id"] and listed["images"] == final["images"]
        status, _, body = await raw_get(c, media_url(MAIN, final["images"][0]["id"]))
        assert status == 200 and body == (ui.cfg.agent.workspace / "chart.png").read_bytes()
        # twin: a reply without text or image is still not listed (a silent one)
        llm.script(text("NO_REPLY"))
        await turn(c, MAIN, "nothing", "only2")
        assert len([m for m in await transcript(c, MAIN) if m["role"] == "assistant"]) == 1
