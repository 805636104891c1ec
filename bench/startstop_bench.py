"""Start-up, first reply and stop of the real `chela run` process (not a pass/fail test).

    cd /work/main && python bench/startstop_bench.py [--runs 5]

Each run starts `python -m bot run` as a subprocess against FakeTelegram and FakeLLM (both in
this process, answering at once) with a fresh state dir, then measures:

  ready        process spawn → the daemon's "ready" log line (channels polling, recovery done)
  first reply  a message injected the moment "ready" is logged → the fake records the reply
  spawn→reply  process spawn → that reply (what a user restarting the daemon waits)
  stop         SIGTERM sent right after the first reply → the process has exited
  stop (idle)  a second daemon, SIGTERM 0.2 s after "ready"
  stop (import) a third, SIGTERM as soon as it logs "starting agent", while litellm is still
               importing (a pending import or executor thread must not hold the exit)

Prints min / median / max over the runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e import TG_TOKEN, config_file, telegram_section  # noqa: E402
from tests.fakes.llm import FakeLLM, text  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from run_bench import compile_sources  # noqa: E402


async def spawn(cfg_path: Path) -> tuple[asyncio.subprocess.Process, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_TG_TOKEN": TG_TOKEN}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        "--config",
        str(cfg_path),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    return proc, t0


LOG: list[str] = []


async def wait_line(proc: asyncio.subprocess.Process, needle: str, timeout: float = 60) -> None:
    """Read the daemon's log until ``needle``; a task keeps reading after that (a full pipe
    would block the daemon)."""
    assert proc.stderr is not None
    async with asyncio.timeout(timeout):
        while True:
            line = await proc.stderr.readline()
            if not line:
                raise RuntimeError(f"the daemon exited before logging {needle!r}:\n{''.join(LOG)}")
            LOG.append(line.decode(errors="replace"))
            if needle in LOG[-1]:
                proc.reader = asyncio.create_task(drain(proc))  # type: ignore[attr-defined]
                return


async def drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while line := await proc.stderr.readline():
        LOG.append(line.decode(errors="replace"))


async def stop(proc: asyncio.subprocess.Process) -> float:
    t = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    await proc.wait()
    elapsed = time.perf_counter() - t
    await proc.reader  # type: ignore[attr-defined]
    return elapsed


async def one_run(tmp: Path, tg: FakeTelegram, llm: FakeLLM, i: int) -> dict[str, float]:
    cfg_path = config_file(
        tmp / f"config{i}.toml",
        llm,
        workspace=tmp / f"ws{i}",
        state_dir=tmp / f"state{i}",
        channels=telegram_section(tg, allow_from=[str(1000 + i)]),
    )
    out: dict[str, float] = {}
    proc, t0 = await spawn(cfg_path)
    await wait_line(proc, "ready in")
    out["ready"] = time.perf_counter() - t0
    before = len(tg.sent)
    llm.script(text(f"hello {i}"))
    t1 = time.perf_counter()
    tg.inject_message(1000 + i, "hi", from_id=1000 + i)
    try:
        await tg.wait_for_sent(before + 1, timeout=60)
    except TimeoutError:
        print("".join(LOG[-30:]), file=sys.stderr)
        raise
    now = time.perf_counter()
    out["first reply"] = now - t1
    out["spawn→reply"] = now - t0
    out["stop"] = await stop(proc)

    proc, t0 = await spawn(cfg_path)
    await wait_line(proc, "ready in")
    await asyncio.sleep(0.2)
    out["stop (idle)"] = await stop(proc)

    proc, t0 = await spawn(cfg_path)
    await wait_line(proc, "starting agent")  # litellm is still importing
    out["stop (import)"] = await stop(proc)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    compile_sources()  # bytecode as a user's install has it (see run_bench.compile_sources)
    tg = await FakeTelegram(token=TG_TOKEN, bot_username="chela_bot").start()
    llm = FakeLLM()
    await llm.start()
    rows: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for i in range(args.runs):
                rows.append(await one_run(Path(d), tg, llm, i))
    finally:
        await llm.stop()
        await tg.stop()
    if os.environ.get("BENCH_LOG"):
        print("".join(LOG[-12:]))
    print(f"{'':<14}{'min':>9}{'median':>9}{'max':>9}   ({args.runs} runs, seconds)")
    for key in rows[0]:
        vals = [r[key] for r in rows]
        print(f"{key:<14}{min(vals):>9.3f}{statistics.median(vals):>9.3f}{max(vals):>9.3f}")


if __name__ == "__main__":
    asyncio.run(main())
