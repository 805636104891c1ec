"""The Control UI's read routes (SPEC §16.4) through the real daemon: usage equals
``chela usage --json``, no answer ever holds a secret value (config, logs, events, the
rest), and the other views answer in their shapes."""

from __future__ import annotations

import json
import logging
import os
from urllib.parse import quote

from bot.cli.main import main as cli_main
from bot.config.load import load_config
from tests.e2e import config_file, telegram_section
from tests.e2e.ui_api_helpers import events, turn
from tests.e2e.ui_client import ui_daemon
from tests.fakes.llm import text, usage

MAIN = "agent:main:main"
SECRET = "sk-ui-test-secret-0123456789abcdef"
KEY_ENV = "CHELA_UI_TEST_API_KEY"


def cfg_with_file(tmp_path, llm, tg=None, **agent):
    channels = {"http": {"enabled": True, "listen": "127.0.0.1:0"}}
    if tg is not None:
        channels.update(telegram_section(tg))
    path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=channels,
    )
    if agent:
        extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in agent.items())
        path.write_text(path.read_text().replace("[agent]\n", "[agent]\n" + extra, 1))
    return path, load_config(str(path))


async def test_usage_total_equals_the_cli(tmp_path, llm, capsys):
    llm.script(
        text("one", usage=usage(120, 30, cached=20)),
        text("two", usage=usage(80, 10)),
    )
    path, cfg = cfg_with_file(tmp_path, llm)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await turn(c, MAIN, "first", "u1")
        await turn(c, MAIN, "second", "u2")
        r = await c.get("/ui/api/usage?days=7&by=session")
        body = await r.json()
        capsys.readouterr()
        assert cli_main(["usage", "--days", "7", "--json", "--config", str(path)]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert body["total"] == cli["total"]
        assert body["total"]["calls"] == 2 and body["total"]["prompt_tokens"] == 200
        assert body["by"] == "session" and [r["key"] for r in body["rows"]] == [MAIN]
        assert body["rows"][0]["cached_tokens"] == 20
        r = await c.get("/ui/api/usage")  # default: today, by model
        day = await r.json()
        assert day["days"] == 1 and day["by"] == "model" and day["total"]["calls"] == 2
        assert set(day["budgets"]) == {
            "daily_cost_limit_usd",
            "spent_today_usd",
            "guest_daily_cost_limit_usd",
            "guest_spent_today_usd",
        }
        r = await c.get("/ui/api/usage?by=planet")
        assert r.status == 400 and (await r.json())["error"]["code"] == "bad_request"


READS = (
    "/ui/api/config",
    "/ui/api/logs?limit=2000",
    "/ui/api/system",
    "/ui/api/channels",
    "/ui/api/schedule",
    "/ui/api/usage?days=7",
    "/ui/api/workspace",
    "/ui/api/workspace/AGENTS.md",
    "/ui/api/context",
    "/ui/api/sessions",
    f"/ui/api/sessions/{quote(MAIN, safe='')}/messages",
    "/ui/api/approvals",
    "/ui/api/pairing",
    "/ui/api/outbox",
)


async def test_no_answer_holds_a_secret_value(tmp_path, llm, tg, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    llm.script(text("hello"), text("hi on telegram"))
    path, cfg = cfg_with_file(tmp_path, llm, tg, api_key_env=KEY_ENV)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        stream = events(c, {"after": None, "logs": True})
        assert (await anext(stream))[0] == "hello"
        logging.getLogger("chela.test").warning("a careless line with %s in it", SECRET)
        line = None
        async for name, data, _ in stream:
            if name == "log.line" and "careless" in data["message"]:
                line = data
                break
        await stream.aclose()
        assert line is not None and SECRET not in json.dumps(line)
        await turn(c, MAIN, f"the key is {SECRET[:6]}", "k1")
        tg.inject_message(42, "hi", from_id=42)
        await tg.wait_for_sent(1, timeout=15)
        bodies = {}
        for route in READS:
            r = await c.get(route)
            assert r.status == 200, (route, r.status, await r.text())
            bodies[route] = await r.text()
        assert llm.headers[0].get("Authorization", "").endswith(SECRET)  # it is in use
    for route, raw in bodies.items():
        assert SECRET not in raw, route
        assert "TEST-telegram-token" not in raw, route
        assert ui.http_token not in raw, route
    conf = json.loads(bodies["/ui/api/config"])
    assert conf["path"] == str(path)
    assert conf["config"]["agent"]["api_key_env"] == {"env": KEY_ENV, "set": True}
    tg_env = conf["config"]["channels"]["telegram"]["token_env"]
    assert tg_env == {"env": "TEST_TG_TOKEN", "set": True}
    assert conf["config"]["agent"]["model"] == "openai/fake-model"  # the twin: values shown
    assert all(f["level"] in ("error", "warn") for f in conf["check"])
    logs = json.loads(bodies["/ui/api/logs?limit=2000"])["lines"]
    careless = [ln for ln in logs if "careless" in ln["message"]]
    assert careless and careless[0]["level"] == "warning" and careless[0]["logger"] == "chela.test"


async def test_the_other_views_answer_in_their_shapes(tmp_path, llm, tg):
    llm.script(text("noted"))
    _, cfg = cfg_with_file(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        await turn(c, MAIN, "remember the lighthouse", "v1")
        system = await (await c.get("/ui/api/system")).json()
        assert system["pid"] == os.getpid() and system["state_dir"] == str(cfg.agent.state_dir)
        assert system["rss_bytes"] > 0 and system["uptime_s"] >= 0
        chans = await (await c.get("/ui/api/channels")).json()
        ids = {ch["id"]: ch for ch in chans["channels"]}
        assert {"telegram", "http"} <= set(ids) and chans["mcp"] == []
        assert set(ids["telegram"]["outbox"]) == {"queued", "sending", "failed"}
        jobs = (await (await c.get("/ui/api/schedule")).json())["jobs"]
        assert any(j["name"] == "heartbeat" and j["kind"] == "heartbeat" for j in jobs)
        ws = await (await c.get("/ui/api/workspace")).json()
        names = [f["name"] for f in ws["files"]]
        assert len(names) == 8 and names[0] == "AGENTS.md"
        agents = await (await c.get("/ui/api/workspace/AGENTS.md")).json()
        assert agents["text"] == (cfg.agent.workspace / "AGENTS.md").read_text()
        assert (
            agents["sha256"] == next(f for f in ws["files"] if f["name"] == "AGENTS.md")["sha256"]
        )
        r = await c.get("/ui/api/workspace/config.toml")
        assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        ctx = await (await c.get("/ui/api/context")).json()
        assert "system_prompt" in ctx and "files" in ctx
        found = await (await c.get("/ui/api/sessions?q=lighthouse")).json()
        assert [s["key"] for s in found["sessions"]] == [MAIN]
        none = await (await c.get("/ui/api/sessions?q=submarine")).json()
        assert none["sessions"] == [] and none["next_cursor"] is None
        r = await c.post(f"/ui/api/sessions/{quote(MAIN, safe='')}/compact", {"focus": 5})
        assert r.status == 400 and "focus" in (await r.json())["error"]["message"]
        r = await c.post(f"/ui/api/sessions/{quote(MAIN, safe='')}/compact", {"focus": "light"})
        assert r.status == 200 and await r.json() == {"ok": True}
        r = await c.post(f"/ui/api/sessions/{quote(MAIN, safe='')}/reset")
        assert await r.json() == {"ok": True}
        msgs = await (await c.get(f"/ui/api/sessions/{quote(MAIN, safe='')}/messages")).json()
        assert msgs == {"messages": [], "has_more": False}
        status, err = await turn(c, MAIN, "x", "bad id with spaces")
        assert status == 400 and "client_msg_id" in err["error"]["message"]


def png_bytes() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


async def _upload(c, data: bytes, name: str, mime: str):
    import aiohttp

    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type=mime)
    async with c.http.post(c.base + "/ui/api/uploads", data=form, headers=c.headers()) as r:
        return r.status, await r.json()


async def test_an_upload_reaches_the_model_and_a_large_one_is_refused(tmp_path, llm):
    llm.script(text("a red square"))
    _, cfg = cfg_with_file(tmp_path, llm)
    cfg.media.max_download_mb = 0.01  # 10 KB
    cfg.media.vision = "on"
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        status, up = await _upload(c, png_bytes(), "red.png", "image/png")
        assert status == 201 and up["name"] == "red.png" and up["mime"] == "image/png"
        assert up["size"] == len(png_bytes())
        status, big = await _upload(c, b"x" * 20_000, "big.bin", "application/octet-stream")
        assert status == 413 and big["error"]["code"] == "too_large"
        status, err = await turn(c, MAIN, "what is this?", "up0", attachments=["nope"])
        assert status == 400 and "attachments" in err["error"]["message"]
        _, evs = await turn(c, MAIN, "what is this?", "up1", attachments=[up["id"]])
        assert evs[-1][1]["message"]["text"] == "a red square"
    assert llm.image_parts[0], "the image reached the model"
    saved = list((cfg.agent.state_dir / "media").glob("web_*red.png"))
    assert len(saved) == 1 and saved[0].stat().st_mode & 0o777 == 0o600


async def test_the_events_stream_tells_a_session_was_updated(tmp_path, llm, tg):
    llm.script(text("from telegram"))
    _, cfg = cfg_with_file(tmp_path, llm, tg)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        stream = events(c, {"after": None, "logs": False})
        assert (await anext(stream))[0] == "hello"
        tg.inject_message(42, "hello", from_id=42)
        updated = None
        async for ev in stream:
            if ev[0] == "session.updated":
                updated = ev
                break
        await stream.aclose()
    assert updated is not None
    assert updated[1]["key"] == MAIN and updated[1]["last_activity"] > 0 and updated[2] > 0


async def test_schedule_runs_pauses_and_resumes_a_job(tmp_path, llm, tg):
    from tests.e2e.ui_client import ui_config

    llm.script(text("the news"))
    cfg = ui_config(
        tmp_path,
        llm,
        channels=telegram_section(tg),
        cron=[
            {
                "name": "daily",
                "schedule": "0 9 * * *",
                "prompt": "news",
                "target": "telegram",
                "to": "42",
            }
        ],
    )
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui, await ui.login() as c:
        jobs = {j["name"]: j for j in (await (await c.get("/ui/api/schedule")).json())["jobs"]}
        assert jobs["daily"]["kind"] == "cron" and jobs["daily"]["paused"] is False
        assert "heartbeat" in jobs
        r = await c.post("/ui/api/schedule/nosuch/run")
        assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
        r = await c.post("/ui/api/schedule/daily/run")
        assert r.status == 202
        run = await r.json()
        assert run["name"] == "daily" and run["run_id"]
        sent = await tg.wait_for_sent(1, timeout=15)
        assert sent[0].visible_text == "the news"
        r = await c.post("/ui/api/schedule/daily/pause")
        assert await r.json() == {"name": "daily", "paused": True}
        jobs = {j["name"]: j for j in (await (await c.get("/ui/api/schedule")).json())["jobs"]}
        assert jobs["daily"]["paused"] is True
        r = await c.post("/ui/api/schedule/daily/resume")
        assert await r.json() == {"name": "daily", "paused": False}
