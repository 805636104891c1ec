"""exec tool cost of the bubblewrap sandbox (not a pass/fail test).

    python bench/exec_bench.py [--runs N] [--command CMD]

Runs the real ``exec`` tool (registry ``execute``) N times with a trivial command, sandboxed
(the default) and with ``sandbox=False``, in "allowlist" and "full" mode, and prints ms per
call (mean, p50, p95).  The first call of each series is a warm-up and is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.tools import ExecPolicy, ToolContext, build_registry
from bot.agent.tools import sandbox


def pct(sorted_ms: list[float], q: float) -> float:
    i = min(len(sorted_ms) - 1, max(0, round(q * (len(sorted_ms) - 1))))
    return sorted_ms[i]


async def series(
    reg, ws: Path, state: Path, security: str, sandboxed: bool, command: str, runs: int
) -> list[float]:
    prog = shlex.split(command)[0]
    policy = ExecPolicy(security, [prog], 10, sandbox=sandboxed, hidden=(str(state),))
    ctx = ToolContext(file_root=ws, exec_policy=policy)
    out = await reg.execute("exec", {"command": command}, ctx)  # warm-up
    if out.startswith("Error:"):
        raise SystemExit(f"{security} sandbox={sandboxed}: {out}")
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await reg.execute("exec", {"command": command}, ctx)
        times.append((time.perf_counter() - t0) * 1000)
    return times


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--command", default="ls")
    a = ap.parse_args()

    status = await sandbox.probe_async()
    print(f"sandbox: {status.message()}")
    reg = build_registry(["exec"])
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "workspace"
        state = Path(tmp) / "state"
        ws.mkdir()
        state.mkdir()
        for i in range(20):
            (ws / f"file{i}.txt").write_text("x")
        print(f"{a.runs} x exec {a.command!r}, ms per call")
        print(f"{'mode':<10} {'sandbox':<8} {'mean':>7} {'p50':>7} {'p95':>7}")
        for security in ("allowlist", "full"):
            for sandboxed in (False, True):
                if sandboxed and not status.ok:
                    print(f"{security:<10} {'on':<8} {'(unavailable)':>23}")
                    continue
                ms = sorted(await series(reg, ws, state, security, sandboxed, a.command, a.runs))
                print(
                    f"{security:<10} {'on' if sandboxed else 'off':<8} "
                    f"{statistics.fmean(ms):7.2f} {pct(ms, 0.5):7.2f} {pct(ms, 0.95):7.2f}"
                )


if __name__ == "__main__":
    asyncio.run(main())
