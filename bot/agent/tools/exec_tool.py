"""exec: run a command in the workspace under the configured policy.

* ``deny``      - never runs anything.
* ``allowlist`` - no shell: the command is split with shlex, shell operators are refused and
  the program (argv[0]) must be on the allow list; run with ``create_subprocess_exec``.
* ``full``      - the command goes to the shell as written.

Each command runs in its own process group; on timeout the whole group is killed.  Its
environment is the daemon's without the variables holding a configured secret.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import time

from .base import Tool, ToolContext, ToolError, arg_str, schema

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
        raise ToolError(f"command refused: '{base}' is not on the exec allow list. Allowed programs: {listed}")
    if "/" in prog:
        # a path must be the same program the allow list means, not e.g. ./cat in the workspace
        found = shutil.which(base)
        if not found or os.path.realpath(found) != os.path.realpath(prog):
            raise ToolError(f"command refused: use the plain program name '{base}' instead of a path")
    return argv


def child_env(secrets: tuple[str, ...] | list[str]) -> dict[str, str]:
    """The daemon's environment without the variables that hold a configured secret.

    Output is scrubbed of secret values anyway, but a command could still send one
    somewhere (``curl -d "$TELEGRAM_BOT_TOKEN" ...``); a child never gets them at all.
    """
    hidden = {v for v in secrets if v}
    return {k: v for k, v in os.environ.items() if v not in hidden}


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


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
    kwargs = dict(
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    if argv is not None:
        proc = await asyncio.create_subprocess_exec(*argv, **kwargs)
    else:
        assert shell_command is not None
        proc = await asyncio.create_subprocess_shell(shell_command, **kwargs)

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
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(proc)
    except asyncio.CancelledError:
        _kill_group(proc)
        reader.cancel()
        raise
    if timed_out:
        try:
            await asyncio.wait_for(reader, 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            reader.cancel()
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except asyncio.TimeoutError:
            pass
    out = buf.decode("utf-8", errors="replace")
    return (None if timed_out else proc.returncode), out, total, timed_out


async def _exec(ctx: ToolContext, args: dict) -> str:
    command = arg_str(args, "command").strip()
    if not command:
        raise ToolError("command is empty")
    policy = ctx.exec_policy
    if policy.security == "deny":
        raise ToolError("running commands is disabled here (tools.exec.security = \"deny\")")
    if policy.security == "allowlist":
        argv: list[str] | None = check_allowlisted(command, policy.allow)
        shell_cmd = None
    elif policy.security == "full":
        argv, shell_cmd = None, command
    else:
        raise ToolError(f"unknown exec policy {policy.security!r}")

    timeout = float(policy.timeout_seconds) if policy.timeout_seconds and policy.timeout_seconds > 0 else 60.0
    max_output = max(1000, int(policy.max_output))
    started = time.monotonic()
    try:
        code, out, total, timed_out = await run_command(
            argv, shell_cmd, cwd=str(ctx.file_root), timeout=timeout, max_output=max_output,
            env=child_env(ctx.secrets),
        )
    except FileNotFoundError:
        raise ToolError(f"program not found: {argv[0] if argv else command.split()[0]}") from None
    except PermissionError as e:
        raise ToolError(f"cannot run the command: {e.strerror or e}") from None
    elapsed = time.monotonic() - started

    body = out.rstrip("\n")
    cut = f"\n[... output cut at {max_output} bytes of {total}]" if total > max_output else ""
    if timed_out:
        head = f"Error: the command timed out after {timeout:g}s and was killed."
        return head + (f" Output so far:\n{body}{cut}" if body else "")
    return f"{body or '(no output)'}{cut}\n[exit code {code}; {elapsed:.1f}s]"


EXEC = Tool(
    "exec",
    "Run a command in the workspace directory and return its output and exit code.",
    schema({"command": {"type": "string", "description": "The command line to run."}}, ["command"]),
    _exec,
)
