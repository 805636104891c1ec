"""The OS sandbox the ``exec`` tool runs commands in, built on bubblewrap.

    status = await probe_async()          # cached; status.ok, status.detail, status.fix
    argv = wrap(["ls", "-l"], file_root=ws, hidden=(state_dir,), network=False)

Mount layout inside the sandbox (later mounts cover earlier ones):

* ``/`` read-only, a fresh minimal ``/dev``, a ``/proc`` that shows only the sandbox's own
  processes (new pid namespace), an empty ``/tmp``;
* an empty, read-only tmpfs over the daemon's ``$HOME``, ``/root``, ``/home``, ``/run``
  (sockets such as docker.sock and D-Bus) and every ``hidden`` path (the state dir) - they
  look empty (a hidden directory that contains the file root stays writable but empty);
* the turn's file root bound read-write (the only writable place that outlives the command).

The hiding tmpfs mounts and the file-root bind are applied parents-first, so a file root
inside the state dir or ``$HOME`` is still reachable, and a hidden path inside the file
root stays hidden.  All namespaces are unshared (user, mount, pid, ipc, uts, cgroup and -
unless ``network`` - net), every capability is dropped (so a root daemon's child cannot
unmount the hiding tmpfs), the child gets its own session (no terminal injection) and dies
with the daemon's bwrap process.

``CHELA_BWRAP`` overrides which bwrap binary is used (tests point it at a missing or a
failing one).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ENV_OVERRIDE = "CHELA_BWRAP"
_PROBE_TIMEOUT = 10.0

# Directories hidden behind an empty tmpfs on every host, besides $HOME and ``hidden``.
_ALWAYS_HIDDEN = ("/root", "/home", "/run")

_INSTALL_FIX = (
    "install bubblewrap: apt-get install bubblewrap (dnf/pacman/apk: package 'bubblewrap')"
)
_OFF_HINT = 'or set tools.exec.sandbox = "off" to run commands unsandboxed (not recommended)'


@dataclass(frozen=True)
class SandboxStatus:
    ok: bool
    backend: str  # "bwrap", or "" when no sandbox can be used
    detail: str  # what was found, for people
    fix: str = ""  # how to make it work, when it does not

    def message(self) -> str:
        """One line for a refusal: what is wrong and how to fix it."""
        return f"{self.detail}; {self.fix}" if self.fix else self.detail


_cache: dict[str, SandboxStatus] = {}


def _locate() -> str | None:
    override = os.environ.get(ENV_OVERRIDE, "").strip()
    name = override or "bwrap"
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name)


def _cache_key() -> str:
    return os.environ.get(ENV_OVERRIDE, "") + "\0" + os.environ.get("PATH", "")


def _trial_argv(bwrap: str) -> list[str]:
    # the same namespace and mount kinds a real command uses, around /bin/true
    return [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--",
        "/bin/true",
    ]


def _read_sysctl(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _failure(bwrap: str, rc: int | None, err: str) -> SandboxStatus:
    err = " ".join(err.split())[:300] or f"exit code {rc}"
    detail = f"the exec sandbox does not work on this host ({bwrap} failed: {err})"
    if _read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        fix = (
            "this kernel does not allow unprivileged user namespaces: "
            f"sysctl kernel.unprivileged_userns_clone=1, {_OFF_HINT}"
        )
    elif _read_sysctl("/proc/sys/user/max_user_namespaces") == "0":
        fix = f"user namespaces are disabled: sysctl user.max_user_namespaces=15000, {_OFF_HINT}"
    elif _read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        fix = (
            "AppArmor blocks unprivileged user namespaces: "
            "sysctl kernel.apparmor_restrict_unprivileged_userns=0 (or give bwrap an AppArmor "
            f"profile that allows userns), {_OFF_HINT}"
        )
    else:
        fix = (
            "user namespaces may be disabled (check sysctl kernel.unprivileged_userns_clone "
            "and user.max_user_namespaces; containers may need --privileged or a seccomp "
            f"profile that allows unshare), {_OFF_HINT}"
        )
    return SandboxStatus(False, "", detail, fix)


def _missing() -> SandboxStatus:
    override = os.environ.get(ENV_OVERRIDE, "").strip()
    what = (
        f"{ENV_OVERRIDE}={override!r} is not an executable"
        if override
        else "bwrap (bubblewrap) is not installed"
    )
    return SandboxStatus(
        False, "", f"the exec sandbox is unavailable: {what}", f"{_INSTALL_FIX}, {_OFF_HINT}"
    )


def probe() -> SandboxStatus:
    """Whether commands can be sandboxed here.  Runs bwrap once per process (per binary)."""
    key = _cache_key()
    hit = _cache.get(key)
    if hit is not None:
        return hit
    bwrap = _locate()
    if bwrap is None:
        status = _missing()
    else:
        try:
            r = subprocess.run(  # noqa: PLW1510 - the return code is the answer
                _trial_argv(bwrap),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT,
                start_new_session=True,
            )
            status = (
                _ok(bwrap)
                if r.returncode == 0
                else _failure(bwrap, r.returncode, r.stderr.decode(errors="replace"))
            )
        except subprocess.TimeoutExpired:
            status = _failure(bwrap, None, "timed out")
        except OSError as e:
            status = _failure(bwrap, None, str(e))
    _cache[key] = status
    return status


async def probe_async() -> SandboxStatus:
    """:func:`probe` for async code: the one real trial run happens in a worker thread."""
    hit = _cache.get(_cache_key())
    return hit if hit is not None else await asyncio.to_thread(probe)


def _ok(bwrap: str) -> SandboxStatus:
    return SandboxStatus(True, "bwrap", f"bubblewrap sandbox ({bwrap})")


def reset_cache() -> None:
    """Forget probe results (tests)."""
    _cache.clear()


def bwrap_path() -> str:
    path = _locate()
    if path is None:
        raise RuntimeError(_missing().message())
    return path


def prepare_root(file_root: str | os.PathLike) -> str:
    """The real path of the file root, created (mode 0700) when it does not exist yet."""
    p = Path(file_root)
    if not p.exists():
        p.mkdir(mode=0o700, parents=True, exist_ok=True)
    return os.path.realpath(p)


def _depth(path: str) -> int:
    return 0 if path == "/" else path.rstrip("/").count("/")


def _hidden_paths(hidden: tuple[str, ...] | list[str]) -> set[str]:
    """$HOME, the always-hidden paths and ``hidden``, as they are spelled and as they resolve:
    the existing ones (a directory gets an empty tmpfs, a file an empty file)."""
    to_hide: set[str] = set()
    for p in (os.environ.get("HOME", ""), *_ALWAYS_HIDDEN, *hidden):
        if not p or not os.path.isabs(p):
            continue
        for candidate in {os.path.abspath(p), os.path.realpath(p)}:
            if candidate != "/" and os.path.lexists(candidate):
                to_hide.add(candidate)
    return to_hide


def _mounts(root: str, to_hide: set[str], network: bool) -> list[str]:
    """The mount arguments, parents first; at equal paths the bind wins (it comes last)."""
    mounts: list[tuple[int, int, list[str]]] = []  # (depth, order within the depth, args)
    for p in sorted(to_hide):
        if p == root:
            continue
        if os.path.isdir(p):
            mounts.append((_depth(p), 0, ["--tmpfs", p]))
        else:
            mounts.append((_depth(p), 0, ["--ro-bind", "/dev/null", p]))
    mounts.append((_depth(root), 1, ["--bind", root, root]))
    if network:
        # DNS: /etc/resolv.conf often points into /run (systemd-resolved), which is hidden
        resolv = os.path.realpath("/etc/resolv.conf")
        if (
            resolv != "/etc/resolv.conf"
            and os.path.isfile(resolv)
            and any(resolv.startswith(h + "/") for h in to_hide)
        ):
            mounts.append((_depth(resolv), 2, ["--ro-bind", resolv, resolv]))
    mounts.sort(key=lambda m: (m[0], m[1]))
    return [a for _, _, args in mounts for a in args]


def _remount_ro(root: str, to_hide: set[str]) -> list[str]:
    """The hiding tmpfs mounts become read-only once everything is mounted (a write there
    fails instead of vanishing) - except one that holds the file root, which stays an
    empty scratch: a read-only parent must never make the file root read-only."""
    out: list[str] = []
    for p in sorted(to_hide):
        if os.path.isdir(p) and p != root and not root.startswith(p + "/"):
            out += ["--remount-ro", p]
    return out


def wrap(
    command: list[str] | str,
    *,
    file_root: str | os.PathLike,
    hidden: tuple[str, ...] | list[str] = (),
    network: bool = False,
    cwd: str | os.PathLike | None = None,
    bwrap: str | None = None,
) -> list[str]:
    """The bwrap argv that runs ``command`` (an argv list, or a shell string for ``/bin/sh -c``)
    with ``file_root`` as the only writable directory.  ``cwd`` (default: the file root) must
    be inside the file root."""
    root = os.path.realpath(file_root)
    if root == "/":
        raise ValueError("the sandbox's file root cannot be /")
    workdir = os.path.realpath(cwd) if cwd is not None else root
    if workdir != root and not workdir.startswith(root + "/"):
        workdir = root
    to_hide = _hidden_paths(hidden)
    argv = [bwrap or bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--tmpfs", "/tmp", *_mounts(root, to_hide, network), *_remount_ro(root, to_hide)]
    argv += ["--unshare-all", *(["--share-net"] if network else [])]
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", workdir]
    argv += ["--setenv", "HOME", root, "--setenv", "TMPDIR", "/tmp", "--"]
    if isinstance(command, str):
        return [*argv, "/bin/sh", "-c", command]
    return [*argv, *command]
