"""Per-runtime-context prompt cache.

``PromptCache.get(ctx)`` builds the prompt once per distinct ``PromptContext`` and returns
the *same* ``PromptResult`` object until one of the paths the build read or probed
changes (size or mtime, a missing file appearing, a file disappearing).  ``invalidate()``
drops everything (config reload).

How staleness is detected
-------------------------
Stat-ing every dependency on every lookup is correct but costs ~1.5 µs per path, and a
typical prompt depends on 20+ paths (bootstrap files, skills, project files).  So on
Linux the cache uses inotify as a change *signal*:

* After a build it adds watches for every dependency: the file itself (content and
  attribute changes, also through another hard link), every ancestor directory up to
  ``/`` for entries appearing / vanishing / being renamed, with interest only in the next
  path component (catches create, delete, atomic replace of the file or of any directory
  on its path, also for paths that do not exist yet), and directories whose listing was
  used (skills, ``.claude/rules``) for any change.
* The kernel queues inotify events synchronously inside the modifying system call, so by
  the time any writer's ``write``/``utime``/``rename`` has returned, the event is already
  readable.  A lookup therefore only needs one non-blocking ``read`` on the inotify fd
  (~1 µs): nothing queued means nothing we watch has changed since the watches were set.
* A relevant event marks the affected contexts dirty; the next ``get`` rebuilds.  If the
  rebuilt result is identical (same text, same deps) the previous object is kept.
* The window between reading the files and setting the watches is closed by re-stat-ing
  every dependency after the watches are in place and rebuilding if anything moved.
* Same-size edits inside one timestamp tick are invisible to stat ("racy" files, as in
  git).  When a dependency was modified within the last few seconds, the build is
  repeated once after the watches are in place (inotify mode), or every lookup rebuilds
  until the files have settled (stat mode); an identical rebuild keeps the old object.
* Queue overflow, a removed watch, or a failure to set a watch fall back to "dirty"
  (rebuild) — never to "clean".

Where inotify is unavailable (non-Linux, no instances left) or ``watch=False`` is passed
(e.g. a workspace on a network filesystem, where remote edits raise no events), every
lookup stat-s each dependency instead: slower, equally correct.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator

from .builder import build_prompt
from .result import PromptResult
from .context import PromptContext

log = logging.getLogger(__name__)

# inotify constants (linux/inotify.h)
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

IN_MASK_ADD = 0x20000000

# Dependencies themselves (files, listed directories): any change.
_WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
# Ancestor directories: only entries appearing, vanishing, being renamed or re-permissioned.
# Content writes to a dependency are reported by the watch on the file itself, so the
# (noisy) IN_MODIFY / IN_CLOSE_WRITE of unrelated siblings are not queued at all.
_ANCESTOR_MASK = (
    IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
)
# Failed watches (negated errnos) that only mean "not there / not ours to see": a
# dependency file may also be unreadable; a directory (listed or ancestor) may not.
_FILE_TOLERATED = (-errno.ENOENT, -errno.ENOTDIR, -errno.EACCES)
_DIR_TOLERATED = (-errno.ENOENT, -errno.ENOTDIR)
_EVENT = struct.Struct("iIII")
_VERIFY_ATTEMPTS = 3
# Timestamp granularity safety margin (coarse kernel clocks, 1-2 s on some filesystems).
RACY_NS = 3_000_000_000


def _is_racy(deps: dict[str, tuple[int, int] | None], started_ns: int) -> bool:
    """True when some dependency was modified within RACY_NS of the build (or in the future)."""
    limit = started_ns - RACY_NS
    return any(v is not None and v[1] >= limit for v in deps.values())


def _same(a: PromptResult, b: PromptResult) -> bool:
    return a.text == b.text and a.deps == b.deps and a.files == b.files


class _Inotify:
    """Minimal ctypes binding: one non-blocking inotify instance."""

    _libc = None

    def __init__(self) -> None:
        if not sys.platform.startswith("linux"):
            raise OSError(errno.ENOSYS, "inotify is Linux-only")
        if _Inotify._libc is None:
            _Inotify._libc = ctypes.CDLL(
                ctypes.util.find_library("c") or "libc.so.6", use_errno=True
            )
        libc = _Inotify._libc
        if not hasattr(libc, "inotify_init1"):
            raise OSError(errno.ENOSYS, "no inotify_init1")
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.fd = fd
        # whether events are queued, asked without a failing read (an exception costs a
        # few µs on every prompt look-up; a zero-timeout poll well under one)
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add.restype = ctypes.c_int

    def add(self, path: str, mask: int = _WATCH_MASK) -> int:
        """Watch descriptor, or -errno on failure.  Masks accumulate per inode."""
        wd = self._add(self.fd, os.fsencode(path), mask | IN_MASK_ADD)
        return wd if wd >= 0 else -ctypes.get_errno()

    def read(self) -> bytes:
        """Pending event bytes; b"" when none."""
        if not self._poll.poll(0):
            return b""
        chunks = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    @staticmethod
    def parse(data: bytes) -> Iterator[tuple[int, int, str]]:
        off = 0
        n = len(data)
        while off + _EVENT.size <= n:
            wd, mask, _cookie, length = _EVENT.unpack_from(data, off)
            off += _EVENT.size
            name = data[off : off + length].split(b"\0", 1)[0]
            off += length
            yield wd, mask, os.fsdecode(name)

    def close(self) -> None:
        if self.fd >= 0:
            try:
                self._poll.unregister(self.fd)
                os.close(self.fd)
            finally:
                self.fd = -1


def deps_fresh(deps: dict[str, tuple[int, int] | None]) -> bool:
    """True when every recorded path still has the recorded (size, mtime_ns) / absence."""
    stat = os.stat
    for path, seen in deps.items():
        try:
            st = stat(path)
        except (OSError, ValueError):
            if seen is not None:
                return False
            continue
        if seen is None or seen[0] != st.st_size or seen[1] != st.st_mtime_ns:
            return False
    return True


class _Slot:
    """Cache entry for one context; survives rebuilds of that context."""

    __slots__ = ("ctx", "dirty", "racy", "result")

    def __init__(self, ctx: PromptContext) -> None:
        self.ctx = ctx
        self.result: PromptResult | None = None
        self.dirty = True  # inotify mode: something it depends on changed
        self.racy = False  # stat mode: files too fresh to trust stat alone


class PromptCache:
    """Cache of built prompts keyed by ``PromptContext``."""

    def __init__(
        self,
        builder: Callable[[PromptContext], PromptResult] = build_prompt,
        *,
        watch: bool | None = None,
        max_entries: int = 512,
    ) -> None:
        self._build = builder
        self._max_entries = max(1, max_entries)
        self._slots: dict[PromptContext, _Slot] = {}
        self._lock = threading.RLock()
        self._want_watch = watch is not False
        self._ino: _Inotify | None = None
        self._wd_all: dict[int, set[PromptContext]] = {}
        self._wd_names: dict[int, dict[str, set[PromptContext]]] = {}
        self.builds = 0  # number of builds performed (diagnostics / tests)
        self._open_watcher()

    # ------------------------------------------------------------------ public

    @property
    def watching(self) -> bool:
        """True when lookups are validated by inotify rather than by stat."""
        return self._ino is not None

    def get(self, ctx: PromptContext) -> PromptResult:
        with self._lock:
            slot = self._slots.get(ctx)
            if slot is not None and slot.result is not None:
                ino = self._ino
                if ino is not None:
                    data = ino.read()
                    if data:
                        self._handle(data)
                    if not slot.dirty:
                        return slot.result
                elif not slot.racy and deps_fresh(slot.result.deps):
                    return slot.result
            return self._rebuild(ctx, slot)

    def invalidate(self) -> None:
        """Forget every cached prompt (config reload)."""
        with self._lock:
            self._slots.clear()
            self._reset_watches()

    def close(self) -> None:
        with self._lock:
            self._slots.clear()
            if self._ino is not None:
                self._ino.close()
                self._ino = None
            self._want_watch = False

    def __len__(self) -> int:
        return len(self._slots)

    def __del__(self) -> None:  # pragma: no cover - best effort
        ino = getattr(self, "_ino", None)
        if ino is not None:
            ino.close()

    # ------------------------------------------------------------------ internals

    def _open_watcher(self) -> None:
        self._ino = None
        if not self._want_watch:
            return
        try:
            self._ino = _Inotify()
        except OSError as exc:
            log.info("prompt cache: inotify unavailable (%s); validating by stat", exc)
            self._ino = None

    def _reset_watches(self) -> None:
        for slot in self._slots.values():
            slot.dirty = True
        self._wd_all.clear()
        self._wd_names.clear()
        if self._ino is not None:
            self._ino.close()
        self._open_watcher()

    def _rebuild(self, ctx: PromptContext, slot: _Slot | None) -> PromptResult:
        if slot is None:
            slot = _Slot(ctx)
        old = slot.result
        result: PromptResult | None = None
        racy = False
        for _ in range(_VERIFY_ATTEMPTS):
            self._drain_events()
            slot.dirty = False
            started = time.time_ns()
            result = self._build(ctx)
            self.builds += 1
            racy = _is_racy(result.deps, started)
            if self._ino is None:
                break
            if not self._register(slot.ctx, result):
                break  # fell back to stat mode
            # Close the gap between reading the files and the watches being in place.
            if not deps_fresh(result.deps):
                continue
            if racy:
                # A dependency changed so recently that an edit keeping size and mtime
                # could hide inside the timestamp granularity: read once more now that
                # the watches are set; any later change raises an event.
                again = self._build(ctx)
                self.builds += 1
                if not _same(again, result):
                    continue
                racy = False
            break
        else:
            # Files keep changing under us: serve this build but rebuild next time.
            slot.dirty = True
        assert result is not None
        if old is not None and _same(old, result):
            result = old
        slot.result = result
        slot.racy = racy and self._ino is None
        if self._slots.get(slot.ctx) is not slot:
            self._keep(slot)
        return result

    def _drain_events(self) -> None:
        """Apply the pending inotify events (when watching)."""
        if self._ino is not None:
            data = self._ino.read()
            if data:
                self._handle(data)

    def _keep(self, slot: _Slot) -> None:
        """Store a new slot, evicting the oldest ones beyond ``max_entries``."""
        while len(self._slots) >= self._max_entries:
            # evict the oldest context (dicts keep insertion order)
            self._slots.pop(next(iter(self._slots)))
        self._slots[slot.ctx] = slot

    def _register(self, ctx: PromptContext, result: PromptResult) -> bool:
        """Watch everything ``result`` depends on.  False when watching had to be given up."""
        ino = self._ino
        assert ino is not None
        added: dict[tuple[str, int], int] = {}

        def watch(path: str, mask: int = _WATCH_MASK) -> int:
            wd = added.get((path, mask))
            if wd is None:
                wd = ino.add(path, mask)
                added[(path, mask)] = wd
            return wd

        try:
            for path, seen in result.deps.items():
                if seen is not None:
                    self._note_all(ctx, watch(path), _FILE_TOLERATED)
                self._watch_ancestors(ctx, path, watch)
            for path in result.listed_dirs:
                self._note_all(ctx, watch(path), _DIR_TOLERATED)
        except OSError as exc:
            # e.g. ENOSPC (watch limit) or EACCES on an ancestor we depend on:
            # give up on inotify for good and validate by stat.
            log.warning("prompt cache: cannot watch workspace files (%s); validating by stat", exc)
            self._want_watch = False
            self._reset_watches()
            return False
        return True

    def _note_all(self, ctx: PromptContext, wd: int, tolerated: tuple[int, ...]) -> None:
        """Record a watch whose every event concerns ``ctx``; a failure not in
        ``tolerated`` (negated errnos) raises OSError."""
        if wd >= 0:
            self._wd_all.setdefault(wd, set()).add(ctx)
        elif wd not in tolerated:
            raise OSError(-wd, os.strerror(-wd))

    def _watch_ancestors(
        self, ctx: PromptContext, path: str, watch: Callable[[str, int], int]
    ) -> None:
        """Watch each ancestor directory of ``path`` for the name leading to it."""
        child = path
        parent = os.path.dirname(child)
        while parent != child:
            wd = watch(parent, _ANCESTOR_MASK)
            if wd >= 0:
                self._wd_names.setdefault(wd, {}).setdefault(os.path.basename(child), set()).add(
                    ctx
                )
            elif wd not in _DIR_TOLERATED:
                raise OSError(-wd, os.strerror(-wd))
            child, parent = parent, os.path.dirname(parent)

    def _handle(self, data: bytes) -> None:
        hit: set[PromptContext] = set()
        everything = False
        for wd, mask, name in _Inotify.parse(data):
            if mask & IN_Q_OVERFLOW or wd < 0:
                everything = True
                continue
            self._collect(wd, mask, name, hit)
        if everything:
            for slot in self._slots.values():
                slot.dirty = True
            return
        for ctx in hit:
            found = self._slots.get(ctx)
            if found is not None:
                found.dirty = True

    def _collect(self, wd: int, mask: int, name: str, hit: set[PromptContext]) -> None:
        """Add the contexts one event concerns to ``hit``; forget a watch the kernel dropped."""
        keys = self._wd_all.get(wd)
        if keys:
            hit.update(keys)
        names = self._wd_names.get(wd)
        if names:
            if name and not mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT):
                keys = names.get(name)
                if keys:
                    hit.update(keys)
            else:
                for keys in names.values():
                    hit.update(keys)
        if mask & IN_IGNORED:
            self._wd_all.pop(wd, None)
            self._wd_names.pop(wd, None)
