"""Reading workspace bootstrap files and project context files.

Pure apart from reading the filesystem.  Every path that is read or probed is recorded
in a ``deps`` mapping (path -> (st_size, st_mtime_ns) or None when absent) so that the
prompt cache can tell when a rebuild is needed.
"""

from __future__ import annotations

import logging
import os
import re
import stat as _stat
from dataclasses import dataclass, field
from typing import Any

import yaml

log = logging.getLogger(__name__)

# libyaml's safe loader when available (much faster); same semantics as yaml.safe_load.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Bootstrap files whose front matter feeds the prompt (identity lines).
FRONT_MATTER_USED = frozenset({"IDENTITY.md", "USER.md"})

Deps = dict[str, "tuple[int, int] | None"]

MAX_FILE_BYTES = 2 * 1024 * 1024
COMPACT_MAX_CHARS = 6000
MIN_REMAINING = 64
HEAD_RATIO = 0.7
TAIL_RATIO = 0.2

BOOTSTRAP_ORDER = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
)
MINIMAL_FILES = BOOTSTRAP_ORDER[:5]  # sub-agent and cron sessions
GUEST_FILES = BOOTSTRAP_ORDER[:4]  # guest turns: no USER, HEARTBEAT, BOOTSTRAP, MEMORY
MISSING_MARKED = frozenset({"AGENTS.md", "TOOLS.md", "IDENTITY.md", "USER.md"})
PROJECT_NAMES = ("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md")


# --------------------------------------------------------------------------- text helpers


def split_front_matter(text: str) -> tuple[str | None, str]:
    """Split a leading ``---`` … ``---`` block off ``text``.

    Returns ``(front_matter_source_or_None, body)``.  Without a closing delimiter the
    text is returned unchanged.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.startswith("---"):
        return None, text
    lines = text.split("\n")
    if lines[0].rstrip("\r").strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r").strip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    return None, text


def parse_front_matter(text: str) -> dict[str, Any]:
    """The YAML front matter of ``text`` as a dict; ``{}`` when absent or invalid."""
    src, _ = split_front_matter(text)
    if src is None or not src.strip():
        return {}
    try:
        data = yaml.load(src, Loader=_Loader)
    except yaml.YAMLError as exc:
        # People write front matter as "key: value" lines, not YAML: an unquoted value with
        # ": " in it ("description: Use X. IMPORTANT: keep it short") is invalid YAML.  Read
        # such lines as plain key/value pairs rather than dropping the whole block.
        data = _simple_front_matter(src)
        if not data:
            log.warning(
                "ignoring invalid YAML front matter: %s",
                str(exc).splitlines()[0] if str(exc) else exc,
            )
        return data
    return data if isinstance(data, dict) else {}


_SIMPLE_KEY_RE = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(.*))?$")


def _simple_front_matter(src: str) -> dict[str, Any]:
    """``key: value`` per line (the value taken literally after the first ``: ``); indented
    lines continue the previous value.  ``{}`` when any other line shape appears, or a
    value starts like YAML syntax (``[``, ``{``, an unbalanced quote …)."""
    out: dict[str, Any] = {}
    key = None
    for raw in src.split("\n"):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SIMPLE_KEY_RE.match(line)
        if m:
            key = m.group(1)
            value = (m.group(2) or "").strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            elif value[:1] in tuple("[]{}&*!|>%@`'\""):
                return {}  # YAML syntax gone wrong, not a plain value with a colon in it
            out[key] = value
        elif key is not None and line[:1] in (" ", "\t"):
            out[key] = f"{out[key]} {line.strip()}".strip()
        else:
            return {}
    return out


def strip_leading_comments(text: str) -> str:
    """Drop HTML comments (``<!-- … -->``) that precede any other content."""
    while True:
        s = text.lstrip()
        if not s.startswith("<!--"):
            return text
        end = s.find("-->", 4)
        if end < 0:
            return text
        text = s[end + 3 :]


def clean_content(text: str) -> str:
    """Front matter and leading HTML comments stripped, line endings normalised, trimmed."""
    text = text.replace("\r\n", "\n")
    _, body = split_front_matter(text)
    return strip_leading_comments(body).strip()


def fm_value(fm: dict[str, Any], key: str) -> str:
    """A front-matter value as a single trimmed line (trailing full stop removed)."""
    v = fm.get(key)
    if v is None or isinstance(v, (dict, list)):
        return ""
    s = " ".join(str(v).split())
    return s.rstrip(".").strip()


def truncate(text: str, limit: int, name: str) -> str:
    """Keep the head and tail of ``text`` with a marker between; never over ``limit`` chars."""
    n = len(text)
    if n <= limit:
        return text
    if limit <= 0:
        return ""
    head = int(limit * HEAD_RATIO)
    tail = int(limit * TAIL_RATIO)
    while True:
        marker = f"[... truncated {name}: kept {head}+{tail} of {n} chars; read the file for the rest ...]"
        out = _join_cut(text, head, tail, marker)
        if len(out) <= limit:
            return out
        avail = limit - len(marker) - 2
        if avail <= 0:
            # The marker alone does not fit: keep as much of the start as allowed.
            return text[:limit]
        new_head = int(avail * HEAD_RATIO / (HEAD_RATIO + TAIL_RATIO))
        new_tail = avail - new_head
        if (new_head, new_tail) == (head, tail):  # pragma: no cover - defensive
            new_head -= 1
        head, tail = max(new_head, 0), max(new_tail, 0)


def _join_cut(text: str, head: int, tail: int, marker: str) -> str:
    parts = [text[:head], marker]
    if tail:
        parts.append(text[-tail:])
    return "\n".join(parts)


# --------------------------------------------------------------------------- file access


def record_stat(path: str, deps: Deps) -> os.stat_result | None:
    """stat ``path`` (following links) and record it in ``deps``."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        deps[path] = None
        return None
    deps[path] = (st.st_size, st.st_mtime_ns)
    return st


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)


def read_text(path: str, deps: Deps, *, root_real: str | None = None) -> str | None:
    """Read a UTF-8 text file (bad bytes replaced) or return None when it counts as missing.

    Missing means: absent, not a regular file, larger than 2 MiB, or (with ``root_real``)
    a symlink whose target lies outside that directory, or a file with more than one hard
    link.
    """
    try:
        lst = os.lstat(path)
    except (OSError, ValueError):
        deps[path] = None
        return None
    real = path
    if _stat.S_ISLNK(lst.st_mode):
        real = os.path.realpath(path)
        st = record_stat(path, deps)
        if st is None:
            return None
        if real != path:
            deps[real] = deps[path]
        if root_real is not None and not inside(real, root_real):
            log.warning("ignoring %s: symlink leaves the workspace", path)
            return None
    else:
        st = lst
        deps[path] = (st.st_size, st.st_mtime_ns)
    if _counts_as_missing(path, st, root_real):
        return None
    try:
        with open(real, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def _counts_as_missing(path: str, st: os.stat_result, root_real: str | None) -> bool:
    """``read_text``'s checks on the (followed) stat: not a regular file, too large, or
    (inside a workspace) a hard link."""
    if not _stat.S_ISREG(st.st_mode):
        return True
    if st.st_size > MAX_FILE_BYTES:
        log.warning("ignoring %s: larger than 2 MiB", path)
        return True
    if root_real is not None and st.st_nlink > 1:
        # a hard link may be a second name of any file of the same user (~/.ssh/id_rsa):
        # unlike a symlink, nothing says where else it lives, so it counts as missing
        log.warning(
            "ignoring %s: it is a hard link (%d names); copy the file instead", path, st.st_nlink
        )
        return True
    return False


# --------------------------------------------------------------------------- bootstrap files


@dataclass
class LoadedFile:
    """One Project Context entry and its report data."""

    name: str  # heading (file name or relative path)
    path: str  # absolute path ("" for inline data)
    status: str  # ok | truncated | missing | default
    raw_chars: int
    content: str  # what is injected ("" = nothing)
    front_matter: dict[str, Any] = field(default_factory=dict)

    @property
    def injected_chars(self) -> int:
        return len(self.content)


def bootstrap_names(
    workspace: str, session_kind: str, deps: Deps, *, guest: bool = False
) -> list[str]:
    """The bootstrap file names considered for this session, in load order."""
    if guest:
        return list(GUEST_FILES)
    if session_kind in ("subagent", "cron"):
        return list(MINIMAL_FILES)
    names = list(BOOTSTRAP_ORDER[:7])
    upper = os.path.join(workspace, "MEMORY.md")
    if record_stat(upper, deps) is None:
        lower = os.path.join(workspace, "memory.md")
        if record_stat(lower, deps) is not None:
            names.append("memory.md")
            return names
    names.append("MEMORY.md")
    return names


def load_bootstrap(
    workspace: str,
    *,
    session_kind: str,
    per_file: int,
    total: int,
    skip: frozenset[str] = frozenset(),
    default_soul: str,
    deps: Deps,
    replacement: tuple[str, LoadedFile] | None = None,
    guest: bool = False,
) -> list[LoadedFile]:
    """Load the bootstrap files in order, applying the per-file and total budgets.

    ``skip`` names files that are not read at all (AIEOS replaces IDENTITY/SOUL).
    ``replacement`` = (slot name, entry): inject ``entry`` where that file would be.
    """
    ws_real = os.path.realpath(workspace)
    remaining = total
    stopped = False
    out: list[LoadedFile] = []
    for name in bootstrap_names(workspace, session_kind, deps, guest=guest):
        entries: list[LoadedFile] = []
        if replacement is not None and replacement[0] == name:
            entries.append(replacement[1])
        if name not in skip:
            entries.append(_load_one(workspace, ws_real, name, default_soul, deps))
        for entry in entries:
            if not entry.content:
                out.append(entry)
                continue
            if stopped or remaining < MIN_REMAINING:
                stopped = True
                # Over the total budget: reported, not injected.
                entry.status = "truncated" if entry.status in ("ok", "truncated") else entry.status
                entry.content = ""
                out.append(entry)
                continue
            limit = min(per_file, remaining)
            if len(entry.content) > limit:
                entry.content = truncate(entry.content, limit, entry.name)
                entry.status = "truncated"
            remaining -= len(entry.content)
            out.append(entry)
    return out


def _load_one(workspace: str, ws_real: str, name: str, default_soul: str, deps: Deps) -> LoadedFile:
    path = os.path.join(workspace, name)
    text = read_text(path, deps, root_real=ws_real)
    if text is None:
        if name == "SOUL.md":
            return LoadedFile(name, path, "default", 0, default_soul)
        if name in MISSING_MARKED:
            return LoadedFile(name, path, "missing", 0, f"[MISSING] Expected at: {path}")
        return LoadedFile(name, path, "missing", 0, "")
    fm = parse_front_matter(text) if name in FRONT_MATTER_USED else {}
    content = clean_content(text)
    if not content and name == "SOUL.md":
        return LoadedFile(name, path, "default", len(text), default_soul, fm)
    return LoadedFile(name, path, "ok", len(text), content, fm)


# --------------------------------------------------------------------------- project walk


def _project_candidates(start: str, deps: Deps) -> list[str]:
    """The project file paths ``project_files`` looks at, outermost level first, then
    ``.claude/rules/*.md`` under ``start``."""
    levels: list[str] = []
    cur = start
    while True:
        levels.append(cur)
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    candidates: list[str] = []
    for level in reversed(levels):
        for fname in PROJECT_NAMES:
            candidates.append(os.path.join(level, fname))
    rules_dir = os.path.join(start, ".claude", "rules")
    if record_stat(rules_dir, deps) is not None:
        try:
            names = sorted(n for n in os.listdir(rules_dir) if n.endswith(".md"))
        except OSError:
            names = []
        candidates.extend(os.path.join(rules_dir, n) for n in names)
    return candidates


def project_files(
    project_dir: str, *, per_file: int, exclude_real: set[str], deps: Deps
) -> list[LoadedFile]:
    """CLAUDE.md / CLAUDE.local.md / AGENTS.md from ``project_dir`` up to the root, plus
    ``.claude/rules/*.md`` at the start; outermost first, headed by the relative path."""
    start = os.path.abspath(os.path.expanduser(project_dir))
    out: list[LoadedFile] = []
    for path in _project_candidates(start, deps):
        text = read_text(path, deps)
        if text is None:
            continue
        if os.path.realpath(path) in exclude_real:
            continue
        content = clean_content(text)
        if not content:
            continue
        rel = os.path.relpath(path, start)
        status = "ok"
        if len(content) > per_file:
            content = truncate(content, per_file, rel)
            status = "truncated"
        out.append(LoadedFile(rel, path, status, len(text), content))
    return out
