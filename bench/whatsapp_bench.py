"""WhatsApp (Agent Platform) channel: what it costs.

Prints, for ``chela run`` as a subprocess against the wire fake (tests/fakes/whatsapp.py) and
the fake LLM:
- RSS after start-up with the channel enabled, and without it (the same config, the channel
  off), interleaved over ROUNDS runs: the difference is what the channel adds;
- polls a minute and CPU seconds of the daemon over IDLE seconds with nobody writing;
- time from an inbound message reaching the fake to the typing indicator arriving there.

Run: python3 bench/whatsapp_bench.py
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.harness import config_file  # noqa: E402
from tests.fakes.llm import FakeLLM, text  # noqa: E402
from tests.fakes.whatsapp import FakeWhatsApp  # noqa: E402

ROUNDS = 3
IDLE = 60.0
KEY = "bench-key"


def proc_stat(pid: int) -> tuple[int, float]:
    """(RSS in kB, CPU seconds) of a process."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, cpu


def start(tmp: Path, llm: FakeLLM, wa: FakeWhatsApp, enabled: bool) -> subprocess.Popen:
    os.environ["BENCH_WA_KEY"] = KEY
    section = {"enabled": enabled, "api_key_env": "BENCH_WA_KEY", "api_base": wa.api_base}
    cfg = config_file(
        tmp / "c.toml",
        llm,
        workspace=tmp / "ws",
        state_dir=tmp / "state",
        channels={"whatsapp": section, "http": {"enabled": False}},
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bot", "run", "--config", str(cfg)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def settle(proc: subprocess.Popen, seconds: float = 8.0) -> int:
    await asyncio.sleep(seconds)
    return proc_stat(proc.pid)[0]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(20)


async def rss_rounds(tmp: Path) -> None:
    on, off = [], []
    for r in range(ROUNDS):
        for enabled, out in ((True, on), (False, off)):
            d = tmp / f"rss{r}{enabled}"
            d.mkdir()
            async with FakeLLM() as llm, FakeWhatsApp(key=KEY) as wa:
                proc = start(d, llm, wa, enabled)
                try:
                    out.append(await settle(proc))
                finally:
                    stop(proc)
    print(f"RSS with the channel:    median {statistics.median(on) / 1024:.1f} MB {on}")
    print(f"RSS without the channel: median {statistics.median(off) / 1024:.1f} MB {off}")
    print(
        f"added by the channel:    {(statistics.median(on) - statistics.median(off)) / 1024:.1f} MB"
    )


async def idle_and_latency(tmp: Path) -> None:
    async with FakeLLM() as llm, FakeWhatsApp(key=KEY) as wa:
        proc = start(tmp, llm, wa, True)
        try:
            await settle(proc)
            polls0, (_, cpu0), t0 = len(wa.polls), proc_stat(proc.pid), time.monotonic()
            await asyncio.sleep(IDLE)
            polls1, (_, cpu1), t1 = len(wa.polls), proc_stat(proc.pid), time.monotonic()
            minutes = (t1 - t0) / 60
            print(
                f"idle: {(polls1 - polls0) / minutes:.1f} polls/min, "
                f"{(cpu1 - cpu0) / (t1 - t0) * 100:.2f}% CPU over {t1 - t0:.0f}s"
            )
            waits = []
            for i in range(5):
                llm.script(text(f"answer {i}"))
                seen = len(wa.statuses)
                at = time.monotonic()
                wa.inject_text(f"question {i}")
                while not any("typing_indicator" in b for _, b in wa.statuses[seen:]):
                    await asyncio.sleep(0.002)
                typed = next(t for t, b in wa.statuses[seen:] if "typing_indicator" in b)
                waits.append((typed - at) * 1000)
                await wa.wait_for_sent(i + 1)
            print(
                f"inbound -> typing: median {statistics.median(waits):.0f} ms, "
                f"min {min(waits):.0f}, max {max(waits):.0f} (n={len(waits)})"
            )
        finally:
            stop(proc)


async def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "idle").mkdir()
        await idle_and_latency(Path(tmp) / "idle")
        await rss_rounds(Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
