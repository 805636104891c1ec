"""WhatsApp linked device (neonize): the memory and time its client costs.

Each stage runs in a fresh interpreter (ROUNDS times, interleaved) and reports its RSS
(VmRSS, kB) and the seconds the stage itself took:
- base:      channels.whatsapp with the linked-device transport module imported (neonize not yet);
- import:    + ``import neonize.aioze.client`` (its Go library with whatsmeow, protobuf, magic …);
- client:    + ``NewAClient(<session db>)`` (the client object, no connection);
- connect:   + ``LinkedDevice.open()`` with the real client for CONNECT_WAIT seconds: neonize's Go
             side starts and tries to reach WhatsApp (whether it gets there depends on the
             network of the machine; no session is paired, so it would only show a QR code).
A real pairing cannot be measured here (it needs a phone); the fake client of the tests
costs nothing worth measuring.

Run: python3 bench/whatsapp_linked_bench.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5
CONNECT_WAIT = 5.0
STAGES = ("base", "import", "client", "connect")

CHILD = r"""
import asyncio, json, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
stage, tmp = sys.argv[1], Path(sys.argv[2])

def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

import channels.whatsapp.settings, channels.whatsapp.transport.linked_device
t0 = time.perf_counter()
if stage != "base":
    import neonize.aioze.client
if stage == "client":
    neonize.aioze.client.NewAClient(str(tmp / "bench.session.db"))
if stage == "connect":
    from bot.app.lock import StateLock
    from channels.whatsapp.linked.guards import Memory
    from channels.whatsapp.transport.linked_device import LinkedDevice

    async def run():
        db = tmp / "whatsapp" / "bench.session.db"
        t = LinkedDevice(db, lock=StateLock(tmp, "bench.lock"), memory=Memory(dict, lambda v: None))
        await t.open()
        await asyncio.sleep(float(sys.argv[4]))
        out = rss()
        await t.close()
        return out

    print(json.dumps({"rss": asyncio.run(run()), "s": time.perf_counter() - t0,
                      "threads": threading.active_count()}))
    raise SystemExit(0)
print(json.dumps({"rss": rss(), "s": time.perf_counter() - t0, "threads": threading.active_count()}))
"""


def one(stage: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, stage, tmp, str(ROOT), str(CONNECT_WAIT)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if out.returncode != 0:
        raise SystemExit(f"stage {stage} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    got: dict[str, list[dict]] = {s: [] for s in STAGES}
    for _ in range(ROUNDS):
        for stage in STAGES:
            got[stage].append(one(stage))
    base = statistics.median(r["rss"] for r in got["base"])
    print(
        f"{'stage':8} {'RSS MB (median)':>16} {'added MB':>9} {'best MB':>8} {'stage s (median)':>17}"
    )
    for stage in STAGES:
        rss = [r["rss"] for r in got[stage]]
        secs = statistics.median(r["s"] for r in got[stage])
        med = statistics.median(rss)
        print(
            f"{stage:8} {med / 1024:16.1f} {(med - base) / 1024:9.1f} "
            f"{min(rss) / 1024:8.1f} {secs:17.2f}"
        )


if __name__ == "__main__":
    main()
