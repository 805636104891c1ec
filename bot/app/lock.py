"""One daemon per state dir: an advisory ``flock`` on ``<state_dir>/chela.pid``.

The kernel drops the lock when the holder exits, however it exits, so a crashed daemon
never leaves a stale lock behind: the file may stay, but nobody holds it.  The file also
carries a little JSON about the running daemon (pid, start time, channels, HTTP address)
for ``chela status`` and ``chela doctor``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

LOCK_NAME = "chela.pid"


class LockHeld(Exception):
    def __init__(self, path: Path, info: dict):
        self.path = path
        self.info = info
        self.pid = info.get("pid")
        who = f"pid {self.pid}" if self.pid else "another process"
        super().__init__(
            f"another Chela daemon ({who}) is already running on this state dir "
            f"(lock {path}); stop it first, or give this one its own agent.state_dir"
        )


def lock_path(state_dir: Path, name: str = LOCK_NAME) -> Path:
    return Path(state_dir) / name


def _read(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        data = json.loads(raw.decode() or "{}")
    except (ValueError, UnicodeDecodeError):
        data = {}
    return data if isinstance(data, dict) else {}


class StateLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends)."""

    def __init__(self, state_dir: Path, name: str = LOCK_NAME):
        """``name``: another lock file in that dir (a WhatsApp session's, beside its database)."""
        self.path = lock_path(state_dir, name)
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            info = _read(fd) if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else {}
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockHeld(self.path, info) from None
            raise
        self._fd = fd
        self.update(pid=os.getpid())

    def update(self, **info) -> None:
        """Replace the JSON in the lock file (the lock itself is untouched)."""
        if self._fd is None:
            return
        data = {"pid": os.getpid(), **info}
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, (json.dumps(data) + "\n").encode(), 0)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def running_daemon(state_dir: Path) -> dict | None:
    """The JSON of the daemon holding the lock on ``state_dir``, or None when none runs."""
    path = lock_path(state_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                info = _read(fd)
                info.setdefault("pid", None)
                return info
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
