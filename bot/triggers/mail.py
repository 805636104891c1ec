"""New mail as events: one IMAP connection per ``[[mail]]`` account, read-only.

The client is the standard library's ``imaplib`` run in a worker thread: it speaks
everything needed here (LOGIN, STARTTLS, EXAMINE, UID SEARCH/FETCH) with no new dependency;
IDLE (which ``imaplib`` gains only in Python 3.14) is the two lines of RFC 2177 sent and
read through its public ``send``/``readline``.  The folder is opened with ``EXAMINE`` and
messages are read with ``BODY.PEEK``, so nothing is ever marked, moved or deleted.

Where the account is in its folder (UIDVALIDITY and the last UID taken) is stored with
each message's event in one transaction: a restart neither repeats nor skips a message.
Correctness never depends on IDLE: after every wake-up, timeout or reconnect the folder is
searched for UIDs above the stored one."""

from __future__ import annotations

import asyncio
import contextlib
import imaplib
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.config.triggers import MailConfig
from bot.triggers.mailtext import allowed, render_mail
from channels.retry import Backoff

log = logging.getLogger("chela.mail")

POLL_SECONDS = 120.0  # a server without IDLE is searched this often
IDLE_RENEW_SECONDS = 9 * 60.0  # IDLE is renewed before servers drop it (RFC 2177: 29 min)
FETCH_BYTES = 2 * 1024 * 1024  # at most this much of a message is read (attachments are not)
CONNECT_TIMEOUT = 30.0
DONE_ANSWER_SECONDS = 30.0  # an IDLE whose DONE gets no answer this long: the link is dead
IDLE_TAG = b"CHIDLE"
_UIDNEXT = re.compile(rb"UIDNEXT (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")


class MailLoginError(Exception):
    """The server refused the username or password."""


@dataclass(frozen=True)
class Fetched:
    uid: int
    raw: bytes
    size: int


def connect(spec: MailConfig, user: str, password: str) -> imaplib.IMAP4:
    """A logged-in connection (TLS as the account says); MailLoginError for a refused
    login, OSError/imaplib errors for the rest."""
    if spec.tls == "implicit":
        ctx = ssl.create_default_context()
        conn: imaplib.IMAP4 = imaplib.IMAP4_SSL(
            spec.host, spec.port, ssl_context=ctx, timeout=CONNECT_TIMEOUT
        )
    else:
        conn = imaplib.IMAP4(spec.host, spec.port, timeout=CONNECT_TIMEOUT)
        if spec.tls == "starttls":
            conn.starttls(ssl.create_default_context())
    try:
        conn.login(user, password)
    except imaplib.IMAP4.error as e:
        _close(conn)
        raise MailLoginError(str(e) or "login refused") from None
    return conn


def _close(conn: imaplib.IMAP4) -> None:
    """Close from any thread: the socket is shut first, which ends a read blocked in
    another thread (closing the socket file first would wait for that read's lock)."""
    with contextlib.suppress(OSError):
        conn.socket().shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        conn.shutdown()


def examine(conn: imaplib.IMAP4, folder: str) -> tuple[int, int, int]:
    """Open ``folder`` read-only: (UIDVALIDITY, UIDNEXT, message count)."""
    typ, data = conn.select(_quoted(folder), readonly=True)  # EXAMINE
    if typ != "OK":
        raise imaplib.IMAP4.error(f"cannot open folder {folder!r}")
    count = int(data[0] or 0) if data and data[0] else 0
    validity = _code(conn, "UIDVALIDITY")
    uidnext = _code(conn, "UIDNEXT")
    if not uidnext:  # a server that does not say: ask for it
        typ, data = conn.status(_quoted(folder), "(UIDNEXT)")
        m = _UIDNEXT.search(data[0] or b"") if typ == "OK" and data else None
        uidnext = int(m.group(1)) if m else 1
    return validity, uidnext, count


def _quoted(folder: str) -> str:
    return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _code(conn: imaplib.IMAP4, name: str) -> int:
    _, data = conn.response(name)
    try:
        return int(data[-1]) if data and data[-1] is not None else 0
    except (TypeError, ValueError):
        return 0


def new_uids(conn: imaplib.IMAP4, after: int) -> list[int]:
    typ, data = conn.uid("SEARCH", f"UID {after + 1}:*")
    if typ != "OK":
        raise imaplib.IMAP4.error("UID SEARCH failed")
    found = {int(x) for x in (data[0] or b"").split() if x.isdigit()}
    return sorted(u for u in found if u > after)  # "N:*" names the last message even below N


def fetch(conn: imaplib.IMAP4, uid: int) -> Fetched | None:
    """The start of message ``uid`` (read with BODY.PEEK: its flags stay as they are)."""
    typ, data = conn.uid("FETCH", str(uid), f"(RFC822.SIZE BODY.PEEK[]<0.{FETCH_BYTES}>)")
    if typ != "OK":
        raise imaplib.IMAP4.error(f"UID FETCH {uid} failed")
    for item in data:
        if isinstance(item, tuple) and len(item) == 2:
            m = _SIZE.search(item[0])
            raw = item[1] or b""
            return Fetched(uid, raw, int(m.group(1)) if m else len(raw))
    if uid in new_uids(conn, uid - 1):  # still there: the answer made no sense
        raise imaplib.IMAP4.error(f"UID FETCH {uid}: the answer holds no message")
    return None  # expunged meanwhile


def wait_for_mail(conn: imaplib.IMAP4, stop: threading.Event, seconds: float) -> None:
    """Block until the server says the folder changed or ``seconds`` pass: IDLE when the
    server has it, else a wait and a NOOP (the poll).  The read blocks without a timeout
    (a socket file that timed out once cannot be read again); a timer ends the IDLE with
    DONE, and cuts a connection that does not answer it.  Closing the connection from
    another thread ends the wait at once (a stop)."""
    if "IDLE" not in conn.capabilities:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not stop.wait(1.0):
            pass
        conn.noop()
        return
    conn.send(IDLE_TAG + b" IDLE\r\n")
    first = conn.readline()
    if not first.startswith(b"+"):
        raise imaplib.IMAP4.abort(f"IDLE refused: {first[:80]!r}")
    done = _Done(conn)
    timers = [
        threading.Timer(seconds, done.send),
        threading.Timer(seconds + DONE_ANSWER_SECONDS, lambda: _close(conn)),
    ]
    sock = conn.socket()
    sock.settimeout(None)  # the timers bound the wait
    for t in timers:
        t.daemon = True
        t.start()
    try:
        _idle_until_tagged(conn, done)
    finally:
        for t in timers:
            t.cancel()
        sock.settimeout(CONNECT_TIMEOUT)


class _Done:
    """Sends DONE once, whoever asks first: the reader (news came) or the timer."""

    def __init__(self, conn: imaplib.IMAP4) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.sent = False

    def send(self) -> None:
        with self.lock:
            if self.sent:
                return
            self.sent = True
        with contextlib.suppress(OSError):
            self.conn.send(b"DONE\r\n")


def _idle_until_tagged(conn: imaplib.IMAP4, done: _Done) -> None:
    while True:
        line = conn.readline()
        if not line:
            raise imaplib.IMAP4.abort("the server closed the connection during IDLE")
        if line.startswith(IDLE_TAG + b" "):
            return
        if b"EXISTS" in line or b"RECENT" in line:
            done.send()


Sink = Callable[[int, int, Any, str], str | None]  # (validity, uid, payload|None, verdict)


class MailWatcher:
    """One ``[[mail]]`` account: connect, take new mail, wait, again; reconnect with backoff.
    ``take`` stores a message's event (or its skip) with the cursor; ``started`` runs it."""

    def __init__(
        self,
        spec: MailConfig,
        credentials: Callable[[], tuple[str, str]],
        cursor: Callable[[], tuple[int, int] | None],
        set_cursor: Callable[[int, int], None],
        take: Sink,
        started: Callable[[str], None],
        *,
        wait_seconds: float | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.spec = spec
        self.credentials = credentials
        self.cursor = cursor
        self.set_cursor = set_cursor
        self.take = take
        self.started = started
        self.wait_seconds = wait_seconds
        self.backoff = backoff or Backoff(1.0, 300.0, jitter=0.2)
        self.stop_flag = threading.Event()
        self.connected = asyncio.Event()  # set while a connection is up (tests, status)

    @property
    def name(self) -> str:
        return self.spec.name

    async def run(self) -> None:
        try:
            while not self.stop_flag.is_set():
                try:
                    await self._session()
                except MailLoginError as e:
                    log.error("mail %s: login refused: %s", self.name, e)
                except (OSError, imaplib.IMAP4.error, EOFError) as e:
                    log.warning("mail %s: connection lost: %s", self.name, _one_line(e))
                except Exception:  # e.g. an answer imaplib cannot decode: the watch goes on
                    log.exception("mail %s: unreadable answer or error; reconnecting", self.name)
                self.connected.clear()
                if self.stop_flag.is_set():
                    return
                wait = self.backoff.next()
                log.info("mail %s: reconnecting in %.0f s", self.name, wait)
                await asyncio.sleep(wait)
        finally:
            self.stop_flag.set()  # a wait in the worker thread ends within a second

    async def _session(self) -> None:
        user, password = self.credentials()
        conn = await asyncio.to_thread(connect, self.spec, user, password)
        try:
            validity, uidnext, _ = await asyncio.to_thread(examine, conn, self.spec.folder)
            self.backoff.reset()
            self.connected.set()
            log.info("mail %s: connected to %s", self.name, self.spec.host)
            idle = "IDLE" in conn.capabilities
            wait = self.wait_seconds or (IDLE_RENEW_SECONDS if idle else POLL_SECONDS)
            while not self.stop_flag.is_set():
                await self._take_new(conn, validity, uidnext)
                await asyncio.to_thread(wait_for_mail, conn, self.stop_flag, wait)
                uidnext = 0  # after the first pass the stored cursor decides
        finally:
            _close(conn)  # a wait in the worker thread ends with it

    async def _take_new(self, conn: imaplib.IMAP4, validity: int, uidnext: int) -> None:
        cur = self.cursor()
        if cur is None or cur[0] != validity:
            if cur is not None:
                log.warning(
                    "mail %s: the folder's UIDVALIDITY changed (%d -> %d): its messages were "
                    "renumbered; mail from now on is taken",
                    self.name,
                    cur[0],
                    validity,
                )
            if not uidnext:
                _, uidnext, _ = await asyncio.to_thread(examine, conn, self.spec.folder)
            self.set_cursor(validity, uidnext - 1)  # older mail is not processed
            return
        for uid in await asyncio.to_thread(new_uids, conn, cur[1]):
            got = await asyncio.to_thread(fetch, conn, uid)
            if got is not None:
                self._one(validity, got)

    def _one(self, validity: int, got: Fetched) -> None:
        mail = render_mail(got.raw, total_size=got.size)
        if not allowed(mail.sender, self.spec.from_allow):
            self.take(validity, got.uid, None, "skipped (from_allow)")
            log.info(
                "mail %s: uid %d from a sender outside from_allow: skipped", self.name, got.uid
            )
            return
        event_id = self.take(validity, got.uid, {"mail": mail.text}, "accepted")
        if event_id is not None:
            self.started(event_id)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def doctor_check(spec: MailConfig, user: str, password: str) -> tuple[bool, str]:
    """``chela doctor``: log in and count the folder; the line to show."""
    try:
        conn = connect(spec, user, password)
    except MailLoginError:
        return False, f"{spec.host}: login refused: wrong username or password"
    except (OSError, imaplib.IMAP4.error) as e:
        return False, f"{spec.host}:{spec.port}: cannot connect: {_one_line(e)}"
    try:
        _, _, count = examine(conn, spec.folder)
    except (OSError, imaplib.IMAP4.error) as e:
        return False, f"{spec.folder}: {_one_line(e)}"
    finally:
        _close(conn)
    return True, f"logged in; {spec.folder} holds {count} message(s)"


async def mail_checks(cfg: Any) -> list[tuple[bool, str, str]]:
    """``chela doctor``'s line per ``[[mail]]`` account: (ok, subject, detail)."""
    checks = [
        asyncio.to_thread(doctor_check, m, cfg.secret(m.username_env), cfg.secret(m.password_env))
        for m in cfg.mail
    ]
    results = await asyncio.gather(*checks)
    return [(ok, f"mail {m.name}", line) for m, (ok, line) in zip(cfg.mail, results, strict=True)]
