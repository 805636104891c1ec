"""The first hour (SPEC §15): onboard, doctor, status, the state-dir lock, start-up lines,
the Telegram command menu, `chat -m` failures.  Subprocesses run the real CLI against the
fakes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from bot.cli import main
from bot.cli.doctor import doctor
from bot.app.lock import LockHeld, StateLock, running_daemon
from bot.conversation.lanes import SessionLanes
from tests.e2e import TG_TOKEN, config_file, eventually, make_config, running, telegram_section
from tests.fakes.llm import error, text

ROOT = Path(__file__).resolve().parents[2]


def env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TEST_TG_TOKEN": TG_TOKEN, **extra}


async def chela(
    *argv: str, env_extra: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run the CLI in a subprocess without blocking the loop the fakes answer on."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bot", *argv],
        env=env(**(env_extra or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_daemon(cfg_path: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )


async def wait_log(log: Path, needle: str, timeout: float = 30) -> str:
    return await eventually(lambda: needle in log.read_text() and log.read_text(), timeout=timeout)


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)


# ------------------------------------------------------------------------ onboard → check → run
def onboard_args(tmp_path: Path, llm, tg, *more: str) -> list[str]:
    return [
        "onboard",
        "--non-interactive",
        "--config",
        str(tmp_path / "config.toml"),
        "--model",
        "openai/fake-model",
        "--api-base",
        llm.base_url,
        "--channel",
        "telegram",
        "--telegram-token-env",
        "TEST_TG_TOKEN",
        "--telegram-api-base",
        tg.api_base,
        "--owner",
        "telegram:42",
        "--workspace",
        str(tmp_path / "ws"),
        "--state-dir",
        str(tmp_path / "state"),
        *more,
    ]


async def test_onboard_writes_a_config_check_accepts_and_run_starts_with(tmp_path, llm, tg):
    r = await chela(*onboard_args(tmp_path, llm, tg))
    assert r.returncode == 0, r.stderr
    cfg_path = tmp_path / "config.toml"
    assert f"wrote {cfg_path}" in r.stdout and "OK    model: openai/fake-model" in r.stdout
    assert f"chela run --config {cfg_path}" in r.stdout  # the next step
    assert len(llm.requests) == 1 and llm.requests[0].get("max_tokens") == 1  # the one-token check
    assert (tmp_path / "ws" / "AGENTS.md").is_file() and (cfg_path.stat().st_mode & 0o077) == 0
    data = tomllib.loads(cfg_path.read_text())
    assert data["channels"]["telegram"]["allow_from"] == ["42"]

    r = await chela("check", "--config", str(cfg_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "channel telegram: enabled (TEST_TG_TOKEN set)" in r.stdout

    log = tmp_path / "run.log"
    proc = start_daemon(cfg_path, log)
    try:
        text_ = await wait_log(log, "ready in")
        for line in (
            f"config file: {cfg_path}",
            f"workspace: {tmp_path / 'ws'}",
            f"state dir: {tmp_path / 'state'}",
            "channels: telegram",
            "heartbeat: every 30m, target last",
            "HTTP API: off",
        ):
            assert line in text_
        tg.inject_message(42, "hello", from_id=42)
        sent = await tg.wait_for_sent(1, timeout=30)
        assert sent[0].visible_text  # answered by the fake model through the onboarded config
    finally:
        assert stop(proc) == 0


async def test_onboard_never_overwrites_without_force(tmp_path, llm, tg):
    cfg_path = tmp_path / "config.toml"
    cfg_path.write_text("# mine\n")
    r = await chela(*onboard_args(tmp_path, llm, tg, "--skip-model-check"))
    assert r.returncode == 1 and "--force" in r.stderr and cfg_path.read_text() == "# mine\n"
    r = await chela(*onboard_args(tmp_path, llm, tg, "--skip-model-check", "--force"))
    assert r.returncode == 0 and "model check skipped" in r.stdout and llm.requests == []
    assert "[channels.telegram]" in cfg_path.read_text()


async def test_onboard_refuses_a_username_as_owner_id_and_a_failing_model_exits_1(
    tmp_path, llm, tg
):
    args = onboard_args(tmp_path, llm, tg)
    args[args.index("telegram:42")] = "telegram:@me"
    r = await chela(*args)
    assert (
        r.returncode == 1 and "allow_from" in r.stderr and not (tmp_path / "config.toml").exists()
    )
    llm.script(error(401, {"error": {"message": "bad key"}}))
    r = await chela(*onboard_args(tmp_path, llm, tg))
    assert r.returncode == 1 and "FAIL  model:" in r.stdout and "401" in r.stdout
    assert (tmp_path / "config.toml").is_file()  # written; the failure is the model's


# ------------------------------------------------------------------------------ the lock
async def test_second_daemon_refuses_naming_the_pid_then_starts_after_the_first_exits(
    tmp_path, llm, tg
):
    cfg_path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels=telegram_section(tg),
    )
    first = start_daemon(cfg_path, tmp_path / "first.log")
    try:
        await wait_log(tmp_path / "first.log", "ready in")
        r = await chela("run", "--config", str(cfg_path), timeout=30)
        assert (
            r.returncode == 1 and f"pid {first.pid}" in r.stderr and "already running" in r.stderr
        )

        # status sees it: pid, channels, no traceback
        r = await chela("status", "--config", str(cfg_path))
        assert r.returncode == 0 and f"daemon: running (pid {first.pid}" in r.stdout
        assert "channels: telegram" in r.stdout and "heartbeat: off" in r.stdout
    finally:
        assert stop(first) == 0
    second = start_daemon(cfg_path, tmp_path / "second.log")
    try:
        await wait_log(tmp_path / "second.log", "ready in")
        assert running_daemon(tmp_path / "state")["pid"] == second.pid
    finally:
        assert stop(second) == 0
    assert running_daemon(tmp_path / "state") is None


def test_lock_is_released_with_the_process_and_refuses_while_held(tmp_path):
    a = StateLock(tmp_path)
    a.acquire()
    with pytest.raises(LockHeld) as e:
        StateLock(tmp_path).acquire()
    assert e.value.pid == os.getpid() and f"pid {os.getpid()}" in str(e.value)
    assert running_daemon(tmp_path)["pid"] == os.getpid()
    a.release()
    assert running_daemon(tmp_path) is None
    b = StateLock(tmp_path)  # twin: free again, a new holder gets it
    b.acquire()
    b.release()
    # a holder killed with SIGKILL leaves the file but no lock
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; from bot.app.lock import StateLock; "
            f"StateLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)",
        ],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "held"
    assert running_daemon(tmp_path)["pid"] == proc.pid
    proc.kill()
    proc.wait()
    assert (tmp_path / "chela.pid").exists() and running_daemon(tmp_path) is None
    StateLock(tmp_path).acquire()


# ------------------------------------------------------------------- check and run agree
async def test_check_and_run_refuse_the_same_missing_secret(tmp_path, llm, tg, monkeypatch):
    cfg_path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"telegram": {**telegram_section(tg)["telegram"], "token_env": "CHELA_T_UNSET"}},
    )
    monkeypatch.delenv("CHELA_T_UNSET", raising=False)
    check = await chela("check", "--config", str(cfg_path))
    run = await chela("run", "--config", str(cfg_path), timeout=30)
    assert check.returncode == 1 and run.returncode == 1
    assert "CHELA_T_UNSET is empty" in check.stderr and "CHELA_T_UNSET is empty" in run.stderr
    assert "export CHELA_T_UNSET" in run.stderr
    assert not (tmp_path / "state" / "chela.pid").exists()  # refused before anything started
    check = await chela("check", "--config", str(cfg_path), env_extra={"CHELA_T_UNSET": TG_TOKEN})
    assert check.returncode == 0  # twin: set, accepted


async def test_run_without_a_config_file_warns(tmp_path):
    log = tmp_path / "run.log"
    e = {k: v for k, v in env(HOME=str(tmp_path)).items() if k != "CHELA_CONFIG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run"],
        env=e,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        out = await wait_log(log, "ready in")
        assert "WARNING chela.daemon: no config file found" in out and "chela onboard" in out
        assert f"state dir: {tmp_path / '.chela'}" in out
    finally:
        assert stop(proc) == 0


# ------------------------------------------------------------------------------- doctor
async def test_doctor_fails_the_bad_token_with_its_fix_and_passes_the_rest(
    tmp_path, llm, tg, monkeypatch
):
    from tests.fakes.discord import FakeDiscord
    from tests.fakes.signal import FakeSignalCli
    from tests.fakes.slack import FakeSlack

    dc = FakeDiscord(token="discord-token")
    await dc.start()
    sl = FakeSlack(bot_token="xoxb-good", app_token="xapp-good")
    await sl.start()
    sig = FakeSignalCli()
    await sig.start()
    try:
        monkeypatch.setenv("T_DC", "discord-token")
        monkeypatch.setenv("T_SLB", "xoxb-good")
        monkeypatch.setenv("T_SLA", "xapp-good")
        monkeypatch.setenv("T_TG", "999:wrong-token")
        chans = {
            "telegram": {"enabled": True, "token_env": "T_TG", "api_base": tg.api_base},
            "discord": {"enabled": True, "token_env": "T_DC", "api_base": dc.api_base},
            "slack": {
                "enabled": True,
                "bot_token_env": "T_SLB",
                "app_token_env": "T_SLA",
                "api_base": sl.api_base,
            },
            "signal": {"enabled": True, "account": sig.account, "http_url": sig.url},
        }
        cfg = make_config(tmp_path, llm, channels=chans)
        by = {f.subject: f for f in await doctor(cfg)}
        assert by["channel telegram"].level == "FAIL" and "getMe" in by["channel telegram"].detail
        assert "T_TG" in by["channel telegram"].line() and "fix:" in by["channel telegram"].line()
        for name in ("discord", "slack", "signal"):
            assert by[f"channel {name}"].level == "OK", by[f"channel {name}"].line()
        assert by["model"].level == "OK"

        monkeypatch.setenv("T_TG", TG_TOKEN)  # twin: the right token
        by = {f.subject: f for f in await doctor(cfg)}
        assert (
            by["channel telegram"].level == "OK" and "@chela_bot" in by["channel telegram"].detail
        )
        assert [m for m, _ in tg.calls].count(
            "getMe"
        ) == 1  # the wrong token never got past the fake's check
        assert ("auth.test", {}) in sl.calls and ("version", {}) in sig.rpc_calls
    finally:
        await sig.stop()
        await sl.stop()
        await dc.stop()


async def test_doctor_cli_exit_code_state_permissions_and_model_failure(tmp_path, llm):
    cfg_path = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    (tmp_path / "state").mkdir(mode=0o700)
    r = await chela("doctor", "--config", str(cfg_path))
    assert r.returncode == 0, r.stdout
    assert "OK    model:" in r.stdout and "OK    state dir:" in r.stdout
    os.chmod(tmp_path / "state", 0o755)
    llm.script(error(401, {"error": {"message": "bad key"}}))
    r = await chela("doctor", "--config", str(cfg_path))
    assert r.returncode == 1
    assert (
        f"FAIL  state dir: {tmp_path / 'state'} is mode 0755" in r.stdout
        and "chmod 700" in r.stdout
    )
    assert "FAIL  model:" in r.stdout and "Traceback" not in r.stderr


async def test_doctor_http_port_free_or_held_by_this_daemon(tmp_path, llm):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = make_config(
        tmp_path, llm, channels={"http": {"enabled": True, "listen": f"127.0.0.1:{port}"}}
    )
    by = {f.subject: f for f in await doctor(cfg)}
    assert by["http port"].level == "OK" and "free" in by["http port"].detail
    with socket.socket() as other:  # someone else holds it
        other.bind(("127.0.0.1", port))
        other.listen()
        by = {f.subject: f for f in await doctor(cfg)}
        assert by["http port"].level == "FAIL" and "channels.http.listen" in by["http port"].fix
    cfg_path = config_file(
        tmp_path / "config.toml",
        llm,
        workspace=tmp_path / "ws",
        state_dir=tmp_path / "state",
        channels={"http": {"enabled": True, "listen": f"127.0.0.1:{port}"}},
    )
    proc = start_daemon(cfg_path, tmp_path / "run.log")
    try:
        await wait_log(tmp_path / "run.log", "ready in")
        assert (
            f"HTTP API: http://127.0.0.1:{port}/v1/chat/completions"
            in (tmp_path / "run.log").read_text()
        )
        by = {f.subject: f for f in await doctor(cfg)}
        assert by["http port"].level == "OK" and f"pid {proc.pid}" in by["http port"].detail
    finally:
        assert stop(proc) == 0


# ------------------------------------------------------------------------------- status
async def test_status_lists_sessions_with_usage_and_survives_a_closed_pipe(tmp_path, llm):
    cfg = make_config(
        tmp_path, llm, cron=[{"name": "daily", "schedule": "0 9 * * *", "prompt": "news"}]
    )
    from channels.terminal import TerminalChannel

    term = TerminalChannel(out=open(os.devnull, "w"))
    llm.script(
        text("hi", usage={"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234})
    )
    async with running(cfg, channels={"terminal": term}, scheduler=False):
        await term.ask("hello")
    cfg_path = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    with cfg_path.open("a") as f:
        f.write('[[cron]]\nname = "daily"\nschedule = "0 9 * * *"\nprompt = "news"\n')
    r = await chela("status", "--config", str(cfg_path))
    assert r.returncode == 0, r.stderr
    assert "daemon: not running" in r.stdout
    lines = r.stdout.splitlines()
    header = next(ln for ln in lines if ln.startswith("SESSION"))
    assert header.split() == ["SESSION", "LAST", "ACTIVITY", "TOKENS", "IN", "TOKENS", "OUT"]
    row = next(ln for ln in lines if ln.startswith("agent:main:main"))
    assert "1,200" in row and "34" in row and "ago" in row
    assert any(ln.startswith("daily") and "0 9 * * *" in ln and "config" in ln for ln in lines)

    # many sessions, then `| head -1`: the pipe closes early; no traceback
    from bot.store import Store

    st = Store(tmp_path / "state" / "chela.sqlite3")
    st.db.executemany(
        "INSERT INTO sessions(key, created, updated) VALUES (?,?,?)",
        [(f"agent:main:x:direct:{i}", 1.0, 1.0) for i in range(20000)],
    )
    st.close()
    p = await asyncio.to_thread(
        subprocess.run,
        f"{sys.executable} -m bot status --config {cfg_path} | head -1",
        shell=True,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        p.stdout.startswith("config:")
        and "Traceback" not in p.stderr
        and "BrokenPipe" not in p.stderr
    )


def test_version_and_help_for_every_option(capsys):
    from bot import __version__
    from bot.cli.main import build_parser

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"chela {__version__}"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, sp in sub.choices.items():
        for action in sp._actions:
            assert action.help, (
                f"chela {name} {action.option_strings or action.dest} has no help text"
            )


def test_pairing_list_is_a_table_with_headers(tmp_path, capsys):
    from bot.conversation import pairing_requests as pairing
    from bot.store import Store

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[agent]\nstate_dir = "{tmp_path / "state"}"\n')
    assert main(["pairing", "list", "--config", str(cfg)]) == 0
    assert "no pending pairing requests" in capsys.readouterr().out
    st = Store(tmp_path / "state" / "chela.sqlite3")
    pairing.request_pairing(st, "telegram", "77", "Ann")
    code = st.pairing_requests()[0]["code"]
    st.close()
    assert main(["pairing", "list", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["CHANNEL", "CODE", "SENDER", "ID", "NAME"]
    assert out[1].split() == ["telegram", code, "77", "Ann"]


# ----------------------------------------------------------------- telegram and pairing
async def test_telegram_menu_lists_the_chat_commands_and_pairing_log_names_the_command(
    tmp_path, llm, tg, caplog
):
    from bot.conversation.commands import TABLE

    cfg = make_config(tmp_path, llm, channels=telegram_section(tg))
    caplog.set_level("INFO", logger="chela")
    async with running(cfg):
        await tg.wait_for_call("setMyCommands", timeout=15)  # published after the first poll
        assert [c["command"] for c in tg.commands] == [c.name for c in TABLE]
        assert all(c["description"] for c in tg.commands)
        tg.inject_message(555, "hi", from_id=555)  # not the owner: pairing
        sent = await tg.wait_for_sent(1, timeout=10)
    code = sent[0].visible_text.split("Pairing code: ")[1].split()[0]
    assert f"chela pairing approve telegram {code}" in caplog.text


# ----------------------------------------------------------------------------- chat -m
async def test_chat_message_exits_non_zero_when_the_model_failed(tmp_path, llm):
    cfg_path = config_file(
        tmp_path / "config.toml", llm, workspace=tmp_path / "ws", state_dir=tmp_path / "state"
    )
    llm.script(error(401, {"error": {"message": "bad key"}}))
    r = await chela("chat", "--config", str(cfg_path), "-m", "hello")
    assert r.returncode == 1 and "401" in r.stdout + r.stderr
    assert " INFO " not in r.stderr  # logs at WARNING for -m
    llm.script(text("hello back"))
    r = await chela("chat", "--config", str(cfg_path), "-m", "hello")
    assert r.returncode == 0 and r.stdout.strip() == "hello back"


# --------------------------------------------------------------------------- lanes cancel
async def test_lane_cancel_stops_the_running_job_and_the_lane_goes_on():
    lanes = SessionLanes()
    started = asyncio.Event()
    done: list[str] = []

    async def slow():
        started.set()
        await asyncio.sleep(30)
        done.append("slow")

    async def quick():
        done.append("quick")
        return 7

    f1 = lanes.submit("k", slow)
    f2 = lanes.submit("k", quick)
    await started.wait()
    assert lanes.cancel("k") is True
    assert await f2 == 7 and done == ["quick"] and f1.cancelled()
    assert lanes.cancel("k") is False  # nothing running now
    assert await lanes.submit("k", quick) == 7  # twin: uncancelled jobs finish
    assert await lanes.drain(1)


# --------------------------------------------------------------------------- package data
def test_the_package_carries_the_example_config_and_units(tmp_path, capsys):
    data = resources.files("bot") / "data"
    assert (data / "config.example.toml").read_bytes() == (
        ROOT / "config.example.toml"
    ).read_bytes()
    for unit in ("chela.service", "chela.user.service"):
        assert (data / "systemd" / unit).read_bytes() == (ROOT / "systemd" / unit).read_bytes()
    assert main(["init", "--write-examples", str(tmp_path / "ex")]) == 0
    assert (tmp_path / "ex" / "config.example.toml").read_bytes() == (
        ROOT / "config.example.toml"
    ).read_bytes()
    assert (tmp_path / "ex" / "systemd" / "chela.user.service").is_file()
    (tmp_path / "ex" / "config.example.toml").write_text("# edited\n")
    assert main(["init", "--write-examples", str(tmp_path / "ex")]) == 0  # never overwrites
    assert (tmp_path / "ex" / "config.example.toml").read_text() == "# edited\n"
