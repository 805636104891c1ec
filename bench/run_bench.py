"""The daemon as a user runs it, as a separate process, against the wire fakes (not a test).

    cd /work/main && python bench/run_bench.py [--daemon chela|nanobot] [--model light|litellm]
                                              [--chats 100] [--per-chat 2] [--runs 1]

`chela run` (or nanobot 0.3.5's gateway, from its own venv: ``--nanobot-python``, see
bench/peers/nanobot_run.py) is spawned against FakeTelegram and FakeLLM, which run in this
process, so the figures are the daemon's own: its CPU (``/proc/<pid>/stat``) and its peak RSS
(``VmHWM``), not the fakes'.  ``--model light``: ``openai/gpt-4o-mini`` at the fake (Chela's
own Chat Completions client); ``--model litellm``: the same model through litellm
(``CHELA_MODEL_PATH=litellm``) with an ``anthropic/`` fallback, so litellm is imported as for
an ``anthropic/`` model.

Figures
  first poll     spawn → the fake's first getUpdates
  first poll CPU the daemon's CPU time (user + system) when that getUpdates arrived
  ready          spawn → the daemon's "ready in" line (chela) / the first getUpdates (nanobot)
  first reply    a DM injected at readiness → the fake records its reply
  burst          chats × per-chat DMs injected at once: replies/s from the first inject to the
                 last reply (and how many replies came); the daemon's CPU ms per message
  peak RSS       the daemon's VmHWM after the burst
  stop           SIGTERM after the burst → exit (and the exit code)
  stop@import    (chela) SIGTERM at the first getUpdates (with --model litellm, litellm
                 still importing) → exit
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from e2e_bench import TimedTelegram, wait_replies  # noqa: E402
from tests.e2e import TG_TOKEN, config_file, telegram_section  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
BASE_CHAT = 1_000_000


def compile_sources() -> None:
    """Bytecode for bot/ and channels/, as a user's install has it (pip compiles site-packages;
    an editable install writes __pycache__ on its first run).  This sandbox sets
    PYTHONDONTWRITEBYTECODE=1, which would leave the daemon compiling its own modules from
    source at every spawn while a pip-installed peer has bytecode.  __pycache__ is gitignored."""
    import subprocess

    dirs = [str(ROOT / "bot"), str(ROOT / "channels")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], check=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Daemon:
    """One spawned daemon: its process, its log lines, the time it was spawned."""

    def __init__(self, proc: asyncio.subprocess.Process, t0: float) -> None:
        self.proc, self.t0 = proc, t0
        self.lines: list[str] = []
        self.ready_at: float | None = None
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            text = line.decode(errors="replace")
            self.lines.append(text)
            if self.ready_at is None and "ready in" in text:
                self.ready_at = time.perf_counter()

    async def stop(self) -> tuple[float, int]:
        t = time.perf_counter()
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = await self.proc.wait()
        elapsed = time.perf_counter() - t
        await self.reader
        return elapsed, rc


def owners(chats: int) -> list[str]:
    return [str(BASE_CHAT + k) for k in range(chats + 10)]


def chela_cmd(tmp: Path, tg: TimedTelegram, llm: FakeLLM, chats: int, model: str) -> tuple:
    cfg = config_file(
        tmp / "config.toml",
        llm,
        workspace=tmp / "ws",
        state_dir=tmp / "state",
        channels=telegram_section(tg, dm_policy="open", allow_from=owners(chats), poll_timeout=1),
    )
    text = cfg.read_text() + '[session]\ndm_scope = "per-channel-peer"\n'
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_TG_TOKEN": TG_TOKEN}
    env.pop("CHELA_MODEL_PATH", None)
    if model == "litellm":
        env["CHELA_MODEL_PATH"] = "litellm"
        fallback = '[[agent.fallbacks]]\nmodel = "anthropic/claude-3-5-haiku-latest"\n'
        text = text.replace("[heartbeat]", fallback + "[heartbeat]", 1)
    cfg.write_text(text)
    return [sys.executable, "-m", "bot", "run", "--config", str(cfg)], env


def nanobot_cmd(tmp: Path, tg: TimedTelegram, llm: FakeLLM, chats: int, python: str) -> tuple:
    cfg = {
        "agents": {
            "defaults": {
                "workspace": str(tmp / "nb-ws"),
                "model": "openai/gpt-4o-mini",
                "provider": "custom",
                "timezone": "UTC",
            }
        },
        "providers": {"custom": {"apiKey": "sk-bench", "apiBase": llm.base_url}},
        "channels": {
            "sendProgress": False,
            "sendToolHints": False,
            "telegram": {
                "enabled": True,
                "token": TG_TOKEN,
                "allowFrom": owners(chats),
                "streaming": False,
            },
        },
        "gateway": {"port": 0},
    }
    path = tmp / "nanobot.json"
    path.write_text(json.dumps(cfg))
    env = {**os.environ, "HOME": str(tmp), "NO_COLOR": "1"}
    env.pop("PYTHONPATH", None)
    runner = ROOT / "bench" / "peers" / "nanobot_run.py"
    return [python, str(runner), str(path), tg.api_base], env


async def spawn(cmd: list[str], env: dict[str, str]) -> Daemon:
    # BENCH_WRAP="py-spy record -r 500 -f raw -o /tmp/start.txt --": profile the daemon
    # (its CPU and RSS figures are then the wrapper's)
    cmd = shlex.split(os.environ.get("BENCH_WRAP", "")) + cmd
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    return Daemon(proc, t0)


async def first_poll(tg: TimedTelegram, d: Daemon, timeout: float = 120) -> float:
    deadline = time.perf_counter() + timeout
    while tg.first_poll is None:
        if d.proc.returncode is not None or time.perf_counter() > deadline:
            raise RuntimeError("no getUpdates:\n" + "".join(d.lines[-30:]))
        await asyncio.sleep(0.001)
    return tg.first_poll - d.t0


async def one_run(a: argparse.Namespace, tmp: Path) -> dict[str, float]:
    llm = FakeLLM(keep_requests=False)
    await llm.start()
    tg = TimedTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    try:
        if a.daemon == "chela":
            cmd, env = chela_cmd(tmp, tg, llm, a.chats, a.model)
        else:
            cmd, env = nanobot_cmd(tmp, tg, llm, a.chats, a.nanobot_python)
        d = await spawn(cmd, env)
        out = {"first poll": await first_poll(tg, d)}
        # the daemon's own CPU up to its first poll: what the wall-clock figure costs on an
        # idle machine, and steadier than it when other processes share the cores
        out["first poll CPU"] = cpu_seconds(d.proc.pid)
        while a.daemon == "chela" and d.ready_at is None:
            await asyncio.sleep(0.001)
        ready = d.ready_at or tg.first_poll or time.perf_counter()
        out["ready"] = ready - d.t0
        tg.inject_timed(BASE_CHAT + a.chats + 1, "hello")
        if not await wait_replies(tg, 1, 120):
            raise RuntimeError("no first reply:\n" + "".join(d.lines[-30:]))
        out["first reply"] = tg.latencies[0][1] - tg.latencies[0][0]
        await burst(a, tg, d, out)
        out["stop"], out["exit code"] = await d.stop()
        if os.environ.get("BENCH_LOG"):
            print("".join(d.lines[-int(os.environ["BENCH_LOG"]) :]), file=sys.stderr)
        if a.daemon == "chela":  # SIGTERM at the first poll (litellm may still be importing)
            tg.first_poll = None
            d = await spawn(cmd, env)
            await first_poll(tg, d)
            out["stop@import"], out["exit code@import"] = await d.stop()
        return out
    finally:
        await tg.stop()
        await llm.stop()


async def burst(a: argparse.Namespace, tg: TimedTelegram, d: Daemon, out: dict) -> None:
    for i in range(5):  # warm up: the first turns of a fresh process
        tg.inject_timed(BASE_CHAT + i, "warm up")
    await wait_replies(tg, 6, 120)
    tg.latencies.clear()
    n = a.chats * a.per_chat
    cpu0 = cpu_seconds(d.proc.pid)
    t_first = time.perf_counter()
    for k in range(a.per_chat):
        for c in range(a.chats):
            tg.inject_timed(BASE_CHAT + c, f"message {k} from chat {c}: what's on my calendar?")
    await wait_replies(tg, n, a.burst_timeout)
    # a daemon that answers two quick messages of a chat with one reply (nanobot) sends
    # fewer replies than messages: the rate counts the replies up to the last one
    t_last = max((s for _, s in tg.latencies), default=time.perf_counter())
    out["replies"] = len(tg.latencies)
    out["burst msg/s"] = len(tg.latencies) / (t_last - t_first)
    out["burst p50 ms"] = statistics.median((s - i) * 1000 for i, s in tg.latencies)
    out["CPU ms/msg"] = (cpu_seconds(d.proc.pid) - cpu0) / n * 1000
    out["peak RSS MB"] = peak_rss_mb(d.proc.pid)


async def term_sweep(a: argparse.Namespace, tmp: Path) -> None:
    """SIGTERM at fixed delays after spawn (during the interpreter's imports, the build, the
    channels' start, litellm's import, idle): how long each exit takes, and its code."""
    llm = FakeLLM(keep_requests=False)
    await llm.start()
    tg = TimedTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    try:
        cmd, env = chela_cmd(tmp, tg, llm, a.chats, a.model)
        print(f"SIGTERM sweep, chela ({a.model}): delay after spawn -> exit ms (exit code)")
        for delay in a.term_sweep:
            d = await spawn(cmd, env)
            await asyncio.sleep(delay / 1000)
            took, rc = await d.stop()
            print(f"  at {delay:>5} ms: exit {took * 1000:7.1f} ms  (rc {rc})")
    finally:
        await tg.stop()
        await llm.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", choices=("chela", "nanobot"), default="chela")
    ap.add_argument("--model", choices=("light", "litellm"), default="light")
    ap.add_argument("--chats", type=int, default=100)
    ap.add_argument("--per-chat", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--burst-timeout", type=float, default=300.0, help="seconds")
    ap.add_argument("--nanobot-python", default="/tmp/nb/bin/python")
    ap.add_argument(
        "--term-sweep",
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        help="only send SIGTERM at these delays after spawn, ms (e.g. 50,200,400,800,1500,3000)",
    )
    a = ap.parse_args()
    compile_sources()
    if a.term_sweep:
        with tempfile.TemporaryDirectory(prefix="chela-run-bench-") as d:
            asyncio.run(term_sweep(a, Path(d)))
        return
    rows = []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="chela-run-bench-") as d:
            rows.append(asyncio.run(one_run(a, Path(d))))
    label = a.daemon + (f" ({a.model})" if a.daemon == "chela" else "")
    print(f"run_bench: {label}, {a.chats} chats x {a.per_chat}, nproc={os.cpu_count()}")
    print(f"{'':<18}{'best':>10}{'median':>10}{'worst':>10}   ({a.runs} run(s))")
    for key in rows[0]:
        vals = sorted(r[key] for r in rows)
        hi_good = key == "burst msg/s"
        best, worst = (vals[-1], vals[0]) if hi_good else (vals[0], vals[-1])
        scale = (
            1000
            if key in ("first poll", "first poll CPU", "ready", "first reply")
            or key.startswith("stop")
            else 1
        )
        unit = " ms" if scale == 1000 else ""
        print(
            f"{key + unit:<18}{best * scale:>10.1f}{statistics.median(vals) * scale:>10.1f}"
            f"{worst * scale:>10.1f}"
        )


if __name__ == "__main__":
    main()
