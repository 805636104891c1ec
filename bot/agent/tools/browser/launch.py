"""Starting and ending the browser's Chromium: which executable, which flags, which profile, and
killing its whole process group (Playwright starts Chromium as the leader of its own group).

Chromium is always the system's (``[tools.browser].executable``); ``playwright install`` is
never run.  Every connection goes through the given loopback proxy: ``<-loopback>`` removes
Chromium's built-in loopback bypass, so even ``127.0.0.1`` is asked of the proxy.

Chromium's own sandbox (its renderers in namespaces of their own, seccomp) stays on unless the
daemon runs as root, where Chromium refuses to start with it: only then is ``--no-sandbox``
passed (``chromium_args``), and the start-up log line and ``chela doctor`` say so.  Playwright
is launched with ``chromium_sandbox=True`` so that it adds no ``--no-sandbox`` of its own."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

from bot import fs


def find_executable(configured: str) -> str | None:
    """The configured path, else /usr/bin/chromium, else chromium / chromium-browser on PATH."""
    if configured:
        path = shutil.which(configured) or configured
        return path if os.access(path, os.X_OK) else None
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def running_as_root() -> bool:
    return os.geteuid() == 0


def sandbox_note(as_root: bool) -> str:
    """How Chromium is confined, for the log line and ``chela doctor``."""
    if as_root:
        return "Chromium's sandbox is off: the daemon runs as root, where it cannot start"
    return "Chromium runs in its own sandbox"


def chromium_args(proxy_port: int, memory_mb: int, *, as_root: bool) -> list[str]:
    """Chromium's flags; ``--no-sandbox`` only when ``as_root`` (``running_as_root()``)."""
    return [
        *(["--no-sandbox"] if as_root else []),
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        "--proxy-bypass-list=<-loopback>",
        # no QUIC / DNS of its own: everything is a proxied TCP connection
        "--disable-quic",
        "--disable-features=DnsOverHttps,AsyncDns,AutofillServerCommunication,"
        "OptimizationHints,MediaRouter,Translate,InterestFeedContentSuggestions",
        "--disable-client-side-phishing-detection",
        "--disable-domain-reliability",
        "--disable-breakpad",
        "--no-pings",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-dev-shm-usage",
        f"--js-flags=--max-old-space-size={memory_mb}",
    ]


# what Chromium keeps of the daemon's environment: never its keys or tokens
_KEPT_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XDG_RUNTIME_DIR",
)


def chromium_env(profile: Path) -> dict[str, str | float | bool]:
    """Chromium's environment: a few plain variables of the daemon's (none of its secrets),
    and ``XDG_CONFIG_HOME`` in the profile, so that its crash reports (which can hold page
    memory) are kept in the profile and never in the owner's own ``~/.config/chromium``."""
    env: dict[str, str | float | bool] = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env["XDG_CONFIG_HOME"] = str(profile)
    return env


def profile_dir(state_dir: Path, agent_id: str) -> Path:
    """``<state_dir>/browser/profile-<agent>``, private (0700)."""
    root = fs.private_dir(Path(state_dir) / "browser")
    return fs.private_dir(root / f"profile-{agent_id}")


def browser_pid(profile: Path) -> int | None:
    """The live Chromium running on this profile: Chromium's ``SingletonLock`` link in the
    profile names ``<host>-<pid>``; the pid counts only while it is still a Chromium."""
    try:
        pid = int(os.readlink(profile / "SingletonLock").rsplit("-", 1)[1])
        exe = os.readlink(f"/proc/{pid}/exe")
    except (OSError, ValueError, IndexError):
        return None
    return pid if "chrom" in os.path.basename(exe) else None


def kill_groups(profile: Path) -> int:
    """SIGKILL the process group of this profile's Chromium (Playwright makes the browser the
    leader of its own group, so renderers and helpers go with it); how many groups (0 or 1)."""
    pid = browser_pid(profile)
    if pid is None:
        return 0
    try:
        pgid = os.getpgid(pid)
        if pgid == os.getpgrp():  # never our own group
            os.kill(pid, signal.SIGKILL)
        else:
            os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return 0
    return 1
