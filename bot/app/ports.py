"""Who holds a TCP port: best effort from /proc (Linux), for the "address already in use"
message.  Reads only what this user may read; anything unreadable just gives no answer."""

from __future__ import annotations

import os
from pathlib import Path

from bot import fs

PROC_MAX = 16 * 1024 * 1024  # a /proc/net table read at most
LISTEN = "0A"  # the TCP state column of /proc/net/tcp for a listening socket


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """The socket inodes listening on ``port`` (IPv4 and IPv6)."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = fs.read_in(proc / "net" / table, PROC_MAX).decode().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                found.add(cols[9])
    return found - {"0"}


def _holds(pid_dir: Path, wanted: set[str]) -> bool:
    try:
        fds = os.listdir(pid_dir / "fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(pid_dir / "fd" / fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in wanted:
            return True
    return False


def describe_holder(port: int, proc: Path = Path("/proc")) -> str:
    """``pid 123 (python3)`` for the process listening on ``port``; "" when it cannot be seen."""
    wanted = listening_inodes(port, proc)
    if not wanted:
        return ""
    for entry in proc.iterdir():
        if entry.name.isdigit() and _holds(entry, wanted):
            try:
                name = fs.read_in(entry / "comm", 4096).decode(errors="replace").strip()
            except OSError:
                name = "?"
            return f"pid {entry.name} ({name})"
    return ""
