"""The exec sandbox (SPEC §9.3): attacks through the real ``exec`` tool, each with its twin.

Sandbox tests skip with the probe's message when bubblewrap is absent or cannot work on this
machine - except under ``CI=true``, where they fail (CI installs bubblewrap).
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.agent.tools import ExecPolicy, ToolContext, build_registry
from bot.agent.tools import sandbox

SECRET = "SECRET-state-7f3a91"


def require_sandbox() -> None:
    """Skip (fail under CI=true) unless commands can be sandboxed on this machine."""
    status = sandbox.probe()
    if status.ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must be able to sandbox exec: {status.message()}")
    pytest.skip(status.message())


@pytest.fixture
def sandbox_ok():
    require_sandbox()


def _hidden_prefixes() -> tuple[str, ...]:
    home = os.environ.get("HOME", "")
    return tuple(p for p in (home, "/root", "/home", "/tmp", "/run") if p and p != "/")


def sandbox_python() -> str:
    """A python3 the sandbox can see: this interpreter unless it lives under $HOME or /tmp
    (pyenv, a venv in the home dir), else the system one."""
    for cand in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.isfile(cand):
            continue
        if any(cand == p or cand.startswith(p + "/") for p in _hidden_prefixes()):
            continue
        return cand
    return "python3"


PY = sandbox_python()


@pytest.fixture
def reg():
    return build_registry(["exec"])


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A workspace, a state dir holding a fake database with a secret, and a fake $HOME."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    (ws / "notes.txt").write_text("buy tea\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "chela.sqlite3").write_text(f"SQLite format 3\x00 token={SECRET}\n")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY----- {SECRET}-ssh\n")
    monkeypatch.setenv("HOME", str(home))
    return ws, state, home


def ctx(ws: Path, state: Path | None = None, security: str = "full", allow=(), **kw) -> ToolContext:
    pol = dict(
        timeout_seconds=kw.pop("timeout", 10),
        sandbox=kw.pop("sandbox", True),
        network=kw.pop("network", False),
        hidden=(str(state),) if state else (),
    )
    return ToolContext(file_root=ws, exec_policy=ExecPolicy(security, list(allow), **pol), **kw)


def ok(out: str) -> bool:
    return "[exit code 0;" in out


# --------------------------------------------------------------------------------------
# the probe and the argv


def test_probe_finds_bwrap(sandbox_ok):
    status = sandbox.probe()
    assert status.ok and status.backend == "bwrap"


async def test_probe_async_matches_probe(sandbox_ok):
    sandbox.reset_cache()
    status = await sandbox.probe_async()
    assert status.ok and status is sandbox.probe()


def test_probe_missing_bwrap(monkeypatch, tmp_path):
    monkeypatch.setenv(sandbox.ENV_OVERRIDE, str(tmp_path / "no-such-bwrap"))
    status = sandbox.probe()
    assert not status.ok and status.backend == ""
    assert "apt-get install bubblewrap" in status.message()
    assert 'sandbox = "off"' in status.message()


def test_probe_failing_bwrap(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.ENV_OVERRIDE, str(fake))
    status = sandbox.probe()
    assert not status.ok
    assert "uid map: Permission denied" in status.detail
    assert "namespaces" in status.fix and 'sandbox = "off"' in status.fix


def test_wrap_layout(tmp_path, monkeypatch):
    home = tmp_path / "home"
    state = home / ".chela"
    guest = state / "guests" / "g1"
    guest.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    argv = sandbox.wrap(
        "echo hi", file_root=guest, hidden=(str(state),), network=False, bwrap="/x/bwrap"
    )
    assert argv[0] == "/x/bwrap" and argv[-3:] == ["/bin/sh", "-c", "echo hi"]
    i_home = argv.index(str(home))
    i_state = argv.index(str(state))
    i_bind = argv.index("--bind")
    assert argv[i_home - 1] == "--tmpfs" and argv[i_state - 1] == "--tmpfs"
    assert i_home < i_state < i_bind  # parents first: the file root is bound last
    assert argv[i_bind + 1 : i_bind + 3] == [str(guest), str(guest)]
    # the hiding tmpfs above the file root stays writable; /root is made read-only
    assert argv[argv.index("/root", argv.index("--remount-ro")) - 1 :][:2] == [
        "--remount-ro",
        "/root",
    ]
    assert ["--remount-ro", str(state)] not in [argv[i : i + 2] for i in range(len(argv))]
    assert "--unshare-all" in argv and "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--die-with-parent" in argv and "--new-session" in argv
    assert argv[argv.index("--chdir") + 1] == str(guest)
    net = sandbox.wrap(["ls"], file_root=guest, network=True, bwrap="/x/bwrap")
    assert "--share-net" in net and net[-1] == "ls"


def test_wrap_hidden_inside_file_root_stays_hidden(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    ws = tmp_path / "ws"
    (ws / "private").mkdir(parents=True)
    argv = sandbox.wrap(["ls"], file_root=ws, hidden=(str(ws / "private"),), bwrap="bwrap")
    assert argv.index("--bind") < argv.index(str(ws / "private"))


# --------------------------------------------------------------------------------------
# the daemon's environment via /proc


_ENV_DUMP = (
    "import glob\n"
    "for p in ['/proc/%d/environ' % PID, '/proc/%d/environ' % HELPER] + glob.glob('/proc/*/environ'):\n"
    "    try:\n"
    "        print(p, open(p, 'rb').read().replace(b'\\0', b' ').decode(errors='replace'))\n"
    "    except OSError as e:\n"
    "        print(p, 'unreadable', type(e).__name__)\n"
)


async def test_proc_environ_of_the_daemon_is_unreadable(reg, box, monkeypatch, sandbox_ok):
    ws, state, _ = box
    value = "proc-secret-value-5521"
    monkeypatch.setenv("CHELA_TEST_DAEMON_TOKEN", value)  # this process (via setenv) ...
    # ... and a process that got it in its initial environment, as the daemon does
    helper = subprocess.Popen(
        [PY, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "CHELA_TEST_DAEMON_TOKEN": value},
    )
    try:
        (ws / "dump.py").write_text(
            _ENV_DUMP.replace("PID", str(os.getpid())).replace("HELPER", str(helper.pid))
        )
        out = await reg.execute(
            "exec", {"command": f"{PY} dump.py"}, ctx(ws, state, secrets=(value,))
        )
        assert ok(out) and "unreadable" in out
        assert value not in out and "CHELA_TEST_DAEMON_TOKEN" not in out
        # control: without the sandbox the same script does read the helper's environment
        out = await reg.execute(
            "exec", {"command": f"{PY} dump.py"}, ctx(ws, state, secrets=(value,), sandbox=False)
        )
        assert value in out
    finally:
        helper.kill()
        helper.wait()


async def test_twin_script_in_workspace_runs(reg, box, sandbox_ok):
    ws, state, _ = box
    (ws / "script.py").write_text("import os\nprint('hello from', os.getcwd())\n")
    out = await reg.execute("exec", {"command": f"{PY} script.py"}, ctx(ws, state))
    assert out.startswith(f"hello from {ws}\n[exit code 0")


async def test_sandbox_sees_only_its_own_processes(reg, box, sandbox_ok):
    ws, state, _ = box
    out = await reg.execute("exec", {"command": "ls /proc | grep -c '^[0-9]'"}, ctx(ws, state))
    assert ok(out) and int(out.split("\n")[0]) < 10


# --------------------------------------------------------------------------------------
# the state dir and $HOME are invisible


@pytest.mark.parametrize(
    "command",
    [
        "cat {state}/chela.sqlite3",
        "grep -r SECRET {state}",
        "ls -a {state}",
        "cat {home}/.ssh/id_rsa",
        "cat ~/.ssh/id_rsa",
        "grep -r SECRET {home}",
        "umount {state}; cat {state}/chela.sqlite3",  # a root daemon's child has no capabilities
    ],
)
async def test_state_dir_and_home_are_invisible(reg, box, command, sandbox_ok):
    ws, state, home = box
    out = await reg.execute(
        "exec", {"command": command.format(state=state, home=home)}, ctx(ws, state)
    )
    assert "[exit code" in out and SECRET not in out
    assert "chela.sqlite3" not in out.replace(f"{state}/chela.sqlite3", "")


async def test_allowlisted_cat_cannot_read_state(reg, box, sandbox_ok):
    ws, state, _ = box
    out = await reg.execute(
        "exec", {"command": f"cat {state}/chela.sqlite3"}, ctx(ws, state, "allowlist", ["cat"])
    )
    assert SECRET not in out and "No such file" in out


async def test_twin_cat_in_workspace(reg, box, sandbox_ok):
    ws, state, _ = box
    for mode in ("allowlist", "full"):
        out = await reg.execute("exec", {"command": "cat notes.txt"}, ctx(ws, state, mode, ["cat"]))
        assert out.startswith("buy tea\n[exit code 0")


async def test_file_root_inside_the_state_dir(reg, box, sandbox_ok):
    """A guest's directory lives under the state dir: it is usable, its parent stays hidden."""
    _, state, _ = box
    guest = state / "guests" / "g1"
    guest.mkdir(parents=True)
    c = ctx(guest, state)
    out = await reg.execute(
        "exec", {"command": f"echo mine > g.txt; ls {state}; cat {state}/chela.sqlite3"}, c
    )
    assert SECRET not in out and "chela.sqlite3: No such file" in out
    assert (guest / "g.txt").read_text() == "mine\n"


async def test_hidden_path_inside_file_root(reg, box, sandbox_ok):
    ws, _, _ = box
    private = ws / "private"
    private.mkdir()
    (private / "key").write_text(SECRET)
    out = await reg.execute("exec", {"command": "cat private/key; cat notes.txt"}, ctx(ws, private))
    assert SECRET not in out and "buy tea" in out


async def test_hidden_file_reads_empty(reg, box, tmp_path, sandbox_ok):
    """A hidden path may be a single file (e.g. a config.toml outside $HOME): it reads empty."""
    ws, _, _ = box
    cfg = tmp_path / "srv" / "config.toml"
    cfg.parent.mkdir()
    cfg.write_text(f'token = "{SECRET}"\n')
    out = await reg.execute(
        "exec", {"command": f"cat {cfg}; echo x > {cfg}; cat notes.txt"}, ctx(ws, cfg)
    )
    assert SECRET not in out and "buy tea" in out
    assert cfg.read_text() == f'token = "{SECRET}"\n'


# --------------------------------------------------------------------------------------
# writes outside the file root


@pytest.mark.parametrize("target", ["/etc/chela-x", "{state}/evil", "{home}/evil", "/usr/chela-x"])
async def test_writes_outside_file_root_fail(reg, box, target, sandbox_ok):
    ws, state, home = box
    path = target.format(state=state, home=home)
    out = await reg.execute(
        "exec", {"command": f"{PY} -c \"open('{path}', 'w').write('x')\""}, ctx(ws, state)
    )
    assert "Read-only file system" in out and "[exit code 1" in out
    assert not os.path.exists(path)


async def test_twin_write_in_workspace(reg, box, sandbox_ok):
    ws, state, _ = box
    out = await reg.execute(
        "exec", {"command": f"{PY} -c \"open('made.txt', 'w').write('ok')\""}, ctx(ws, state)
    )
    assert ok(out)
    assert (ws / "made.txt").read_text() == "ok"
    out = await reg.execute(
        "exec", {"command": "mkdir -p a/b && echo deep > a/b/c && cat a/b/c"}, ctx(ws, state)
    )
    assert out.startswith("deep\n") and (ws / "a" / "b" / "c").exists()


async def test_symlinked_and_missing_file_root(reg, tmp_path, sandbox_ok):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    out = await reg.execute("exec", {"command": "echo hi > f; pwd"}, ctx(link))
    assert ok(out) and (real / "f").read_text() == "hi\n"
    fresh = tmp_path / "not" / "yet"
    out = await reg.execute("exec", {"command": "echo new > f"}, ctx(fresh))
    assert ok(out) and (fresh / "f").read_text() == "new\n"
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700


# --------------------------------------------------------------------------------------
# network


_CONNECT = (
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.settimeout(3)\n"
    "try:\n"
    "    s.connect(('127.0.0.1', int(sys.argv[1])))\n"
    "    print('CONNECTED', s.recv(16).decode())\n"
    "except OSError as e:\n"
    "    print('FAILED', type(e).__name__)\n"
)


@pytest.mark.parametrize("network", [False, True])
async def test_network_only_when_enabled(reg, box, network, sandbox_ok):
    ws, state, _ = box

    async def greet(reader, writer):
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    (ws / "connect.py").write_text(_CONNECT)
    try:
        out = await reg.execute(
            "exec", {"command": f"{PY} connect.py {port}"}, ctx(ws, state, network=network)
        )
    finally:
        server.close()
        await server.wait_closed()
    if network:
        assert out.startswith("CONNECTED hello")
    else:
        assert out.startswith("FAILED")


# --------------------------------------------------------------------------------------
# escapes through allow-listed programs stay inside


async def test_git_alias_escape_is_confined(reg, box, sandbox_ok):
    ws, state, _ = box
    c = ctx(ws, state, "allowlist", ["git"])
    out = await reg.execute(
        "exec", {"command": f"git -c 'alias.x=!cat {state}/chela.sqlite3' x"}, c
    )
    assert SECRET not in out and "No such file" in out
    # twin: the same escape does run - but only inside the sandbox
    out = await reg.execute("exec", {"command": "git -c 'alias.x=!cat notes.txt' x"}, c)
    assert out.startswith("buy tea")
    out = await reg.execute("exec", {"command": "git -c 'alias.x=!touch escaped' x"}, c)
    assert ok(out) and (ws / "escaped").exists()


async def test_allowlisted_python_is_confined(reg, box, monkeypatch, sandbox_ok):
    ws, state, _ = box
    # the allow list takes plain names: put the sandbox-visible interpreter first on PATH
    monkeypatch.setenv("PATH", os.path.dirname(PY) + os.pathsep + os.environ.get("PATH", ""))
    py = os.path.basename(PY)
    c = ctx(ws, state, "allowlist", [py])
    out = await reg.execute(
        "exec", {"command": f"{py} -c \"print(open('{state}/chela.sqlite3').read())\""}, c
    )
    assert SECRET not in out and "FileNotFoundError" in out
    out = await reg.execute("exec", {"command": f"{py} -c \"print(open('notes.txt').read())\""}, c)
    assert out.startswith("buy tea")


# --------------------------------------------------------------------------------------
# no sandbox on the host


async def test_missing_sandbox_refuses_with_fix(reg, box, monkeypatch):
    ws, state, _ = box
    monkeypatch.setenv(sandbox.ENV_OVERRIDE, str(ws / "no-bwrap-here"))
    for mode in ("allowlist", "full"):
        out = await reg.execute("exec", {"command": "cat notes.txt"}, ctx(ws, state, mode, ["cat"]))
        assert out.startswith("Error: cannot run commands: the exec sandbox is unavailable")
        assert "apt-get install bubblewrap" in out and 'tools.exec.sandbox = "off"' in out
    # twin: the owner's explicit opt-out runs the command unsandboxed
    out = await reg.execute("exec", {"command": "cat notes.txt"}, ctx(ws, state, sandbox=False))
    assert out.startswith("buy tea\n[exit code 0")


async def test_broken_sandbox_refuses_before_asking(reg, box, monkeypatch):
    ws, state, _ = box
    fake = ws / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.ENV_OVERRIDE, str(fake))
    asked = []

    async def approve(command: str):
        asked.append(command)
        return "approved"

    out = await reg.execute(
        "exec", {"command": "echo hi"}, ctx(ws, state, "ask", [], request_approval=approve)
    )
    assert out.startswith("Error: cannot run commands: the exec sandbox does not work")
    assert "namespaces" in out and asked == []


# --------------------------------------------------------------------------------------
# ask


class Owner:
    """The core's request_approval: answers each held command with a fixed reply."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, command: str) -> str:
        self.asked.append(command)
        await asyncio.sleep(0)
        return self.answer


async def test_ask_allowlisted_runs_without_asking(reg, box, sandbox_ok):
    ws, state, _ = box
    owner = Owner("denied")
    out = await reg.execute(
        "exec", {"command": "cat notes.txt"}, ctx(ws, state, "ask", ["cat"], request_approval=owner)
    )
    assert out.startswith("buy tea\n[exit code 0") and owner.asked == []


async def test_ask_approved_runs_once_as_shell(reg, box, sandbox_ok):
    ws, state, _ = box
    owner = Owner("approved")
    cmd = f"echo run >> runs.txt && cat {state}/chela.sqlite3; wc -l < runs.txt"
    out = await reg.execute(
        "exec", {"command": cmd}, ctx(ws, state, "ask", ["cat"], request_approval=owner)
    )
    assert owner.asked == [cmd]
    assert (ws / "runs.txt").read_text() == "run\n"  # once
    assert SECRET not in out and out.split("\n")[1] == "1"  # and still sandboxed


@pytest.mark.parametrize(
    "answer, expect",
    [
        ("denied", "the owner denied it"),
        ("expired", "did not answer in time"),
        ("unavailable", "approval cannot be asked for here"),
    ],
)
async def test_ask_refusals(reg, box, answer, expect, sandbox_ok):
    ws, state, _ = box
    owner = Owner(answer)
    out = await reg.execute(
        "exec", {"command": "touch ran.txt"}, ctx(ws, state, "ask", ["cat"], request_approval=owner)
    )
    assert out.startswith("Error: command refused:") and expect in out
    assert owner.asked == ["touch ran.txt"] and not (ws / "ran.txt").exists()


async def test_ask_without_a_way_to_ask(reg, box, sandbox_ok):
    ws, state, _ = box
    out = await reg.execute("exec", {"command": "touch ran.txt"}, ctx(ws, state, "ask", ["cat"]))
    assert out.startswith("Error: command refused:") and "approval cannot be asked for here" in out
    assert "'touch' is not on the exec allow list" in out and not (ws / "ran.txt").exists()


async def test_ask_unsandboxed(reg, box):
    ws, state, _ = box
    owner = Owner("approved")
    out = await reg.execute(
        "exec",
        {"command": "echo a | tr a b"},
        ctx(ws, state, "ask", [], sandbox=False, request_approval=owner),
    )
    assert out.startswith("b\n[exit code 0") and owner.asked == ["echo a | tr a b"]


# --------------------------------------------------------------------------------------
# timeouts, missing programs


@pytest.mark.parametrize(
    "mode, command",
    [
        ("allowlist", "sleep 30"),
        ("full", "echo started; (sleep 1; touch marker) & sleep 30"),
    ],
)
async def test_timeout_kills_the_sandboxed_command(reg, box, mode, command, sandbox_ok):
    ws, state, _ = box
    t0 = time.monotonic()
    out = await reg.execute(
        "exec", {"command": command}, ctx(ws, state, mode, ["sleep"], timeout=0.5)
    )
    assert time.monotonic() - t0 < 4
    assert out.startswith("Error: the command timed out after 0.5s and was killed.")
    await asyncio.sleep(1.5)
    assert not (ws / "marker").exists()


async def test_program_missing_or_invisible(reg, box, monkeypatch, sandbox_ok):
    ws, state, home = box
    out = await reg.execute(
        "exec", {"command": "nosuchprog-xyz"}, ctx(ws, state, "allowlist", ["nosuchprog-xyz"])
    )
    assert out == "Error: program not found: nosuchprog-xyz"
    # on the host, but under the hidden $HOME: bwrap cannot start it
    tool = home / "bin" / "mytool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent) + os.pathsep + os.environ.get("PATH", ""))
    out = await reg.execute("exec", {"command": "mytool"}, ctx(ws, state, "allowlist", ["mytool"]))
    assert out.startswith("Error: the sandbox could not start the command:") and "mytool" in out
    # twin: unsandboxed it runs
    out = await reg.execute(
        "exec", {"command": "mytool"}, ctx(ws, state, "allowlist", ["mytool"], sandbox=False)
    )
    assert out.startswith("tool\n[exit code 0")
