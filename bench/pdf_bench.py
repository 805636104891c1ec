"""PDF intake benchmark (not a pass/fail test): what a hostile PDF costs (SPEC §9.5).

    cd /work/main && python bench/pdf_bench.py [--old-pages 2] [--no-sigterm]

Samples (tests/fakes/media_samples.py), all made here:

  normal    a 2-page PDF with one line per page
  hostile   33 KB: 200 pages whose /Contents all name one stream of 200,000 ``(x) Tj``
  textless  the same with ``() Tj``: as slow a page, no character shown (no budget stops it)

Part 1, ``bot.media.pdf_text`` as intake calls it (budget max_document_chars 20000 + margin):
wall seconds, CPU seconds of the child process, CPU seconds of this process, what came back.

Part 2, the old way (pypdf in this process, every page): ``--old-pages`` pages of the
hostile PDF timed, and the 200 pages extrapolated from them.

Part 3, ``chela run`` as a subprocess against the fake Telegram and the fake LLM: the textless PDF
is sent, SIGTERM 1 s after the daemon fetched it, seconds until the process exited (and rc).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.media.pdf import PDF_MARGIN_CHARS, pdf_text
from tests.fakes.media_samples import hostile_pdf, pdf_bytes

SAMPLES = {
    "normal": lambda: pdf_bytes(["Invoice 2024-117 total 42.50 EUR", "page two"]),
    "hostile": hostile_pdf,
    "textless": lambda: hostile_pdf(shown=""),
}


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


async def part1(tmp: Path) -> None:
    print("part 1: bot.media.pdf_text (child process), budget 20000 + margin")
    print(f"  {'sample':8} {'bytes':>8} {'wall s':>7} {'child cpu s':>11} {'own cpu s':>9}  result")
    for name, make in SAMPLES.items():
        data = make()
        path = tmp / f"{name}.pdf"
        path.write_bytes(data)
        c0, s0, t0 = cpu(resource.RUSAGE_CHILDREN), cpu(resource.RUSAGE_SELF), time.perf_counter()
        try:
            text, pages = await pdf_text(path, max_chars=20000 + PDF_MARGIN_CHARS)
            what = f"{len(text)} chars, {pages} pages"
        except ValueError as e:
            what = f"ValueError: {e}"
        wall = time.perf_counter() - t0
        child, own = cpu(resource.RUSAGE_CHILDREN) - c0, cpu(resource.RUSAGE_SELF) - s0
        print(f"  {name:8} {len(data):>8} {wall:>7.2f} {child:>11.2f} {own:>9.2f}  {what}")


def part2(pages: int) -> None:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(hostile_pdf()))
    c0, t0 = cpu(resource.RUSAGE_SELF), time.perf_counter()
    for page in reader.pages[:pages]:
        page.extract_text()
    wall, used = time.perf_counter() - t0, cpu(resource.RUSAGE_SELF) - c0
    n = len(reader.pages)
    print(f"part 2: old way, pypdf in process, hostile PDF, {pages} of {n} pages read")
    print(f"  {wall / pages:.2f} s wall, {used / pages:.2f} s CPU a page")
    print(
        f"  all {n} pages: ~{wall / pages * n / 60:.0f} min wall, ~{used / pages * n / 60:.0f} min CPU"
    )


async def part3(tmp: Path) -> None:
    from tests.e2e import TG_TOKEN, config_file, eventually, telegram_section
    from tests.fakes.llm import FakeLLM
    from tests.fakes.telegram import FakeTelegram
    from tests.e2e.test_first_hour import start_daemon, wait_log

    async with FakeLLM() as llm:
        tg = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
        await tg.start()
        cfg = config_file(
            tmp / "config.toml",
            llm,
            workspace=tmp / "ws",
            state_dir=tmp / "state",
            channels=telegram_section(tg),
        )
        log = tmp / "daemon.log"
        proc = start_daemon(cfg, log)
        try:
            await wait_log(log, "channel telegram started")
            tg.inject_message(
                42, "read", from_id=42, document=SAMPLES["textless"](), document_name="s.pdf"
            )
            await eventually(lambda: tg.downloads, timeout=30)
            await asyncio.sleep(1.0)
            t0 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            await eventually(lambda: proc.poll() is not None, timeout=600, interval=0.05)
            took = time.perf_counter() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            await tg.stop()
    print("part 3: chela run, textless PDF being read, SIGTERM")
    print(f"  SIGTERM → exit {took:.2f} s, rc {proc.returncode}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old-pages", type=int, default=2)
    ap.add_argument("--no-sigterm", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pdf-bench-"))
    await part1(tmp)
    if args.old_pages > 0:
        part2(args.old_pages)
    if not args.no_sigterm:
        await part3(tmp)


if __name__ == "__main__":
    asyncio.run(main())
