"""Backups end to end: ``chela backup`` while the daemon answers messages, ``chela restore``
into a fresh home, and ``chela run`` there carrying on the conversation; the archive holds no
secret; ``--verify`` catches a changed or cut archive; a newer database is refused; a restore
is refused while a daemon holds the state dir; a full disk leaves nothing behind."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

from bot.app.lock import running_daemon
from bot.config import load_config
from bot.store import schema_version
from tests.e2e import TG_TOKEN, all_text, config_file, running, telegram_section
from tests.e2e.harness import settled, tg_taken
from tests.fakes.llm import delay, last_user_text, text

ROOT = Path(__file__).resolve().parents[2]
MODEL_KEY = "sk-test-backup-model-key-7f3a9c"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TEST_LLM_KEY": MODEL_KEY}


def chela(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot", *map(str, args)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def chela_async(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *map(str, args),
        env=env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def home(root: Path, llm, tg) -> Path:
    """A config file for a home under ``root``: Telegram and the fake LLM, whose key is in
    the environment (TEST_LLM_KEY) like every secret."""
    root.mkdir(parents=True, exist_ok=True)
    path = config_file(
        root / "config.toml",
        llm,
        workspace=root / "ws",
        state_dir=root / "state",
        channels=telegram_section(tg),
    )
    path.write_text(
        path.read_text().replace("[agent]\n", '[agent]\napi_key_env = "TEST_LLM_KEY"\n')
    )
    return path


def echo(request: dict):
    # 0.3 s a reply: the 15 messages sent before the backup are still being answered while it runs
    return delay(0.3, text(f"noted: {last_user_text(request)[-40:]}"))


def archive_bytes(path: Path) -> bytes:
    """The archive's decompressed stream: every member's bytes and every name."""
    with tarfile.open(path, "r:gz") as tar:
        parts = [m.name.encode() for m in tar.getmembers()]
        parts += [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]  # type: ignore[union-attr]
    return b"\n".join(parts)


def start_daemon(cfg_path: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(cfg_path)],
            env=env(),
            stdout=f,
            stderr=subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


async def wait_until(predicate, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_a_backup_under_load_restores_into_a_fresh_home_and_the_conversation_goes_on(
    tmp_path, llm, tg
):
    llm.default = echo
    old = home(tmp_path / "old", llm, tg)
    archive = tmp_path / "taken.tar.gz"
    async with running(load_config(str(old))) as d:
        tg.inject_message(42, "remember: my locker code is 4471", from_id=42)
        await tg.wait_for_sent(1, timeout=30)
        for k in range(15):  # the daemon keeps answering while the backup runs
            tg.inject_message(42, f"load message {k}", from_id=42)
        rc, out, err = await chela_async("backup", "--config", old, "--out", archive)
        assert rc == 0, err
        assert len(tg.sent) < 16  # it ran while replies were still going out
        assert f"wrote {archive}" in out
        await settled(d, tg_taken(tg), timeout=60)
    assert len(tg.sent) >= 16
    assert oct(archive.stat().st_mode & 0o777) == "0o600"

    # no secret value anywhere in it: the Telegram token and the model's key are in the env
    raw = archive_bytes(archive)
    assert TG_TOKEN.encode() not in raw and MODEL_KEY.encode() not in raw
    assert b"TEST_TG_TOKEN" in raw  # the config names its env vars, and is archived

    fresh = tmp_path / "fresh"
    new = home(fresh, llm, tg)
    config_before = new.read_text()
    done = chela(
        "restore",
        archive,
        "--config",
        new,
        "--state-dir",
        fresh / "state",
        "--workspace",
        fresh / "ws",
    )
    assert done.returncode == 0, done.stderr
    assert new.read_text() == config_before  # the config in use is left alone
    assert (fresh / "config.toml.restored").read_text() == old.read_text()

    tg.sent.clear()
    proc = start_daemon(new, tmp_path / "fresh.log")
    try:
        tg.inject_message(42, "what is my locker code?", from_id=42)
        await wait_until(lambda: any("locker code?" in m.visible_text for m in tg.sent), 60)
    finally:
        assert stop(proc) == 0, (tmp_path / "fresh.log").read_text()[-3000:]
    asked = [r for r in llm.requests if last_user_text(r).endswith("what is my locker code?")]
    assert asked, "the restored daemon never asked the model"
    assert "my locker code is 4471" in all_text(asked[-1])  # the history came back with it


def small_home(tmp_path: Path, llm, tg) -> Path:
    cfg_path = home(tmp_path / "h", llm, tg)
    from bot.store import Store

    cfg = load_config(str(cfg_path))
    store = Store(cfg.db_path)
    store.put("note", "something worth keeping")
    store.close()
    cfg.agent.workspace.mkdir(parents=True)
    (cfg.agent.workspace / "SOUL.md").write_text("a soul")
    return cfg_path


def rewrite(src: Path, dst: Path, name: str) -> None:
    """``src`` with one byte of member ``name`` flipped (its manifest hash left as it was)."""
    with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin.getmembers():
            data = tin.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
            if m.name == name:
                data = bytes([data[0] ^ 1]) + data[1:]
            tout.addfile(m, io.BytesIO(data))


def test_verify_says_ok_or_what_is_wrong(tmp_path, llm, tg):
    cfg_path = small_home(tmp_path, llm, tg)
    archive = tmp_path / "b.tar.gz"
    assert chela("backup", "--config", cfg_path, "--out", archive).returncode == 0
    ok = chela("backup", "--verify", archive)
    assert (ok.returncode, ok.stdout) == (0, "OK\n")

    tampered = tmp_path / "tampered.tar.gz"
    rewrite(archive, tampered, "workspaces/main/SOUL.md")
    bad = chela("backup", "--verify", tampered)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "workspaces/main/SOUL.md does not match the SHA-256" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[:-16])
    bad = chela("backup", "--verify", cut)
    assert bad.returncode == 1 and "truncated" in bad.stderr


def make_newer(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={schema_version.SCHEMA_VERSION + 1}")
    conn.close()


def test_chela_run_refuses_a_newer_database_naming_both_versions_and_the_backup(tmp_path, llm, tg):
    cfg_path = small_home(tmp_path, llm, tg)
    cfg = load_config(str(cfg_path))
    new = schema_version.SCHEMA_VERSION + 1
    folder = cfg.agent.state_dir / "backups"
    folder.mkdir()
    kept = folder / f"chela-backup-vm-20270101T000000Z-pre-migrate-{new - 1}-{new}.tar.gz"
    kept.write_bytes(b"")
    make_newer(cfg.db_path)
    before = cfg.db_path.read_bytes()
    done = chela("run", "--config", cfg_path)
    assert done.returncode == 1
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("chela:")]
    assert len(lines) == 1, done.stderr
    assert f"schema version {new}" in lines[0] and f"(version {new - 1})" in lines[0]
    assert f"chela restore {kept}" in lines[0]
    assert cfg.db_path.read_bytes() == before
    # and an archive of it is refused by restore with one line, changing nothing
    archive = tmp_path / "newer.tar.gz"
    assert chela("backup", "--config", cfg_path, "--out", archive).returncode == 0
    fresh = tmp_path / "fresh"
    refused = chela("restore", archive, "--config", cfg_path, "--state-dir", fresh / "state")
    assert refused.returncode == 1 and "newer than this Chela knows" in refused.stderr
    assert sorted(p.name for p in (fresh / "state").iterdir()) == ["chela.pid"]


async def test_twin_an_older_database_is_backed_up_then_migrated_and_the_daemon_runs(
    tmp_path, llm, tg
):
    cfg_path = small_home(tmp_path, llm, tg)
    cfg = load_config(str(cfg_path))
    conn = sqlite3.connect(cfg.db_path)
    conn.execute("PRAGMA user_version=0")  # from a Chela before schema versions
    conn.close()
    log = tmp_path / "run.log"
    proc = start_daemon(cfg_path, log)
    try:
        await wait_until(lambda: "ready in" in log.read_text(), 60)
    finally:
        assert stop(proc) == 0
    v = schema_version.SCHEMA_VERSION
    taken = list((cfg.agent.state_dir / "backups").glob(f"*-pre-migrate-0-{v}.tar.gz"))
    assert len(taken) == 1
    assert f"before migrating it from schema 0 to {v}: {taken[0]}" in log.read_text()
    assert schema_version.read(cfg.db_path)[0] == schema_version.SCHEMA_VERSION
    assert chela("backup", "--verify", taken[0]).stdout == "OK\n"


async def test_restore_is_refused_while_a_daemon_runs_and_allowed_once_it_stopped(
    tmp_path, llm, tg
):
    cfg_path = small_home(tmp_path, llm, tg)
    cfg = load_config(str(cfg_path))
    archive = tmp_path / "b.tar.gz"
    assert chela("backup", "--config", cfg_path, "--out", archive).returncode == 0
    (cfg.agent.workspace / "SOUL.md").write_text("edited after the backup")
    log = tmp_path / "run.log"
    proc = start_daemon(cfg_path, log)
    try:
        await wait_until(lambda: running_daemon(cfg.agent.state_dir) is not None, 60)
        refused = chela("restore", archive, "--config", cfg_path)
        assert refused.returncode == 1
        assert f"(pid {proc.pid})" in refused.stderr and "nothing was changed" in refused.stderr
        assert (cfg.agent.workspace / "SOUL.md").read_text() == "edited after the backup"
        assert not list(tmp_path.glob("h/*before-restore*"))
    finally:
        assert stop(proc) == 0
    allowed = chela("restore", archive, "--config", cfg_path)
    assert allowed.returncode == 0, allowed.stderr
    assert (cfg.agent.workspace / "SOUL.md").read_text() == "a soul"
    assert len(list(tmp_path.glob("h/ws.before-restore-*"))) == 1


def test_a_full_disk_during_a_backup_leaves_nothing_and_says_so_in_one_line(tmp_path, llm, tg):
    from tests.e2e.test_full_filesystem import small_tmpfs

    cfg_path = small_home(tmp_path, llm, tg)
    (tmp_path / "h" / "ws" / "big.bin").write_bytes(os.urandom(3 * 1024 * 1024))
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        done = chela("backup", "--config", cfg_path, "--out", disk / "b.tar.gz")
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and "no space left" in done.stderr
        assert "partial file was removed" in done.stderr
        assert list(disk.iterdir()) == []
        (tmp_path / "h" / "ws" / "big.bin").unlink()  # twin: with room, the same works
        ok = chela("backup", "--config", cfg_path, "--out", disk / "b.tar.gz")
        assert ok.returncode == 0, ok.stderr
        assert [p.name for p in disk.iterdir()] == ["b.tar.gz"]
        assert f"wrote {disk / 'b.tar.gz'}" in ok.stdout


async def test_messages_pending_at_the_backup_are_each_answered_once_after_the_restore(
    tmp_path, llm, tg
):
    from dataclasses import replace

    from bot.app.timeouts import DEFAULT

    llm.default = lambda request: delay(60, text("too late"))  # the model does not answer yet
    old = home(tmp_path / "old", llm, tg)
    archive = tmp_path / "taken.tar.gz"
    cfg = load_config(str(old))
    async with running(cfg, timeouts=replace(DEFAULT, drain=0.5)) as d:
        tg.inject_message(42, "first pending question", from_id=42)
        tg.inject_message(42, "second pending question", from_id=42)
        await wait_until(lambda: len(d.store.unfinished_inbound()) == 2)
        rc, _, err = await chela_async("backup", "--config", old, "--out", archive)
        assert rc == 0, err
    llm.default = echo
    fresh = tmp_path / "fresh"
    new = home(fresh, llm, tg)
    ws = fresh / "ws"
    assert (
        chela(
            "restore", archive, "--config", new, "--state-dir", fresh / "state", "--workspace", ws
        ).returncode
        == 0
    )
    tg.sent.clear()
    before = len(llm.requests)
    async with running(load_config(str(new))) as d2:
        await wait_until(lambda: len(tg.sent) >= 2, 60)
        await settled(d2, tg_taken(tg), timeout=60)
    asked = [last_user_text(r) for r in llm.requests[before:]]
    for question in ("first pending question", "second pending question"):
        assert sum(question in a for a in asked) == 1, asked  # each its own turn, once
        assert sum(question in m.visible_text for m in tg.sent) == 1
