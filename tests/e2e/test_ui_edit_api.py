"""The Control UI's edit routes on the wire, through the real daemon: Config Save (form and
raw text) with ``chela check``'s verdict, the base-hash guard, ``config.toml.bak``; Workspace
Save; Schedule add, preview, edit, remove and the ended one-shots.  Each refusal next to its
legitimate twin; every refused write leaves the file as it was."""

from __future__ import annotations

import asyncio
import hashlib
import time

from tests.e2e.browser.edit_kit import edit_daemon
from tests.e2e.harness import eventually
from tests.fakes.llm import text


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_config_form_save_writes_atomically_keeps_a_backup_and_says_restart(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        path = tmp_path / "config.toml"
        before = path.read_text()
        loaded = await (await c.get("/ui/api/config/file")).json()
        assert loaded["text"] == before and loaded["sha256"] == sha(path)
        assert loaded["restart"]["needed"] is False
        form = {row["key"]: row for row in loaded["form"]}
        assert form["agent.model"]["value"] == "openai/fake-model"

        r = await c.post(
            "/ui/api/config/file",
            {
                "base": loaded["sha256"],
                "set": {"agent.model": "openai/other", "ui.read_only": True},
            },
        )
        assert r.status == 200, await r.text()
        ans = await r.json()
        assert ans["restart"]["needed"] is True
        assert {"agent.model", "ui.read_only"} <= set(ans["restart"]["keys"])
        after = path.read_text()
        assert 'model = "openai/other"' in after and "read_only = true" in after
        assert "# my assistant" in after and "# no heartbeat" in after  # comments kept
        assert (tmp_path / "config.toml.bak").read_text() == before
        assert ans["sha256"] == sha(path)
        # the running daemon keeps its config until restarted
        assert ui.daemon.cfg.agent.model == "openai/fake-model"


async def test_config_errors_are_shown_by_key_and_nothing_is_written(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        path = tmp_path / "config.toml"
        before = path.read_bytes()
        base = (await (await c.get("/ui/api/config/file")).json())["sha256"]
        cases = {
            # the loader: an unknown key, by its TOML key
            "ui.session_idel": before.decode() + '\n[ui]\nsession_idel = "1h"\n',
            # chela check's verdict: a model string litellm cannot route
            "agent.model": before.decode().replace("openai/fake-model", "fake-model"),
        }
        for key, new in cases.items():
            r = await c.post("/ui/api/config/file", {"base": base, "text": new})
            assert r.status == 400, await r.text()
            err = (await r.json())["error"]
            assert err["code"] == "bad_request"
            assert key in [p["key"] for p in err["problems"]], err
            assert path.read_bytes() == before
        assert not (tmp_path / "config.toml.bak").exists()
        # the twin: a valid text is written
        good = before.decode().replace('"0m"', '"2h"')
        r = await c.post("/ui/api/config/file", {"base": base, "text": good})
        assert r.status == 200, await r.text()
        assert path.read_text() == good


async def test_a_stale_base_hash_is_refused(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        path = tmp_path / "config.toml"
        base = (await (await c.get("/ui/api/config/file")).json())["sha256"]
        path.write_text(path.read_text() + "\n# edited by hand meanwhile\n")
        changed = path.read_bytes()
        r = await c.post("/ui/api/config/file", {"base": base, "set": {"agent.timezone": "UTC"}})
        assert r.status == 409
        err = (await r.json())["error"]
        assert err["code"] == "conflict" and "changed since" in err["message"]
        assert path.read_bytes() == changed
        # the twin: with the hash of the file as it is now, the same change is saved
        r = await c.post(
            "/ui/api/config/file", {"base": sha(path), "set": {"agent.timezone": "Europe/Paris"}}
        )
        assert r.status == 200, await r.text()
        assert 'timezone = "Europe/Paris"' in path.read_text()


async def test_a_secret_where_a_variable_name_belongs_is_refused_and_never_echoed(
    tmp_path, llm, monkeypatch
):
    secret = "sk-live-0123456789abcdefSECRET"
    monkeypatch.setenv("MY_MODEL_KEY", secret)
    monkeypatch.setenv("OTHER_KEY", "x")
    # the running daemon's key is in MY_MODEL_KEY: its value is a secret no answer may hold
    agent = {"api_key_env": "MY_MODEL_KEY"}
    async with edit_daemon(tmp_path, llm, agent=agent) as ui, await ui.login() as c:
        path = tmp_path / "config.toml"
        before = path.read_bytes()
        base = sha(path)
        r = await c.post(
            "/ui/api/config/file", {"base": base, "set": {"agent.api_key_env": secret}}
        )
        assert r.status == 400
        body = await r.text()
        assert secret not in body
        assert "agent.api_key_env" in [p["key"] for p in (await r.json())["error"]["problems"]]
        assert path.read_bytes() == before
        # the twin: a variable's name is written; the page shows the name and "set"
        r = await c.post(
            "/ui/api/config/file", {"base": base, "set": {"agent.api_key_env": "OTHER_KEY"}}
        )
        assert r.status == 200, await r.text()
        assert secret not in await r.text()
        assert 'api_key_env = "OTHER_KEY"' in path.read_text()
        loaded = await (await c.get("/ui/api/config/file")).json()
        row = next(f for f in loaded["form"] if f["key"] == "agent.api_key_env")
        assert row == {"key": "agent.api_key_env", "kind": "env", "value": "OTHER_KEY", "set": True}
        # the secret, pasted into a prompt file, is never shown back either
        (tmp_path / "ws" / "USER.md").write_text(f"my key is {secret}\n")
        for route in (
            "/ui/api/config/file",
            "/ui/api/config",
            "/ui/api/workspace",
            "/ui/api/workspace/USER.md",
            "/ui/api/schedule",
            "/ui/api/schedule/ended",
        ):
            r = await c.get(route)
            assert r.status == 200, route
            assert secret not in await r.text(), route


async def test_workspace_save_with_its_guard_and_no_path_outside(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        ws = tmp_path / "ws"
        r = await c.post("/ui/api/workspace/USER.md", {"base": None, "text": "# User\nAda\n"})
        assert r.status == 200, await r.text()
        assert (ws / "USER.md").read_text() == "# User\nAda\n"
        loaded = await (await c.get("/ui/api/workspace/USER.md")).json()
        # a stale base: refused, the file unchanged
        r = await c.post("/ui/api/workspace/USER.md", {"base": None, "text": "lost"})
        assert r.status == 409
        assert (ws / "USER.md").read_text() == "# User\nAda\n"
        r = await c.post("/ui/api/workspace/USER.md", {"base": loaded["sha256"], "text": "Bo\n"})
        assert r.status == 200
        assert (ws / "USER.md").read_text() == "Bo\n"
        listing = await (await c.get("/ui/api/workspace")).json()
        assert listing["limits"]["per_file_chars"] == 20000
        # only the eight files, never a path outside the workspace
        config = (tmp_path / "config.toml").read_bytes()
        for name in (
            "..%2Fconfig.toml",
            "%2E%2E%2Fconfig.toml",
            "notes.md",
            "USER.md%00",
            "..",
            "%2Fetc%2Fpasswd",
        ):
            r = await c.post(f"/ui/api/workspace/{name}", {"base": None, "text": "x"})
            assert r.status == 404, (name, r.status)
        assert (tmp_path / "config.toml").read_bytes() == config
        assert sorted(p.name for p in ws.iterdir()) == ["USER.md"]


async def test_edit_routes_need_the_session_and_the_page_origin(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui:
        path = tmp_path / "config.toml"
        before = path.read_bytes()
        writes = [
            ("POST", "/ui/api/config/file", {"base": sha(path), "set": {"agent.timezone": "UTC"}}),
            ("POST", "/ui/api/workspace/USER.md", {"base": None, "text": "x"}),
            ("POST", "/ui/api/schedule", {"name": "a", "prompt": "p", "kind": "in", "when": "1h"}),
            ("POST", "/ui/api/schedule/preview", {"kind": "in", "when": "1h"}),
            (
                "POST",
                "/ui/api/schedule/a/edit",
                {"name": "a", "prompt": "p", "kind": "in", "when": "1h"},
            ),
            ("DELETE", "/ui/api/schedule/a", None),
        ]
        async with ui.client() as anon:
            for method, route, payload in writes:
                r = await anon.request(method, route, json=payload)
                assert r.status == 401, (route, r.status)
            r = await anon.get("/ui/api/config/file")
            assert r.status == 401
        async with await ui.login() as c:
            for method, route, payload in writes:
                # the cookie alone (no X-Chela-CSRF) is not a credential
                r = await c.request(method, route, json=payload, headers={"X-Chela-CSRF": None})
                assert r.status == 403 and (await r.json())["error"]["code"] == "csrf"
                # another origin, and no origin at all, are refused
                evil = {"Origin": "http://127.0.0.1:1"}
                r = await c.request(method, route, json=payload, headers=evil)
                assert r.status == 403 and (await r.json())["error"]["code"] == "forbidden_origin"
                r = await c.request(method, route, json=payload, headers={"Origin": None})
                assert r.status == 403
            assert path.read_bytes() == before
            assert not (tmp_path / "ws" / "USER.md").exists()
            assert ui.daemon.cron.registry.get("a") is None
            # the twin: the page's own request is answered
            r = await c.post("/ui/api/schedule/preview", {"kind": "in", "when": "1h"})
            assert r.status == 200


async def test_jobs_added_edited_and_removed_are_scheduled_by_the_running_daemon(tmp_path, llm):
    llm.script(text("Time to stretch."))
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        cron = ui.daemon.cron
        r = await c.post("/ui/api/schedule/preview", {"kind": "every", "when": "2h"})
        nxt = (await r.json())["next_run"]
        assert abs(nxt - (time.time() + 7200)) < 60
        r = await c.post("/ui/api/schedule/preview", {"kind": "at", "when": "2001-01-01T00:00"})
        assert r.status == 400 and "already past" in (await r.json())["error"]["message"]
        r = await c.post("/ui/api/schedule/preview", {"kind": "every", "when": "1s"})
        assert r.status == 400

        r = await c.post(
            "/ui/api/schedule",
            {"name": "stretch", "prompt": "Say stretch", "kind": "every", "when": "2h"},
        )
        assert r.status == 201, await r.text()
        job = (await r.json())["job"]
        assert job["source"] == "tool" and job["next_run"] is not None
        assert cron.registry.get("stretch") is not None and "stretch" in cron._loops
        r = await c.post(
            "/ui/api/schedule", {"name": "stretch", "prompt": "x", "kind": "in", "when": "1h"}
        )
        assert r.status == 409

        r = await c.post("/ui/api/schedule/stretch/pause", {})
        assert r.status == 200
        r = await c.post(
            "/ui/api/schedule/stretch/edit",
            {"name": "stretch", "prompt": "Say stretch now", "kind": "every", "when": "3h"},
        )
        assert r.status == 200, await r.text()
        assert (await r.json())["job"]["paused"] is True  # an edit keeps the job paused
        assert cron.registry.get("stretch").prompt == "Say stretch now"
        r = await c.post("/ui/api/schedule/stretch/resume", {})
        assert r.status == 200
        r = await c.post(
            "/ui/api/schedule/stretch/edit",
            {
                "name": "stretch-soon",
                "prompt": "Say stretch",
                "kind": "in",
                "when": "2s",
                "target": "none",
            },
        )
        assert r.status == 200, await r.text()
        assert cron.registry.get("stretch") is None
        edited = cron.registry.get("stretch-soon")
        assert edited is not None and edited.kind == "at"
        # the daemon that is up runs it (target none: the model is asked, nothing is sent),
        # and the page lists it among the ended one-shots
        await eventually(lambda: len(llm.requests) == 1, timeout=30)

        async def ended():
            rows = (await (await c.get("/ui/api/schedule/ended")).json())["jobs"]
            return [r for r in rows if r["name"] == "stretch-soon"]

        for _ in range(300):
            if await ended():
                break
            await asyncio.sleep(0.05)
        row = (await ended())[0]
        assert row["status"] in ("delivered", "ack", "silent"), row
        assert cron.registry.get("stretch-soon") is None

        r = await c.post(
            "/ui/api/schedule",
            {"name": "tidy", "prompt": "Tidy up", "kind": "schedule", "when": "0 9 * * 1"},
        )
        assert r.status == 201
        r = await c.delete("/ui/api/schedule/tidy")
        assert r.status == 200 and (await r.json())["removed"] is True
        assert cron.registry.get("tidy") is None
        r = await c.delete("/ui/api/schedule/tidy")
        assert r.status == 404


async def test_config_jobs_are_read_only_from_the_page(tmp_path, llm):
    extra = '\n[[cron]]\nname = "brief"\nprompt = "Morning brief"\nschedule = "0 7 * * *"\n'
    async with edit_daemon(tmp_path, llm, extra) as ui, await ui.login() as c:
        row = next(
            j
            for j in (await (await c.get("/ui/api/schedule")).json())["jobs"]
            if j["name"] == "brief"
        )
        assert row["source"] == "config"
        r = await c.delete("/ui/api/schedule/brief")
        assert r.status == 409 and "config.toml" in (await r.json())["error"]["message"]
        r = await c.post(
            "/ui/api/schedule/brief/edit",
            {"name": "brief", "prompt": "x", "kind": "in", "when": "1h"},
        )
        assert r.status == 409
        assert ui.daemon.cron.registry.get("brief") is not None


async def test_a_job_keeps_where_it_delivers_and_a_bad_target_is_refused(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        job = {"name": "ping", "prompt": "p", "kind": "every", "when": "1h"}
        r = await c.post("/ui/api/schedule", {**job, "target": "pigeon"})
        assert r.status == 400 and "target" in (await r.json())["error"]["message"]
        r = await c.post("/ui/api/schedule", {**job, "target": "last", "to": "42"})
        assert r.status == 400
        assert ui.daemon.cron.registry.get("ping") is None
        r = await c.post("/ui/api/schedule", {**job, "target": "telegram", "to": "42"})
        assert r.status == 201
        assert (await r.json())["job"]["target"] == "telegram:42"
        stored = ui.daemon.cron.registry.get("ping")
        assert stored is not None and (stored.target, stored.to) == ("telegram", "42")


async def test_a_read_only_ui_saves_nothing(tmp_path, llm):
    async with edit_daemon(tmp_path, llm, "\n[ui]\nread_only = true\n") as ui:
        path = tmp_path / "config.toml"
        before = path.read_bytes()
        async with await ui.login() as c:
            r = await c.get("/ui/api/config/file")  # reading is allowed
            assert r.status == 200
            for route, payload in (
                ("/ui/api/config/file", {"base": sha(path), "set": {"agent.timezone": "UTC"}}),
                ("/ui/api/workspace/USER.md", {"base": None, "text": "x"}),
                ("/ui/api/schedule", {"name": "a", "prompt": "p", "kind": "in", "when": "1h"}),
            ):
                r = await c.post(route, payload)
                assert r.status == 403 and (await r.json())["error"]["code"] == "read_only"
        assert path.read_bytes() == before
        assert not (tmp_path / "ws" / "USER.md").exists()


async def test_chela_checks_warnings_come_with_a_save_and_on_the_config_view(tmp_path, llm):
    async with edit_daemon(tmp_path, llm) as ui, await ui.login() as c:
        path = tmp_path / "config.toml"
        new = path.read_text().replace('enabled = ["cron"]', 'enabled = ["cron", "nosuchtool"]')
        r = await c.post("/ui/api/config/file", {"base": sha(path), "text": new})
        assert r.status == 200, await r.text()
        assert any("nosuchtool" in w for w in (await r.json())["warnings"])
        # the running config's findings are chela check's too (none for this one)
        view = await (await c.get("/ui/api/config")).json()
        assert view["check"] == []
