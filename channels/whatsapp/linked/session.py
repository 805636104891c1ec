"""A linked device's session database: where it lives, its lock, and what ``chela whatsapp
login|logout|status`` do with it.

The database (WhatsApp Web's keys, written by neonize) is ``<state_dir>/whatsapp/
<account>.session.db``, mode 0600 in a 0700 directory.  One process uses it at a time: an
exclusive ``flock`` on ``<db>.lock`` (holding the holder's pid) is taken before neonize opens
it, so a second Chela, or a login while the daemon runs, is refused with the holder named
instead of two clients fighting over one device.  The lock itself is the app's (an
``flock`` through its state lock, handed in as :class:`SessionLock`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from channels.base import ChannelError

EXTRA = "pip install 'chela[whatsapp]'"
ClientFactory = Callable[[str], Any]  # the session database's path → a neonize client


def session_path(state_dir: Path, account: str) -> Path:
    return Path(state_dir) / "whatsapp" / f"{account}.session.db"


def require_neonize() -> None:
    """Import neonize now; a missing extra (or the libmagic it needs) is a ``ChannelError``
    that says how to install it."""
    try:
        import neonize.aioze.client  # noqa: F401
    except (ImportError, OSError) as e:
        raise ChannelError(
            f"whatsapp: the linked device needs neonize, which is not installed ({e}); "
            f"install the extra: {EXTRA} (and the system's libmagic1)"
        ) from None


def neonize_client(name: str) -> Any:
    """The real client: neonize's asyncio client on the database at ``name``."""
    require_neonize()
    from neonize.aioze.client import NewAClient

    return NewAClient(name)


def prepare(session_db: Path) -> None:
    """The directory 0700 and the database file 0600, created before neonize opens it (its
    SQLite gives the journal files the database's mode)."""
    session_db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(session_db.parent, 0o700)
    session_db.touch(mode=0o600, exist_ok=True)
    os.chmod(session_db, 0o600)


def lock_name(session_db: Path) -> str:
    """The lock file's name, beside the database."""
    return session_db.name + ".lock"


class SessionLock(Protocol):
    """What the app hands over as the session's lock (an exclusive ``flock`` on
    :func:`lock_name`, which the kernel drops when the holder dies): ``acquire`` raises
    when another process holds it (with its ``pid`` when known)."""

    def acquire(self) -> None: ...

    def release(self) -> None: ...


class SessionBusy(ChannelError):
    """Another process holds the session database."""


def take(lock: SessionLock, session_db: Path) -> None:
    """Acquire ``lock``; :class:`SessionBusy` naming the holder when another process has it."""
    session_db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        lock.acquire()
    except OSError as e:
        raise ChannelError(f"whatsapp: cannot lock the session {session_db}: {e}") from None
    except Exception as e:
        pid = getattr(e, "pid", None)
        who = f" (pid {pid})" if pid else ""
        raise SessionBusy(
            f"whatsapp: the session {session_db} is in use by another process{who}: "
            "one process per session (a running `chela run`, or `chela whatsapp login`); "
            "stop it first"
        ) from None


@contextlib.contextmanager
def held(lock: SessionLock, session_db: Path) -> Iterator[None]:
    take(lock, session_db)
    try:
        yield
    finally:
        lock.release()


def status(session_db: Path) -> dict[str, Any]:
    """``exists``, ``paired`` and the linked ``jid``, read from the database by neonize
    without connecting."""
    out: dict[str, Any] = {"exists": False, "paired": False, "jid": ""}
    if not session_db.is_file() or session_db.stat().st_size == 0:
        return out
    out["exists"] = True
    require_neonize()
    from neonize.aioze.client import ClientFactory

    devices = ClientFactory.get_all_devices_from_db(str(session_db))
    if devices:
        out["paired"], out["jid"] = True, jid_text(devices[0].JID)
    return out


def jid_text(jid: Any) -> str:
    return f"{jid.User}@{jid.Server}" if jid.User else ""


async def login(
    session_db: Path,
    *,
    phone: str | None,
    on_qr: Callable[[str], None],
    on_code: Callable[[str], None],
    timeout: float,
    lock: SessionLock,
    client_factory: ClientFactory | None = None,
) -> str:
    """Link this device: each QR payload WhatsApp rotates in goes to ``on_qr`` (or, with
    ``phone``, the pairing code to type on that phone goes to ``on_code``).  Returns the
    linked JID (the one already linked when the session is paired).  Raises ``SessionBusy``
    while another process holds the session's ``lock``, ``ChannelError`` when no link happens within
    ``timeout`` seconds or WhatsApp refuses it."""
    known = status(session_db)
    if known["paired"]:
        return str(known["jid"])
    if client_factory is None:
        require_neonize()
    with held(lock, session_db):
        prepare(session_db)
        client = (client_factory or neonize_client)(str(session_db))
        linked = _Pairing(client, phone, on_qr, on_code).subscribe()
        task = await client.connect()
        try:
            return await asyncio.wait_for(linked, timeout)
        except TimeoutError:
            raise ChannelError(f"whatsapp: no device was linked within {timeout:.0f}s") from None
        finally:
            await _stop(client, task)


class _Pairing:
    """The pairing callbacks of one login; ``linked`` is the linked JID."""

    def __init__(
        self,
        client: Any,
        phone: str | None,
        on_qr: Callable[[str], None],
        on_code: Callable[[str], None],
    ) -> None:
        self.client, self.on_qr, self.on_code = client, on_qr, on_code
        self.digits = re.sub(r"\D", "", phone or "")
        self.asked = False
        self.linked: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def subscribe(self) -> asyncio.Future[str]:
        from neonize.aioze.events import ConnectedEv, LoggedOutEv, PairStatusEv

        self.client.qr(self.qr)
        self.client.event(PairStatusEv)(self.paired)
        self.client.event(ConnectedEv)(self.connected)
        self.client.event(LoggedOutEv)(self.refused)
        return self.linked

    def _end(self, jid: str = "", error: str = "") -> None:
        if self.linked.done():
            return
        if error:
            self.linked.set_exception(ChannelError(f"whatsapp: {error}"))
        else:
            self.linked.set_result(jid)

    async def qr(self, _: Any, data: bytes) -> None:
        if not self.digits:
            self.on_qr(data.decode())
        elif not self.asked:  # a pairing code is asked for once the connection is up
            self.asked = True
            self.on_code(await self.client.PairPhone(self.digits, True))

    async def paired(self, _: Any, ev: Any) -> None:
        if ev.Status == type(ev).SUCCESS:
            self._end(jid_text(ev.ID))
        else:
            self._end(error=f"pairing failed: {ev.Error}")

    async def connected(self, _: Any, ev: Any) -> None:
        if not self.linked.done():
            me = await self.client.get_me()
            self._end(jid_text(me.JID))

    async def refused(self, _: Any, ev: Any) -> None:
        self._end(error="WhatsApp refused the link")


async def logout(
    session_db: Path,
    *,
    lock: SessionLock,
    client_factory: ClientFactory | None = None,
    timeout: float = 30.0,
) -> None:
    """Unlink the device (WhatsApp forgets it; the phone's "Linked devices" drops it) and
    remove the session database.  Raises ``SessionBusy`` while another process holds it,
    ``ChannelError`` when WhatsApp cannot be reached (the session is then kept)."""
    with held(lock, session_db):
        if status(session_db)["paired"]:
            client = (client_factory or neonize_client)(str(session_db))
            await _unlink(client, timeout)
    for path in (
        session_db,
        *(session_db.with_name(session_db.name + s) for s in ("-wal", "-shm")),
    ):
        path.unlink(missing_ok=True)


async def _unlink(client: Any, timeout: float) -> None:
    from neonize.aioze.events import ConnectedEv

    up: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def connected(_: Any, ev: Any) -> None:
        if not up.done():
            up.set_result(None)

    client.event(ConnectedEv)(connected)
    task = await client.connect()
    try:
        await asyncio.wait_for(up, timeout)
        await client.logout()
    except TimeoutError:
        raise ChannelError(
            "whatsapp: WhatsApp could not be reached to unlink the device; the session is kept"
        ) from None
    except ChannelError:
        raise
    except Exception as e:  # neonize's LogoutError
        raise ChannelError(f"whatsapp: unlinking failed ({e}); the session is kept") from None
    finally:
        await _stop(client, task)


async def _stop(client: Any, task: Any) -> None:
    """Disconnect and end neonize's connection task."""
    with contextlib.suppress(Exception):
        await client.disconnect()
    with contextlib.suppress(Exception):
        await client.stop()
    if isinstance(task, asyncio.Future) and not task.done():
        task.cancel()
    if isinstance(task, asyncio.Future):
        await asyncio.gather(task, return_exceptions=True)
