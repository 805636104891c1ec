"""exec: run a command in the turn's file root under the configured policy.

* ``deny``      - never runs anything.
* ``allowlist`` - no shell: the command is split with shlex, shell operators are refused and
  the program (argv[0]) must be on the allow list; run without a shell.
* ``ask``       - allow-listed commands run as in ``allowlist``; any other command is held
  and the owner is asked (``ctx.request_approval``).  Approved: it runs once, as a shell
  command.  Denied, expired (no answer in time) or no way to ask: refused, and the tool
  result says which.
* ``full``      - the command goes to the shell (``/bin/sh -c``) as written.

With ``ExecPolicy.sandbox`` (the default) every command, in every mode, runs inside the
bubblewrap sandbox of :mod:`.sandbox`: the file root is the only writable directory, the
state dir and ``$HOME`` are invisible, ``/proc`` is private and there is no network unless
``ExecPolicy.network``.  When the host cannot sandbox (no bwrap, no user namespaces) exec
refuses and says how to fix it.  ``sandbox=False`` is the owner's explicit opt-out.

Each command runs in its own process group; on timeout the whole group is killed (through
bwrap: the group holds bwrap, whose sandbox dies with it).  Its environment is the
daemon's without the secrets: no variable the config names, none holding a secret value.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import signal
import time

from collections.abc import Iterable

from bot.config.env_values import Secrets

from . import sandbox
from .base import Tool, ToolContext, ToolError, arg_str, schema
from channels.best_effort import best_effort
import contextlib

log = logging.getLogger(__name__)

# Operators and expansions a shell would interpret; refused in allowlist mode.
_META = (";", "|", "&", "`", "$(", "${", ">", "<", "\n", "\r")
_READ_CHUNK = 65536


def check_allowlisted(command: str, allow: list[str] | tuple[str, ...]) -> list[str]:
    """Return argv for an allowlisted command, or raise ToolError explaining the refusal."""
    for tok in _META:
        if tok in command:
            shown = {"\n": "newline", "\r": "carriage return"}.get(tok, tok)
            raise ToolError(
                f"command refused: shell operator {shown!r} is not allowed in allowlist mode "
                "(commands run without a shell; run one program at a time)"
            )
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ToolError(f"command refused: cannot parse it ({e})") from None
    if not argv:
        raise ToolError("command is empty")
    prog = argv[0]
    base = os.path.basename(prog)
    allowed = {os.path.basename(a) for a in allow if a}
    if base not in allowed:
        listed = ", ".join(sorted(allowed)) or "(none)"
        raise ToolError(
            f"command refused: '{base}' is not on the exec allow list. Allowed programs: {listed}"
        )
    if "/" in prog:
        # a path must be the same program the allow list means, not e.g. ./cat in the workspace
        found = shutil.which(base)
        if not found or os.path.realpath(found) != os.path.realpath(prog):
            raise ToolError(
                f"command refused: use the plain program name '{base}' instead of a path"
            )
    return argv


def child_env(secrets: Iterable[str]) -> dict[str, str]:
    """The daemon's environment without the secrets: no variable the config names
    (``*_env`` keys, ``${VAR}`` references, ``*_API_KEY``), none whose value is a secret.

    Output is scrubbed of secret values anyway, but a command could still send one
    somewhere (``curl -d "$GITHUB_TOKEN" ...``); a child never gets them at all.
    ``secrets`` is the registry of bot/config/env_values.py (``ToolContext.secrets``); a plain
    list of values filters by value only."""
    registry = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
    return registry.child_env()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


async def _spawn(
    argv: list[str] | None, shell_command: str | None, *, cwd: str, env: dict[str, str] | None
) -> asyncio.subprocess.Process:
    """Start the command in a process group of its own (stdout and stderr in one pipe).

    A cancel while the process starts (it runs already, asyncio still connects its pipes)
    would kill only the direct child (the shell, or bwrap) and leave the rest running: the
    start is shielded, and a cancelled one is killed, as a group, once it is there."""
    kw: dict = dict(
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    if argv is not None:
        starting = asyncio.ensure_future(asyncio.create_subprocess_exec(*argv, **kw))
    else:
        assert shell_command is not None
        starting = asyncio.ensure_future(asyncio.create_subprocess_shell(shell_command, **kw))
    try:
        return await asyncio.shield(starting)
    except asyncio.CancelledError:
        with best_effort(log, "stopping a command cancelled while it started"):
            proc = await starting
            _kill_group(proc)
            await asyncio.wait_for(proc.wait(), 2.0)
        raise


async def run_command(
    argv: list[str] | None,
    shell_command: str | None,
    *,
    cwd: str,
    timeout: float,
    max_output: int,
    env: dict[str, str] | None = None,
) -> tuple[int | None, str, int, bool]:
    """Run a command; return (exit code or None, output (capped), total output bytes, timed_out)."""
    proc = await _spawn(argv, shell_command, cwd=cwd, env=env)
    buf = bytearray()
    total = 0

    async def pump() -> None:
        nonlocal total
        assert proc.stdout is not None
        while True:
            chunk = await proc.stdout.read(_READ_CHUNK)
            if not chunk:
                break
            total += len(chunk)
            room = max_output - len(buf)
            if room > 0:
                buf.extend(chunk[:room])

    timed_out = False
    reader = asyncio.ensure_future(pump())
    try:
        await asyncio.wait_for(asyncio.shield(reader), timeout)
        await asyncio.wait_for(proc.wait(), timeout=max(1.0, timeout))
    except TimeoutError:
        timed_out = True
        _kill_group(proc)
    except asyncio.CancelledError:
        _kill_group(proc)
        reader.cancel()
        # reap it: no zombie left, and its transport closes while the loop still runs
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 2.0)
        raise
    if timed_out:
        try:
            await asyncio.wait_for(reader, 2.0)
        except (TimeoutError, asyncio.CancelledError):
            reader.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 2.0)
    out = buf.decode("utf-8", errors="replace")
    return (None if timed_out else proc.returncode), out, total, timed_out


_APPROVAL_REFUSALS = {
    "denied": "command refused: the owner denied it; it was not run",
    "expired": "command refused: the owner did not answer in time (10 minutes); it was not run",
    "unavailable": (
        "command refused: it is not on the exec allow list and needs the owner's approval, "
        "but approval cannot be asked for here"
    ),
}


async def _ask(ctx: ToolContext, command: str, why: str) -> None:
    """Hold a command that is not allow-listed until the owner answers; raise unless approved."""
    if ctx.request_approval is None:
        raise ToolError(f"{_APPROVAL_REFUSALS['unavailable']} ({why})")
    answer = await ctx.request_approval(command)
    if answer == "approved":
        return
    raise ToolError(
        _APPROVAL_REFUSALS.get(answer, f"command refused: unexpected approval answer {answer!r}")
    )


async def _check_policy(policy) -> None:
    """Refuse before anything runs: exec denied, an unknown policy, a sandbox that cannot start."""
    if policy.security == "deny":
        raise ToolError('running commands is disabled here (tools.exec.security = "deny")')
    if policy.security not in ("allowlist", "ask", "full"):
        raise ToolError(f"unknown exec policy {policy.security!r}")
    if policy.sandbox:
        # before asking anyone: an approved command could not run anyway
        status = await sandbox.probe_async()
        if not status.ok:
            raise ToolError(f"cannot run commands: {status.message()}")


async def _admit(ctx: ToolContext, command: str) -> tuple[list[str] | None, str | None]:
    """What runs: an allow-listed argv, or (security "full", or "ask" once the owner
    approved) the command line as written for the shell."""
    policy = ctx.exec_policy
    if policy.security == "allowlist":
        return check_allowlisted(command, policy.allow), None
    if policy.security == "ask":
        try:
            return check_allowlisted(command, policy.allow), None
        except ToolError as e:
            await _ask(ctx, command, str(e).removeprefix("command refused: "))
            return None, command  # approved: runs once, as written
    return None, command


def _sandboxed(
    policy, argv: list[str] | None, shell_cmd: str | None, root: str
) -> tuple[list[str] | None, str | None]:
    """The command inside the OS sandbox when the policy asks for it."""
    if not policy.sandbox:
        return argv, shell_cmd
    try:
        wrapped = sandbox.wrap(
            argv if argv is not None else shell_cmd or "",
            file_root=root,
            hidden=tuple(policy.hidden),
            network=policy.network,
        )
    except (ValueError, RuntimeError) as e:
        raise ToolError(f"cannot run commands: {e}") from None
    return wrapped, None


def _report(
    policy, code: int | None, out: str, total: int, timed_out: bool, timeout: float, elapsed: float
) -> str:
    """The tool's answer: the output (capped), then the exit code, or the timeout."""
    max_output = max(1000, int(policy.max_output))
    if policy.sandbox and code == 1 and out.startswith("bwrap: "):
        # bwrap itself failed (e.g. execvp of a program that is not visible in the sandbox)
        first = out.splitlines()[0].removeprefix("bwrap: ")
        raise ToolError(f"the sandbox could not start the command: {first}")
    body = out.rstrip("\n")
    cut = f"\n[... output cut at {max_output} bytes of {total}]" if total > max_output else ""
    if timed_out:
        head = f"Error: the command timed out after {timeout:g}s and was killed."
        return head + (f" Output so far:\n{body}{cut}" if body else "")
    return f"{body or '(no output)'}{cut}\n[exit code {code}; {elapsed:.1f}s]"


async def _exec(ctx: ToolContext, args: dict) -> str:
    command = arg_str(args, "command").strip()
    if not command:
        raise ToolError("command is empty")
    policy = ctx.exec_policy
    await _check_policy(policy)
    argv, shell_cmd = await _admit(ctx, command)
    env = child_env(ctx.secrets)
    try:
        root = sandbox.prepare_root(ctx.file_root)
    except OSError as e:
        raise ToolError(
            f"cannot prepare the working directory {ctx.file_root}: {e.strerror or e}"
        ) from None
    if argv is not None and shutil.which(argv[0], path=env.get("PATH")) is None:
        raise ToolError(f"program not found: {argv[0]}")
    argv, shell_cmd = _sandboxed(policy, argv, shell_cmd, root)
    timeout = (
        float(policy.timeout_seconds)
        if policy.timeout_seconds and policy.timeout_seconds > 0
        else 60.0
    )
    started = time.monotonic()
    try:
        code, out, total, timed_out = await run_command(
            argv,
            shell_cmd,
            cwd=root,
            timeout=timeout,
            max_output=max(1000, int(policy.max_output)),
            env=env,
        )
    except FileNotFoundError:
        raise ToolError(f"program not found: {argv[0] if argv else command.split()[0]}") from None
    except PermissionError as e:
        raise ToolError(f"cannot run the command: {e.strerror or e}") from None
    return _report(policy, code, out, total, timed_out, timeout, time.monotonic() - started)


EXEC = Tool(
    "exec",
    "Run a command in the workspace directory and return its output and exit code.",
    schema({"command": {"type": "string", "description": "The command line to run."}}, ["command"]),
    _exec,
)
