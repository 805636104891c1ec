"""The Control UI's view of the triggers' event ledger (``GET /ui/api/inbox/events``): signed
webhooks posted to a running daemon are listed with their verdicts (accepted and what its turn
did, refused as unauthorized), newest first, one source at a time, a page at a time; never the
hook's secret or a signature; only for a logged-in browser session.  ``chela hooks log`` prints
the same rows from the same query."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys

import aiohttp
import pytest

from tests.e2e.harness import config_file, eventually
from tests.e2e.ui_client import ui_config, ui_daemon
from tests.fakes.llm import text

SECRET = "inbox-hook-secret-81d2c"
OTHER_SECRET = "other-hook-secret-5e7a0"
ROUTE = "/ui/api/inbox/events"


def github_headers(body: bytes, delivery: str, secret: str = SECRET) -> dict[str, str]:
    sig = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={sig}",
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Event": "push",
        "Content-Type": "application/json",
    }


@pytest.fixture
def cfg(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("INBOX_HOOK_SECRET", SECRET)
    monkeypatch.setenv("OTHER_HOOK_SECRET", OTHER_SECRET)
    hooks = [
        {
            "name": name,
            "scheme": "github",
            "secret_env": env,
            "prompt": "Event {event}:\n{body}",
            "deliver": "none",
        }
        for name, env in (("gh", "INBOX_HOOK_SECRET"), ("other", "OTHER_HOOK_SECRET"))
    ]
    return ui_config(tmp_path, llm, hooks=hooks)


async def post_hook(base: str, name: str, body: bytes, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{base}/hooks/{name}", data=body, headers=headers) as r,
    ):
        await r.read()
        return r.status


async def test_signed_and_refused_webhooks_are_listed_with_their_verdicts(tmp_path, llm, cfg):
    llm.script(text("NO_REPLY"))
    body = json.dumps({"ref": "refs/heads/main", "pusher": "ada"}).encode()
    good = github_headers(body, "del-1")
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        assert await post_hook(ui.base, "gh", body, good) == 202
        assert await post_hook(ui.base, "gh", body, github_headers(body, "del-2", "wrong")) == 401
        await eventually(lambda: ui.daemon.store.trigger_log("gh", 5)[-1]["status"] == "done")
        async with await ui.login() as client:
            r = await client.get(ROUTE)
            assert r.status == 200
            raw = await r.text()
            ans = json.loads(raw)
    refused, accepted = ans["events"]
    assert refused["verdict"] == "unauthorized" and refused["state"] == "refused"
    assert refused["source"] == "gh" and refused["kind"] == "hook" and refused["excerpt"] == ""
    assert accepted["verdict"] == "accepted" and accepted["delivery_id"] == "del-1"
    assert accepted["outcome"] == "accepted (silent (NO_REPLY))" and accepted["state"] == "done"
    assert accepted["event"] == "push" and accepted["summary"].startswith("push · {")
    assert '"pusher": "ada"' in accepted["excerpt"]
    assert "X-GitHub-Delivery" in accepted["headers"]
    assert accepted["session"] == f"agent:{cfg.agent.id}:hook:gh"
    assert accepted["received"] <= accepted["finished"]
    assert ans["has_more"] is False
    assert ans["sources"] == [{"name": "gh", "kind": "hook"}, {"name": "other", "kind": "hook"}]
    # never the secret, a signature header or its value
    assert SECRET not in raw and OTHER_SECRET not in raw
    assert "x-hub-signature" not in raw.lower()
    assert good["X-Hub-Signature-256"].removeprefix("sha256=") not in raw
    assert all("payload" not in e for e in ans["events"])


async def test_one_source_a_page_at_a_time_and_the_cli_prints_the_same(tmp_path, llm, cfg):
    llm.script(*[text("NO_REPLY")] * 3)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        for n in range(3):
            body = json.dumps({"n": n}).encode()
            assert await post_hook(ui.base, "gh", body, github_headers(body, f"d-{n}")) == 202
        body = b'{"n": 9}'
        headers = github_headers(body, "o-1", OTHER_SECRET)
        assert await post_hook(ui.base, "other", body, headers) == 202
        await eventually(lambda: all(r["status"] == "done" for r in ui.daemon.store.trigger_log()))
        async with await ui.login() as client:
            first = await (await client.get(f"{ROUTE}?source=gh&limit=2")).json()
            last = first["events"][-1]["id"]
            rest = await (await client.get(f"{ROUTE}?source=gh&limit=2&before={last}")).json()
            everything = await (await client.get(ROUTE)).json()
            bad = await client.get(f"{ROUTE}?limit=0")
    assert [e["delivery_id"] for e in first["events"]] == ["d-2", "d-1"] and first["has_more"]
    assert [e["delivery_id"] for e in rest["events"]] == ["d-0"] and not rest["has_more"]
    assert [e["source"] for e in everything["events"]] == ["other", "gh", "gh", "gh"]
    assert bad.status == 400 and "limit" in (await bad.json())["error"]["message"]
    # chela hooks log reads the same ledger beside the daemon's database
    path = config_file(
        tmp_path / "cli.toml",
        llm,
        workspace=cfg.agent.workspace,
        state_dir=cfg.agent.state_dir,
    )
    out = subprocess.run(
        [sys.executable, "-m", "bot", "hooks", "log", "gh", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lines = [line for line in out.splitlines() if "gh" in line and "d-" in line]
    assert [line.split()[3] for line in lines] == ["d-2", "d-1", "d-0"]
    assert all("silent (NO_REPLY)" in line for line in lines)
    assert SECRET not in out


async def test_the_ledger_needs_the_ui_login(tmp_path, llm, cfg):
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        body = b"{}"
        assert await post_hook(ui.base, "gh", body, github_headers(body, "d-1", "wrong")) == 401
        async with ui.client() as anonymous:
            r = await anonymous.get(ROUTE)
            assert r.status == 401
            assert (await r.json())["error"]["code"] == "unauthenticated"
            assert "unauthorized" not in await r.text()
        # the /v1 bearer token is not a UI session either
        async with ui.client() as bearer:
            r = await bearer.get(ROUTE, headers={"Authorization": f"Bearer {ui.http_token}"})
            assert r.status == 401
        async with await ui.login() as client:
            r = await client.get(ROUTE, headers={"X-Chela-CSRF": None})  # the cookie alone
            assert r.status == 403 and (await r.json())["error"]["code"] == "csrf"
            # the twin: the whole session reads it
            r = await client.get(ROUTE)
            assert r.status == 200
            assert [e["verdict"] for e in (await r.json())["events"]] == ["unauthorized"]
