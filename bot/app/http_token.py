"""The bearer token of the HTTP channel.

The HTTP API always needs a token.  When ``channels.http.token_env`` names a variable, the
token is its value, and an unset variable is a config error (never an open door).  When it
is empty, a random token is generated once into ``<state_dir>/http-token``: the file is
0600 and its directory 0700 whatever the umask, it is created exclusively (two processes
starting at once end up with the same token), and later starts reuse it.  A file that is
empty or unreadable as a token is replaced by a fresh one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
from pathlib import Path

from bot.config import Config, ConfigError

log = logging.getLogger("chela.http")

MIN_TOKEN_LEN = 16


def ensure_http_token(cfg: Config) -> str:
    """The token the HTTP channel requires; created on first use when none is configured.
    Raises ``ConfigError`` when the configured variable is unset or the file cannot be made."""
    env = cfg.channels.http.token_env
    if env:
        value = cfg.secret(env).strip()
        if not value:
            raise ConfigError(
                f"channels.http.token_env: environment variable {env} is unset or empty; set it, or set "
                f'token_env = "" to use a token generated in {cfg.http_token_path}'
            )
        return value
    try:
        return _read_or_create(cfg.http_token_path)
    except OSError as e:
        raise ConfigError(
            f"channels.http: cannot read or create the token file {cfg.http_token_path}: "
            f"{e.strerror or e}"
        ) from None


def describe_http_token(cfg: Config) -> str:
    """One line for ``chela check``: where the token comes from (never the token itself)."""
    env = cfg.channels.http.token_env
    if env:
        state = "set" if cfg.secret(env).strip() else "MISSING: the HTTP channel will not start"
        return f"http token: environment variable {env} ({state})"
    path = cfg.http_token_path
    try:
        state = "exists" if _valid(_read(path)) else "generated on first start"
    except OSError as e:
        state = f"unreadable: {e.strerror or e}"
    return f"http token: file {path} ({state}); send it as 'Authorization: Bearer <token>'"


# ---------------------------------------------------------------------------- the file
def _valid(token: str | None) -> bool:
    return token is not None and len(token) >= MIN_TOKEN_LEN and all("!" <= c <= "~" for c in token)


def _read(path: Path) -> str | None:
    """The stripped contents; None when the file is missing, "" when it is not text (or a
    symlink, which this private file never is).  Other errors (no permission) propagate."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return ""
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(4096)
    try:
        return data.decode("ascii").strip()
    except UnicodeDecodeError:
        return ""


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        os.chmod(path, 0o700)


def _read_or_create(path: Path) -> str:
    _private_dir(path.parent)
    for _ in range(5):
        existing = _read(path)
        if _valid(existing):
            if path.stat().st_mode & 0o777 != 0o600:
                os.chmod(path, 0o600)
            return existing  # type: ignore[return-value]
        if existing is not None:
            log.warning("the HTTP token file %s is empty or broken; writing a new token", path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        token = secrets.token_urlsafe(32)
        if _create_exclusive(path, token):
            log.info("generated an HTTP token in %s", path)
            return token
        # another process created it first: read theirs
    raise OSError(f"{path} keeps changing under us")


def _create_exclusive(path: Path, token: str) -> bool:
    """Write ``token`` to ``path`` with mode 0600 unless the file exists; False if it does.

    The token is written to a private temporary file and hard-linked into place, so a
    concurrent reader never sees a half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)  # the umask may have taken bits off (or left too many)
        os.write(fd, (token + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except OSError:
        # no hard links on this file system: an exclusive create of the real name instead
        try:
            fd = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
            )
        except FileExistsError:
            return False
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (token + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
