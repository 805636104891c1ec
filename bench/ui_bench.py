"""Control UI benchmark (SPEC §16.1 budgets; reported, not a pass/fail test).

    cd /work/main && python bench/ui_bench.py [--loads 50] [--paints 20]

Measures, with Debian's Chromium (/usr/bin/chromium) driven by playwright:
  assets  the size of every file under bot/ui/static as installed (budget <= 150 KB).
  rss     `chela run` as a subprocess (the fake LLM, [channels.http] on a free loopback port):
          its RSS after --loads loads of the Chat page (logged in; each load is the page, its
          modules, bootstrap, the session list, the transcript and the events stream),
          ui.enabled = true minus the same loads of /ui/ with ui.enabled = false (404).
          Budget <= 5 MB.
  paint   first chat paint: navigation start -> the Chat page's transcript painted (the page
          sets the performance mark "chela-chat-painted" then), on loopback: the first load
          after login and the median/p90 of --paints reloads. Budget <= 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.llm import FakeLLM, text

CHROMIUM = "/usr/bin/chromium"
PAINTED = "chela-chat-painted"


def asset_bytes() -> tuple[int, int]:
    import bot.ui

    root = Path(bot.ui.__file__).resolve().parent / "static"
    files = [p for p in root.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp: Path, llm: FakeLLM, port: int, ui: bool) -> Path:
    path = tmp / "config.toml"
    path.write_text(
        "\n".join(
            [
                "[agent]",
                f"workspace = {json.dumps(str(tmp / 'ws'))}",
                f"state_dir = {json.dumps(str(tmp / 'state'))}",
                'model = "openai/fake-model"',
                f"api_base = {json.dumps(llm.base_url)}",
                "[heartbeat]",
                'every = "0m"',
                "[channels.http]",
                "enabled = true",
                f'listen = "127.0.0.1:{port}"',
                "[ui]",
                f"enabled = {'true' if ui else 'false'}",
                "",
            ]
        )
    )
    return path


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"chela run exited with {proc.returncode}")
            try:
                async with s.get(f"{base}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("chela run did not answer /healthz")


async def painted(page) -> float:
    handle = await page.wait_for_function(
        f"() => performance.getEntriesByName('{PAINTED}')[0]?.startTime"
    )
    return float(await handle.json_value())


# the last load's requests: name, start and end (ms from navigation start)
WATERFALL = """() => performance.getEntriesByType("resource").map(
  (e) => [e.name.replace(location.origin, ""), Math.round(e.startTime), Math.round(e.responseEnd)])"""


async def v1_turn(base: str, tmp: Path, llm: FakeLLM) -> None:
    """One model turn through /v1 (with the UI off there is no Chat to seed the session)."""
    token = (tmp / "state" / "http-token").read_text().strip()
    llm.script(text("A first answer, so the transcript is not empty."))
    async with aiohttp.ClientSession() as s:
        body = {"model": "chela", "messages": [{"role": "user", "content": "hello"}]}
        headers = {"Authorization": f"Bearer {token}"}
        async with s.post(f"{base}/v1/chat/completions", json=body, headers=headers) as r:
            r.raise_for_status()


async def one_daemon(browser, llm: FakeLLM, ui: bool, loads: int, paints: int) -> dict:
    out: dict = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        port = free_port()
        cfg = write_config(tmp, llm, port, ui)
        base = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--config", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await wait_healthy(base, proc)
            out["rss_start_kb"] = rss_kb(proc.pid)
            context = await browser.new_context()
            page = await context.new_page()
            if ui:
                dashboard = ["dashboard", "--print-url", "--no-open", "--config", str(cfg)]
                url = subprocess.run(
                    [sys.executable, "-m", "bot", *dashboard],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
                await page.goto(url)
                out["paint_first_ms"] = await painted(page)
                llm.script(text("A first answer, so the transcript is not empty."))
                await page.get_by_role("textbox", name="Message").fill("hello")
                await page.get_by_role("button", name="Send").click()
                await page.get_by_role("article", name="Assistant message").wait_for()
                out["rss_after_turn_kb"] = rss_kb(proc.pid)
                times = []
                for i in range(max(loads, paints)):
                    await page.reload()
                    ms = await painted(page)
                    if i < paints:
                        times.append(ms)
                    if i == 9:
                        out["rss_10_kb"] = rss_kb(proc.pid)
                out["paint_ms"] = times
                out["waterfall"] = await page.evaluate(WATERFALL)
            else:
                await v1_turn(base, tmp, llm)  # the same one model turn as the UI's seed
                out["rss_after_turn_kb"] = rss_kb(proc.pid)
                for _ in range(loads):
                    await page.goto(f"{base}/ui/")
            await context.close()
            await asyncio.sleep(1.0)
            out["rss_end_kb"] = rss_kb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)
    return out


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--loads", type=int, default=50)
    ap.add_argument("--paints", type=int, default=20)
    ap.add_argument("--detail", action="store_true", help="print the last load's requests")
    args = ap.parse_args(argv)
    from playwright.async_api import async_playwright

    size, count = asset_bytes()
    print(f"assets: {size} bytes ({size / 1024:.1f} KB) in {count} files (budget 150 KB)")
    async with FakeLLM() as llm, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM)
        off = await one_daemon(browser, llm, False, args.loads, 0)
        on = await one_daemon(browser, llm, True, args.loads, args.paints)
        await browser.close()
    delta = (on["rss_end_kb"] - off["rss_end_kb"]) / 1024
    for name, r in (("off", off), ("on", on)):
        print(
            f"rss ui {name}: start {r['rss_start_kb'] / 1024:.1f} MB, after one turn "
            f"{r['rss_after_turn_kb'] / 1024:.1f} MB, after {args.loads} loads "
            f"{r['rss_end_kb'] / 1024:.1f} MB"
        )
    print(f"rss: ui on minus off after {args.loads} Chat page loads: {delta:+.1f} MB (budget 5 MB)")
    if "rss_10_kb" in on:
        steady = (on["rss_end_kb"] - on["rss_10_kb"]) / 1024
        print(
            f"rss ui on: loads 11..{args.loads} added {steady:+.1f} MB (a per-load leak shows here)"
        )
    times = sorted(on["paint_ms"])
    p90 = times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]
    print(
        f"first chat paint: {on['paint_first_ms']:.0f} ms right after login; reloads median "
        f"{statistics.median(times):.0f} ms, p90 {p90:.0f} ms, max {times[-1]:.0f} ms "
        f"({len(times)} loads, budget 300 ms)"
    )
    if args.detail:
        for name, start, end in on["waterfall"]:
            print(f"  {start:5d} -> {end:5d} ms  {name}")


if __name__ == "__main__":
    asyncio.run(main())
