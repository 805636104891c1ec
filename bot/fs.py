"""The one way Chela touches the disk where it matters.

Two halves:

* **Private state**: directories 0700, files 0600, whatever the umask
  (``private_dir``, ``private_file``, ``write_private``), atomic replacement
  (``write_at``) and retention pruning (``prune_older_than``).  Modes are always set
  explicitly with chmod/fchmod, so the umask can only make things *more* private
  during the moment before the chmod, never less.
* **Guest roots**: a directory somebody else can
  write (a guest's own directory, through its file and exec tools) is never trusted
  by name.  Everything the daemon creates, reads or sends under it starts from an open
  handle on the root and walks each component with ``dir_fd=`` and ``O_NOFOLLOW``
  (``open_dir``, ``write_under``, ``read_under``, ``read_in``, ``copy_out``, ``move_in``), so a
  symbolic link planted anywhere below the root makes the operation fail
  (``LinkRefused``) instead of redirecting it.  What leaves such a directory is
  copied out through the handle into a directory only the daemon writes
  (``copy_out``): the bytes checked are the bytes sent.

``write_at`` is the low-level primitive: it writes a file relative to an open
directory handle through an exclusive, randomly named temp file that is opened
with ``O_NOFOLLOW`` and renamed into place, so a symlink planted at the
destination can never redirect the write.

This module is the bottom layer: it imports nothing of ``bot``.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterator, Sequence
from typing import BinaryIO
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

    Works through directory handles and never follows a symlink at or below
    ``directory`` (links are neither followed nor deleted: a guest's ``media`` turned
    into a link prunes nothing).  Subdirectories emptied by the prune
    are removed; ``directory`` itself is kept.  Returns the number of files deleted.
    """
    cutoff = (time.time() if now is None else now) - float(days) * 86400.0
    try:
        top = os.open(directory, _DIR_FLAGS | os.O_NOFOLLOW)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    except OSError as e:
        if e.errno == errno.ELOOP:
            log.warning("not pruning %s: it is a symbolic link", directory)
            return 0
        raise
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


# ------------------------------------------------------------------- guest roots
# A root is opened by name (its parents belong to the daemon); everything below it is
# reached through handles, one component at a time, never following a link.
_SUBDIR_FLAGS = _DIR_FLAGS | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LinkRefused(OSError):
    """A component below a root is a symbolic link: not followed (errno ELOOP)."""

    def __init__(self, name: str):
        super().__init__(errno.ELOOP, "refusing to follow a symbolic link", name)
        self.name = name


class NotRegularFile(OSError):
    """The entry is a FIFO, socket, device or directory where a file was expected."""

    def __init__(self, name: str, what: str = "not a regular file"):
        super().__init__(errno.EINVAL, what, name)


class FileTooLarge(OSError):
    """A file is larger than the reader's cap (errno EFBIG)."""

    def __init__(self, name: str, size: int, cap: int):
        super().__init__(errno.EFBIG, f"larger than {cap} bytes ({size})", name)
        self.size, self.cap = size, cap


def is_link_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refused(dir_fd: int, name: str, e: OSError) -> OSError:
    """``e`` as ``LinkRefused`` when ``name`` is a link (O_NOFOLLOW gives ELOOP or ENOTDIR)."""
    if e.errno in (errno.ELOOP, errno.ENOTDIR) and is_link_at(dir_fd, name):
        return LinkRefused(name)
    return e


def open_root(root: Path | str) -> int:
    """A handle on a file root (a guest's directory, the workspace).  The caller closes it."""
    return os.open(os.path.expanduser(str(root)), _DIR_FLAGS)


def _open_subdir(dir_fd: int, name: str, create: bool) -> int:
    try:
        return os.open(name, _SUBDIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as e:
        raise _refused(dir_fd, name, e) from None
    try:
        os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
        made = True
    except FileExistsError:
        made = False  # made meanwhile (or a link appeared): the open below decides
    try:
        fd = os.open(name, _SUBDIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise _refused(dir_fd, name, e) from None
    if made:
        os.fchmod(fd, DIR_MODE)  # the umask may have stripped bits we asked for
    return fd


def open_dir(dir_fd: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A new handle on ``parts`` below ``dir_fd``, walked one component at a time without
    following any link (``LinkRefused``).  With ``create`` missing directories are made
    0700.  ``dir_fd`` stays open; the caller closes the returned handle."""
    fd = os.dup(dir_fd)
    try:
        for name in parts:
            if not name or name in (".", "..") or "/" in name:
                raise ValueError(f"invalid path component {name!r}")
            nfd = _open_subdir(fd, name, create)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def parts_under(root: Path | str, path: Path | str) -> tuple[str, ...]:
    """The components of ``path`` below ``root``, found without touching the disk (a
    relative path is taken from ``root``).  ``ValueError`` when it does not lie inside."""
    p = str(path)
    if os.path.isabs(p):
        norm = os.path.normpath(p)
        base = os.path.normpath(os.path.abspath(os.path.expanduser(str(root))))
        for b in (base, os.path.realpath(base)):
            rel = os.path.relpath(norm, b)
            if rel == "." or not (rel == ".." or rel.startswith("../")):
                break
        else:
            raise ValueError(f"{path} is not inside {root}")
    else:
        rel = os.path.normpath(p)
        if rel == ".." or rel.startswith("../"):
            raise ValueError(f"{path} is not inside {root}")
    return () if rel == "." else tuple(Path(rel).parts)


@contextlib.contextmanager
def dir_under(root: Path | str, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
    """A handle on ``root``/``parts`` (see ``open_dir``), closed on exit.  With ``create``
    a missing root is made too (0700; its parents are the daemon's own)."""
    if create:
        private_dir(root)
    top = open_root(root)
    try:
        fd = open_dir(top, parts, create=create)
    finally:
        os.close(top)
    try:
        yield fd
    finally:
        os.close(fd)


def _file_parts(root: Path | str, path: Path | str) -> tuple[str, ...]:
    parts = parts_under(root, path)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "is the root directory", str(path))
    return parts


def free_name_at(dir_fd: int, name: str) -> str:
    """``name``, or ``stem-1.ext``, ``stem-2.ext`` … : the first no entry in ``dir_fd`` has."""
    stem, suffix = os.path.splitext(name)
    candidate, n = name, 1
    while True:
        try:
            os.stat(candidate, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return candidate
        candidate = f"{stem}-{n}{suffix}"
        n += 1


def write_under(
    root: Path | str, path: Path | str, data: bytes, *, fresh: bool = False, keep_mode: bool = False
) -> Path:
    """Create or atomically replace the file ``path`` under ``root`` (0600; parents made
    0700), no link followed at any component.  With ``fresh`` an existing name is not
    replaced: ``-1``, ``-2`` … is added.  Returns the path written."""
    parts = _file_parts(root, path)
    with dir_under(root, parts[:-1], create=True) as dfd:
        name = free_name_at(dfd, parts[-1]) if fresh else parts[-1]
        write_at(dfd, name, bytes(data), keep_mode=keep_mode)
    return Path(os.path.expanduser(str(root))).joinpath(*parts[:-1], name)


def root_holding(root: Path | str, path: Path | str) -> Path | None:
    """``root`` when ``path`` lies inside it (lexically), else None: the root whose handle
    a write to ``path`` must go through."""
    try:
        parts_under(root, path)
    except ValueError:
        return None
    return Path(os.path.expanduser(str(root)))


def save(dest: Path | str, data: bytes, *, root: Path | str | None = None) -> Path:
    """Write ``data`` to ``dest`` (0600): through ``root``'s handle when ``root`` is given
    (``dest`` must lie inside it), else as a private file of the daemon's own."""
    if root is None:
        write_private(dest, data)
        return Path(dest)
    return write_under(root, dest, data)


def _open_at(dir_fd: int, name: str) -> int:
    try:
        return os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        raise _refused(dir_fd, name, e) from None


@contextlib.contextmanager
def open_under(root: Path | str, path: Path | str) -> Iterator[BinaryIO]:
    """The regular file ``path`` under ``root`` open for reading, in pieces (a backup
    streams it), no link followed at any component; ``NotRegularFile`` for anything else."""
    parts = _file_parts(root, path)
    with dir_under(root, parts[:-1]) as dfd:
        fd = _open_at(dfd, parts[-1])
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(parts[-1])
        yield f


def read_at(dir_fd: int, name: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``name`` in ``dir_fd``, opened without following a
    link; ``FileTooLarge`` past ``max_bytes``."""
    fd = _open_at(dir_fd, name)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", name)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(name)
        if st.st_size > max_bytes:
            raise FileTooLarge(name, st.st_size, max_bytes)
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, 1024 * 1024)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise FileTooLarge(name, size, max_bytes)
    return b"".join(chunks)


def read_under(root: Path | str, path: Path | str, max_bytes: int) -> bytes:
    """``read_at`` for ``path`` under ``root``: no link followed at any component."""
    parts = _file_parts(root, path)
    with dir_under(root, parts[:-1]) as dfd:
        return read_at(dfd, parts[-1], max_bytes)


def read_in(path: Path | str, max_bytes: int, root: Path | str | None = None) -> bytes:
    """The bytes of the file ``path``, no link followed at any component below ``root``
    (``read_under``).  Without ``root`` it is the file's own directory, the caller's: then
    only the file itself is checked (a link in its place is refused, not followed)."""
    return read_under(Path(path).parent if root is None else root, path, max_bytes)


def copy_out(root: Path | str, path: Path | str, dest_dir: Path | str, max_bytes: int) -> Path:
    """Copy the file ``path`` under ``root`` (read through the root's handle, no link
    followed) into ``dest_dir``, a private directory only the daemon writes, under a fresh
    random name that ends with the file's name.  What is later read from the copy is
    exactly what was read here, whatever happens under ``root`` meanwhile."""
    parts = _file_parts(root, path)
    data = read_under(root, path, max_bytes)
    dest = private_dir(dest_dir) / f"{secrets.token_hex(6)}_{parts[-1][-120:]}"
    write_private(dest, data)
    return dest


def move_in(src: Path | str, root: Path | str, path: Path | str) -> Path:
    """Move the daemon's own file ``src`` to ``path`` under ``root`` (a fresh name when
    taken; parents made 0700), no link followed below ``root``.  Returns the new path."""
    parts = _file_parts(root, path)
    with dir_under(root, parts[:-1], create=True) as dfd:
        name = free_name_at(dfd, parts[-1])
        try:
            os.rename(src, name, dst_dir_fd=dfd)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            with open(src, "rb") as f:  # another file system: copy, then drop the original
                write_at(dfd, name, f.read())
            os.unlink(src)
    return Path(os.path.expanduser(str(root))).joinpath(*parts[:-1], name)
