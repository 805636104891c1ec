"""Private on-disk state (SPEC §9.4): directories 0700, files 0600, whatever the umask.

Small helpers used wherever Chela creates something on disk: the state dir, the
database, the media dir, guest dirs, the generated token and the workspace files
it creates.  Modes are always set explicitly with chmod/fchmod, so the process
umask can only ever make things *more* private during the short moment before
the chmod, never less.

``write_at`` is the low-level primitive: it writes a file relative to an open
directory handle through an exclusive, randomly named temp file that is opened
with ``O_NOFOLLOW`` and renamed into place, so a symlink planted anywhere at the
destination can never redirect the write.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
import time
from pathlib import Path
import contextlib

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _missing_ancestors(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, outermost first."""
    missing: list[Path] = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    missing.reverse()
    return missing


def _make_dirs(path: Path) -> None:
    """Create ``path`` and any missing parents, each new one 0700."""
    for d in _missing_ancestors(path):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue  # someone else made it in the meantime; leave its mode alone
        os.chmod(d, DIR_MODE)  # the umask may have stripped bits we asked for


def private_dir(path: Path | str) -> Path:
    """Make sure ``path`` is a directory: missing parents are created 0700, and
    ``path`` itself is (made) 0700.  Existing parents keep their modes."""
    p = Path(os.path.expanduser(str(path)))
    _make_dirs(p)
    if not p.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(p))
    os.chmod(p, DIR_MODE)
    return p


def private_file(path: Path | str) -> None:
    """chmod an existing file to 0600 without following a symlink at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        # not readable by us (odd, but our own file): fall back to a checked chmod
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise OSError(
                errno.ELOOP, "refusing to chmod through a symbolic link", str(path)
            ) from None
        os.chmod(path, FILE_MODE)
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def write_at(
    dir_fd: int, name: str, data: bytes, *, mode: int = FILE_MODE, keep_mode: bool = False
) -> None:
    """Atomically create or replace ``name`` inside the directory ``dir_fd``.

    The data goes to an exclusive, randomly named temp file (``O_CREAT|O_EXCL|
    O_NOFOLLOW``) in the same directory, which is then renamed over ``name``.  The
    rename replaces whatever entry is there (a symlink is replaced, not followed).
    New files get ``mode``; with ``keep_mode`` an existing regular file keeps its mode.
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"invalid file name {name!r}")
    final_mode = mode
    if keep_mode:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISREG(st.st_mode):
                final_mode = stat.S_IMODE(st.st_mode)
    for _ in range(100):
        tmp = f".{name[:80]}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _TEMP_FLAGS, FILE_MODE, dir_fd=dir_fd)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(errno.EEXIST, "could not create a temporary file")
    try:
        try:
            os.fchmod(fd, final_mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_private(path: Path | str, data: bytes) -> None:
    """Create or replace ``path`` atomically as a 0600 file.

    Missing parent directories are created 0700 (existing ones are left alone).  The
    final component is never followed: a symlink at ``path`` is replaced by the file.
    """
    p = Path(os.path.expanduser(str(path)))
    _make_dirs(p.parent)
    dfd = os.open(p.parent, _DIR_FLAGS)
    try:
        write_at(dfd, p.name, bytes(data), mode=FILE_MODE)
    finally:
        os.close(dfd)


def prune_older_than(directory: Path | str, days: float, now: float | None = None) -> int:
    """Delete regular files under ``directory`` whose mtime is more than ``days`` ago.

    Works through directory handles and never follows a symlink below ``directory``
    (links are neither followed nor deleted).  Subdirectories emptied by the prune
    are removed; ``directory`` itself is kept.  Returns the number of files deleted.
    """
    cutoff = (time.time() if now is None else now) - float(days) * 86400.0
    try:
        top = os.open(directory, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    try:
        deleted, _ = _prune_fd(top, cutoff)
    finally:
        os.close(top)
    return deleted


def _prune_fd(dfd: int, cutoff: float) -> tuple[int, bool]:
    """Prune inside ``dfd``; return (files deleted, whether the directory ended up empty)."""
    deleted = 0
    remaining = 0
    with os.scandir(dfd) as it:
        entries = list(it)
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(entry.name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dfd)
            except OSError:  # replaced by a link or removed meanwhile
                remaining += 1
                continue
            try:
                n, empty = _prune_fd(sub, cutoff)
            finally:
                os.close(sub)
            deleted += n
            if n and empty:
                try:
                    os.rmdir(entry.name, dir_fd=dfd)
                    continue
                except OSError:
                    pass
            remaining += 1
        elif stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
            try:
                # unlink removes the directory entry itself; it never follows a link
                os.unlink(entry.name, dir_fd=dfd)
                deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not delete old media file %s: %s", entry.name, exc)
                remaining += 1
        else:
            remaining += 1
    return deleted, remaining == 0
