"""``chela whatsapp login|logout|status`` (channels/whatsapp/linked/session.py, bot/cli/whatsapp.py)
and the ``linked_device`` config, against the fake neonize client (tests/fakes/neonize_client.py)
and the app's real session lock (bot/app/lock.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from bot.app.lock import StateLock
from bot.cli.main import main
from channels.whatsapp.linked import session
from tests.fakes import neonize_client as nz


def lock_of(db):
    return StateLock(db.parent, session.lock_name(db))


@pytest.fixture
def db(tmp_path):
    return tmp_path / "state" / "whatsapp" / "default.session.db"


async def started(hub, task) -> nz.FakeClient:
    """The login's client once it is connecting (its callbacks registered)."""
    for _ in range(300):
        if hub.clients and hub.client.connects:
            return hub.client
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    raise AssertionError("login never connected")


async def test_login_shows_each_rotated_qr_and_returns_the_linked_jid(db):
    hub, shown = nz.FakeNeonize(), []
    login = asyncio.ensure_future(
        session.login(
            db,
            phone=None,
            on_qr=shown.append,
            on_code=lambda c: pytest.fail("no pairing code without --phone"),
            timeout=5,
            lock=lock_of(db),
            client_factory=hub.factory,
        )
    )
    client = await started(hub, login)
    await client.show_qr("2@first,ref")
    await client.show_qr("2@second,ref")  # WhatsApp rotates the code
    await client.emit(nz.paired())
    assert await login == f"{nz.ME_PN}@s.whatsapp.net"
    assert shown == ["2@first,ref", "2@second,ref"]
    assert client.stops == 1  # the login's connection is closed afterwards
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    assert oct(db.parent.stat().st_mode & 0o777) == "0o700"


async def test_login_with_a_phone_number_gives_a_pairing_code_instead(db):
    hub, codes = nz.FakeNeonize(), []
    login = asyncio.ensure_future(
        session.login(
            db,
            phone="+49 170 0000001",
            on_qr=lambda q: pytest.fail("no QR with --phone"),
            on_code=codes.append,
            timeout=5,
            lock=lock_of(db),
            client_factory=hub.factory,
        )
    )
    client = await started(hub, login)
    await client.show_qr("2@first,ref")  # the connection is up: the code can be asked for
    await client.show_qr("2@second,ref")
    await client.emit(nz.paired())
    await login
    assert codes == ["KQ4R-7ZP2"] and client.phone_asked == ["491700000001"]


async def test_login_times_out_with_a_clear_error(db):
    hub = nz.FakeNeonize()
    with pytest.raises(session.ChannelError, match="no device was linked within 0s"):
        await session.login(
            db,
            phone=None,
            on_qr=print,
            on_code=print,
            timeout=0.2,
            lock=lock_of(db),
            client_factory=hub.factory,
        )


def hold(db) -> subprocess.Popen:
    """Another process holding the session (as a running daemon does)."""
    code = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from bot.app.lock import StateLock
        db = Path(sys.argv[1])
        db.parent.mkdir(parents=True, exist_ok=True)
        StateLock(db.parent, db.name + ".lock").acquire()
        print("held", flush=True)
        time.sleep(30)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


async def test_login_and_logout_are_refused_while_another_process_holds_the_session(db):
    hub = nz.FakeNeonize()
    holder = hold(db)
    try:
        with pytest.raises(session.SessionBusy, match=f"pid {holder.pid}"):
            await session.login(
                db,
                phone=None,
                on_qr=print,
                on_code=print,
                timeout=5,
                lock=lock_of(db),
                client_factory=hub.factory,
            )
        db.touch()
        with pytest.raises(session.SessionBusy, match=f"pid {holder.pid}"):
            await session.logout(db, lock=lock_of(db), client_factory=hub.factory)
        assert hub.clients == [] and db.exists()  # nothing was opened, nothing removed
    finally:
        holder.kill()
        holder.wait()


async def test_logout_removes_the_session(db):
    db.parent.mkdir(parents=True)
    for name in (db.name, db.name + "-wal"):
        (db.parent / name).write_bytes(b"")
    await session.logout(db, lock=lock_of(db), client_factory=nz.FakeNeonize().factory)
    assert not db.exists() and not (db.parent / (db.name + "-wal")).exists()


def config(tmp_path, **whatsapp) -> str:
    path = tmp_path / "config.toml"
    lines = [
        "[agent]",
        'model = "openai/gpt-4o-mini"',
        f'workspace = "{tmp_path / "ws"}"',
        f'state_dir = "{tmp_path / "state"}"',
        "[channels.whatsapp]",
        "enabled = true",
        'transport = "linked_device"',
    ] + [f"{k} = {v!r}".replace("'", '"') for k, v in whatsapp.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_status_without_a_session_says_not_linked(tmp_path, capsys):
    assert main(["whatsapp", "status", "--config", config(tmp_path)]) == 1
    assert "not linked" in capsys.readouterr().out


def test_a_linked_device_config_needs_no_api_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("WHATSAPP_AGENT_API_KEY", raising=False)
    assert main(["check", "--config", config(tmp_path)]) == 0
    assert "channel whatsapp: enabled" in capsys.readouterr().out


def test_check_names_the_transport_key_when_neonize_is_missing(tmp_path):
    """neonize made unimportable in a fresh interpreter (as on an install without the extra)."""
    code = textwrap.dedent(
        """
        import sys
        class NoNeonize:
            def find_spec(self, name, path=None, target=None):
                if name == "neonize" or name.startswith("neonize."):
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, NoNeonize())
        from bot.cli.main import main
        sys.exit(main(["check", "--config", sys.argv[1]]))
        """
    )
    env = {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code, config(tmp_path)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 1
    assert "channels.whatsapp.transport" in out.stderr and "chela[whatsapp]" in out.stderr
