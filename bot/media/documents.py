"""Text documents and PDFs: inlined as untrusted data, or saved to the inbox when long.

A PDF's text is read in a child process by ``bot.media.pdf``."""

from __future__ import annotations

import re
from pathlib import Path

from bot import fs

TEXT_EXTENSIONS = frozenset(
    {
        ".txt",
        ".md",
        ".markdown",
        ".rst",
        ".csv",
        ".tsv",
        ".json",
        ".jsonl",
        ".ndjson",
        ".yaml",
        ".yml",
        ".toml",
        ".ini",
        ".cfg",
        ".conf",
        ".log",
        ".xml",
        ".html",
        ".htm",
        ".svg",
        ".tex",
        ".org",
        ".srt",
        ".vtt",
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".java",
        ".kt",
        ".go",
        ".rs",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".pl",
        ".lua",
        ".swift",
        ".m",
        ".r",
        ".jl",
        ".scala",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".ps1",
        ".bat",
        ".sql",
        ".graphql",
        ".proto",
        ".css",
        ".scss",
        ".vue",
        ".svelte",
        ".dart",
        ".ex",
        ".exs",
        ".erl",
        ".hs",
        ".ml",
        ".clj",
        ".el",
        ".vim",
        ".nix",
        ".tf",
        ".gradle",
        ".properties",
        ".diff",
        ".patch",
        ".ipynb",
    }
)
TEXT_MIMES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
        "application/x-python",
        "application/csv",
    }
)
MAX_TEXT_BYTES = 8 * 1024 * 1024  # a "text" file larger than this is not read into memory


# ---------------------------------------------------------------------- documents
def is_pdf(data: bytes) -> bool:
    """Whether the bytes (of a file read once through ``bot.fs``) start like a PDF."""
    return data[:1024].lstrip()[:5] == b"%PDF-"


def is_text_like(name: str, mime: str) -> bool:
    mime = (mime or "").split(";")[0].strip().lower()
    suffix = Path(name or "").suffix.lower()
    return (
        mime.startswith("text/")
        or mime in TEXT_MIMES
        or mime.endswith(("+json", "+xml"))
        or suffix in TEXT_EXTENSIONS
    )


def read_text_file(src: bytes | Path) -> str | None:
    """The text of a text-like file (UTF-8, UTF-16 with a BOM, else a detected charset);
    None when it looks binary or is larger than ``MAX_TEXT_BYTES``.  ``src`` is the file's
    bytes, read once by the caller through ``bot.fs``, or a file read here (no link
    followed)."""
    if isinstance(src, bytes):
        raw = src
    else:
        try:
            raw = fs.read_in(src, MAX_TEXT_BYTES)
        except OSError:  # FileTooLarge included
            return None
    if len(raw) > MAX_TEXT_BYTES:
        return None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", "replace")
    if b"\x00" in raw[:8192]:
        return None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(raw[:200_000]).best()
        if best is not None and best.encoding:
            return raw.decode(best.encoding, "replace")
    except Exception:
        pass
    return raw.decode("cp1252", "replace")


_SAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def _inbox_name(name: str) -> str:
    """A plain file name for ``name`` (no directory, no odd characters)."""
    return _SAFE.sub("_", Path(name).name).strip(" ._")[:100] or "file"


def save_to_inbox(root: Path, name: str, data: bytes) -> Path:
    """Write ``data`` as ``<root>/inbox/<name>`` (a fresh name when taken), 0600, through
    ``root``'s handle with no symbolic link followed (``bot.fs``): a guest's
    ``inbox`` turned into a link makes the save fail (``OSError``), not write elsewhere."""
    return fs.write_under(root, Path("inbox") / _inbox_name(name), data, fresh=True)
