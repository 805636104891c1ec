"""The browser tool's costs (numbers, not a pass/fail test).

    python bench/browser_bench.py [--requests N] [--starts N]

1. The proxy's added latency per request: N GETs of a small page on 127.0.0.2, each on a new
   connection, straight and through ``bot.net.proxy`` (127.0.0.2 allowed as a private host),
   interleaved; ms per request (best, median).
2. Chromium: the first ``open`` (Playwright's driver + Chromium start + one page load through the
   proxy), the next ``open`` of the same page, the PSS of Chromium's process group after them
   (shared pages split between its processes), and that nothing is left after ``idle_close``
   (5 s).  Whether Chromium ran in its own sandbox (not as root) is printed first.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.tools.base import ToolContext
from bot.agent.tools.browser import Browsers, make_browser_tool
from bot.agent.tools.browser.launch import browser_pid, running_as_root, sandbox_note
from bot.config.browser import BrowserConfig
from bot.net import HostRules
from bot.net.proxy import GuardProxy

HOST = "127.0.0.2"


async def site() -> tuple[web.AppRunner, int]:
    async def page(_: web.Request) -> web.Response:
        return web.Response(
            text="<title>Bench</title><h1>Hello</h1>" + "<p>x</p>" * 50, content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    s = web.TCPSite(runner, HOST, 0)
    await s.start()
    return runner, runner.addresses[0][1]


async def one(http: aiohttp.ClientSession, url: str, proxy: str | None) -> float:
    t = time.perf_counter()
    async with http.get(url, proxy=proxy) as r:
        await r.read()
        assert r.status == 200
    return (time.perf_counter() - t) * 1000


async def proxy_latency(port: int, n: int) -> None:
    url = f"http://{HOST}:{port}/"
    async with GuardProxy(HostRules([HOST])) as proxy:
        via = f"http://127.0.0.1:{proxy.port}"
        conn = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=conn) as http:
            direct, proxied = [], []
            for _ in range(5):  # warm-up
                await one(http, url, None)
                await one(http, url, via)
            for _ in range(n):
                direct.append(await one(http, url, None))
                proxied.append(await one(http, url, via))
    d, p = statistics.median(direct), statistics.median(proxied)
    print(f"direct   : best {min(direct):.2f} ms, median {d:.2f} ms ({n} requests)")
    print(f"proxied  : best {min(proxied):.2f} ms, median {p:.2f} ms")
    print(f"added    : {p - d:.2f} ms per request (median), {min(proxied) - min(direct):.2f} best")


def group_rss_mb(pid: int) -> float:
    """Proportional set size (shared pages split between the processes) of the group, MB."""
    pgid = os.getpgid(pid)
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in Path(f"/proc/{entry.name}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total / 1024


async def chromium(port: int, starts: int) -> None:
    url = f"http://{HOST}:{port}/"
    print(f"Chromium : {sandbox_note(running_as_root())}")
    for i in range(starts):
        with tempfile.TemporaryDirectory() as tmp:
            browsers = Browsers(BrowserConfig(idle_close="5s"), [HOST], Path(tmp))
            tool = make_browser_tool(browsers)
            ctx = ToolContext(file_root=Path(tmp), agent_id="bench")
            t = time.perf_counter()
            page = await tool.handler(ctx, {"action": "open", "url": url})
            first = time.perf_counter() - t
            assert "Hello" in page
            t = time.perf_counter()
            await tool.handler(ctx, {"action": "open", "url": url})
            again = (time.perf_counter() - t) * 1000
            profile = Path(tmp) / "browser" / "profile-bench"
            pid = browser_pid(profile)
            assert pid is not None
            rss = group_rss_mb(pid)
            await asyncio.sleep(6.5)
            left = browser_pid(profile)
            print(
                f"start {i + 1}: first open {first:.2f} s, next open {again:.0f} ms, "
                f"Chromium group PSS {rss:.0f} MB, after idle_close: "
                f"{'still running' if left else 'gone'}"
            )
            await browsers.aclose()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--starts", type=int, default=3)
    args = ap.parse_args()
    runner, port = await site()
    try:
        await proxy_latency(port, args.requests)
        await chromium(port, args.starts)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
