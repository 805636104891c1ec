"""The Control UI's login and browser sessions through the real daemon (SPEC §16.2): a code
from `chela dashboard` is traded once for a cookie and a CSRF token; used, expired and
unknown codes get the same 401; a sixth attempt in a minute from one address (loopback too)
gets 429; logout, Revoke and `--revoke-all` end sessions.  Each refusal has its twin."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bot.cli import main as cli_main
from tests.e2e.harness import config_file
from tests.e2e.ui_client import mint_code, ui_config, ui_daemon

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/ui/#login=([A-Za-z0-9_-]{22})")


async def test_a_code_logs_in_once_with_an_httponly_strict_cookie(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, ui.client() as browser:
        code = mint_code(ui.cfg)
        r = await browser.login(code)
        assert r.status == 200
        set_cookie = r.headers["Set-Cookie"]
        for part in ("chela_ui=", "HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=604800"):
            assert part in set_cookie
        assert "Secure" not in set_cookie  # no https public_origin
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", browser.csrf)
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", browser.cookie)
        boot = await browser.get("/ui/api/bootstrap")
        assert boot.status == 200
        body = await boot.json()
        assert body["csrf"] == browser.csrf
        assert body["main_session"] == "agent:main:main" and body["read_only"] is False
        assert body["agent"] == {"id": "main", "name": ui.cfg.agent.name}
        async with ui.client() as other:  # the same code again: used
            again = await other.login(code)
            assert again.status == 401
            assert (await again.json())["error"]["code"] == "login_code_invalid"


async def test_used_expired_and_unknown_codes_get_the_same_answer(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, ui.client() as browser:
        used = mint_code(ui.cfg)
        assert (await browser.login(used)).status == 200
        expired = mint_code(ui.cfg)
        ui.daemon.store.db.execute("UPDATE ui_login_codes SET expires = expires - 121")
        answers = []
        for code in (used, expired, "A" * 22):
            async with ui.client() as c:
                r = await c.login(code)
                answers.append((r.status, await r.text()))
        assert answers[0][0] == 401 and len(set(answers)) == 1, answers
        assert "login_code_invalid" in answers[0][1]
        async with ui.client() as twin:  # a fresh code still works
            assert (await twin.login(mint_code(ui.cfg))).status == 200


async def test_the_sixth_login_attempt_in_a_minute_from_loopback_is_refused(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, ui.client() as c:
        statuses = [(await c.login("B" * 22)).status for _ in range(4)]
        good = await c.login(mint_code(ui.cfg))  # the fifth: answered on its merits
        assert statuses == [401] * 4 and good.status == 200
        sixth = await c.login(mint_code(ui.cfg))  # a valid code, but one attempt too many
        assert sixth.status == 429
        assert (await sixth.json())["error"]["code"] == "rate_limited"


async def test_logout_ends_the_session(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        assert (await c.get("/ui/api/bootstrap")).status == 200  # twin: the session works
        out = await c.post("/ui/api/logout")
        assert out.status == 204
        assert "Max-Age=0" in out.headers["Set-Cookie"]
        after = await c.get("/ui/api/bootstrap")
        assert after.status == 401
        assert (await after.json())["error"]["code"] == "unauthenticated"


async def test_revoke_ends_another_browser_session(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as a, await ui.login() as b:
        listed = (await (await a.get("/ui/api/ui-sessions")).json())["sessions"]
        assert len(listed) == 2 and sum(s["current"] for s in listed) == 1
        other = next(s["id"] for s in listed if not s["current"])
        assert (await a.delete(f"/ui/api/ui-sessions/{other}")).status == 204
        assert (await b.get("/ui/api/bootstrap")).status == 401
        assert (await a.get("/ui/api/bootstrap")).status == 200  # twin: the revoker stays
        assert (await a.delete(f"/ui/api/ui-sessions/{other}")).status == 404


async def test_revoke_all_from_the_cli_ends_every_session_and_code(tmp_path, llm, capsys):
    async with ui_daemon(tmp_path, llm) as ui, await ui.login() as c:
        spare = mint_code(ui.cfg)
        path = config_file(
            tmp_path / "c.toml",
            llm,
            workspace=ui.cfg.agent.workspace,
            state_dir=ui.cfg.agent.state_dir,
        )
        assert cli_main(["dashboard", "--revoke-all", "--config", str(path)]) == 0
        assert "ended 1 browser session(s) and 1 unused login code(s)" in capsys.readouterr().out
        assert (await c.get("/ui/api/bootstrap")).status == 401
        async with ui.client() as late:
            assert (await late.login(spare)).status == 401
            assert (await late.login(mint_code(ui.cfg))).status == 200  # twin: a new code


def _dashboard(path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", "dashboard", "--config", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_dashboard_print_url_is_one_line_that_logs_in(tmp_path, llm):
    cfg = ui_config(tmp_path, llm)
    async with ui_daemon(tmp_path, llm, cfg=cfg) as ui:
        path = config_file(
            tmp_path / "c.toml",
            llm,
            workspace=cfg.agent.workspace,
            state_dir=cfg.agent.state_dir,
            channels={"http": {"enabled": True, "listen": f"127.0.0.1:{ui.port}"}},
        )
        done = _dashboard(path, "--print-url", "--no-open")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 1 and done.stdout.endswith("\n")
        m = URL.fullmatch(lines[0])
        assert m and int(m.group(1)) == ui.port, lines
        async with ui.client() as browser:
            assert (await browser.login(m.group(2))).status == 200


@pytest.mark.parametrize(
    ("http", "ui", "shown"),
    [
        ({"listen": "127.0.0.1:9001"}, {}, None),
        ({"listen": "0.0.0.0:9001"}, {}, "ui.public_origin is empty"),  # would not be served
        (
            {"listen": "0.0.0.0:9001"},
            {"public_origin": "https://chela.example.net"},
            "https://chela.example.net/ui/#login=",
        ),
        ({"listen": "127.0.0.1:9002"}, {"enabled": False}, "ui.enabled = false"),
        ({"enabled": False}, {}, "HTTP channel is off"),
    ],
)
def test_dashboard_url_forms_and_refusals(tmp_path, http, ui, shown):
    lines = [f'[agent]\nstate_dir = "{tmp_path / "state"}"\nworkspace = "{tmp_path / "ws"}"']
    section = {"enabled": True, **http}
    lines.append("[channels.http]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in section.items()))
    if ui:
        lines.append("[ui]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in ui.items()))
    path = tmp_path / "c.toml"
    path.write_text("\n".join(lines) + "\n")
    done = _dashboard(path, "--print-url", "--no-open")
    if shown is None:
        assert done.returncode == 0 and "http://127.0.0.1:9001/ui/#login=" in done.stdout
        assert "no daemon is running" in done.stderr
    elif shown.startswith("https://"):
        assert done.returncode == 0 and done.stdout.startswith(shown)
    else:
        assert done.returncode == 1 and done.stdout == "" and shown in done.stderr


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"'


async def test_the_daemon_tells_the_ui_each_channels_state(tmp_path, llm):
    async with ui_daemon(tmp_path, llm) as ui:
        assert ui.daemon.channel_states() == {"http": {"state": "connected", "error": ""}}
    assert ui.daemon.channel_states()["http"]["state"] == "stopped"


async def test_behind_a_tls_proxy_the_public_origin_is_the_uis_and_the_cookie_is_secure(
    tmp_path, llm
):
    public = "https://chela.example.net"
    async with ui_daemon(tmp_path, llm, ui={"public_origin": public}) as ui:
        proxied = {"Host": "chela.example.net"}
        async with ui.client(origin=public) as browser:
            r = await browser.request(
                "POST", "/ui/api/login", json={"code": mint_code(ui.cfg)}, headers=proxied
            )
            assert r.status == 200 and "Secure" in r.headers["Set-Cookie"]
            browser.csrf = (await r.json())["csrf"]
            browser.cookie = r.cookies["chela_ui"].value
            assert (await browser.get("/ui/api/bootstrap", headers=proxied)).status == 200
            foreign = await browser.get(
                "/ui/api/bootstrap", headers={**proxied, "Origin": "https://evil.example.net"}
            )
            assert foreign.status == 403
            other_host = await browser.get("/ui/", headers={"Host": "other.example.net"})
            assert other_host.status == 403
