"""Images benchmark (not a pass/fail test): what an inbound photo costs (SPEC §11).

    cd /work/main && python bench/media_bench.py [--runs 10] [--turns 10]

Part 1, one 12-megapixel JPEG (4000 × 3000, camera noise, EXIF orientation 6), ``--runs``
times each, median ms:

  decode        Image.open + EXIF transpose + load, with the JPEG draft scale bot.media uses
  decode-full   the same without draft (what a plain ``Image.open().load()`` costs)
  resize        thumbnail to image_max_px = 1568 (LANCZOS) from the draft-decoded image
  encode        JPEG quality 85 of the 1568 px result
  process       bot.media.process_image end to end (the above plus the 0600 write)
  data URL      reading the resized file and base64 for one model request

Part 2, ``--turns`` concurrent image turns end to end: FakeTelegram → daemon → FakeLLM →
FakeTelegram, one 12 MP photo from each of ``--turns`` owners at once (one session each),
``vision = "on"``.  Peak RSS of the whole process (fakes included; their recorded request
bodies are cleared as they come) before the photos and after the last reply, plus the
wall time from the first inject to the last reply.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import logging
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image, ImageOps

from bot.media import JPEG_QUALITY, process_image
from tests.fakes.media_samples import image_bytes


def photo_12mp() -> bytes:
    """A 12 MP JPEG that compresses like a photo (noise over gradients), not a flat fill."""
    img = Image.effect_noise((4000, 3000), 40).convert("RGB")
    grad = Image.linear_gradient("L").resize((4000, 3000)).convert("RGB")
    img = Image.blend(img, grad, 0.5)
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90, exif=exif.tobytes())
    return buf.getvalue()


def ms(f, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def part1(data: bytes, runs: int, max_px: int = 1568) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="media-bench-"))
    src = tmp / "photo.jpg"
    src.write_bytes(data)

    def decode(draft: bool) -> Image.Image:
        with Image.open(src) as im:
            if draft:
                w, h = im.size
                r = max_px / max(w, h)
                im.draft("RGB", (int(w * r), int(h * r)))
            out = ImageOps.exif_transpose(im)
            out.load()
            return out

    decoded = decode(True)

    def resize() -> Image.Image:
        img = decoded.copy()
        img.thumbnail((max_px, max_px), Image.Resampling.LANCZOS)
        return img

    small = resize()

    def encode() -> bytes:
        buf = io.BytesIO()
        small.save(buf, format="JPEG", quality=JPEG_QUALITY)
        return buf.getvalue()

    out = process_image(src, max_px)

    def data_url() -> str:
        return base64.b64encode(out.path.read_bytes()).decode()

    rows = [
        ("decode (draft)", ms(lambda: decode(True), runs)),
        ("decode-full", ms(lambda: decode(False), runs)),
        ("resize", ms(resize, runs)),
        ("encode", ms(encode, runs)),
        ("process_image", ms(lambda: process_image(src, max_px), runs)),
        ("data URL", ms(data_url, runs)),
    ]
    print(
        f"12 MP photo: {len(data) / 1e6:.1f} MB JPEG {Image.open(src).size} → "
        f"{out.width}x{out.height}, {out.path.stat().st_size / 1e3:.0f} kB "
        f"({len(data_url()) / 1e3:.0f} kB base64); median of {runs}"
    )
    for name, v in rows:
        print(f"  {name:<16} {v:8.1f} ms")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def part2(data: bytes, turns: int) -> None:
    from bot.model import warm_up
    from bot.app.daemon import Daemon
    from tests.e2e import make_config, telegram_section
    from tests.fakes.llm import FakeLLM
    from tests.fakes.telegram import FakeTelegram

    logging.disable(logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="media-bench-e2e-"))
    owners = [1000 + i for i in range(turns)]
    async with FakeLLM(keep_requests=False) as llm:
        seen_images: list[int] = []

        def answer(req: dict):
            from tests.fakes.llm import image_urls, text

            seen_images.append(len(image_urls(req)))
            return text("got it")

        llm.default = answer
        tg = FakeTelegram(token="123456:TEST-telegram-token", bot_username="chela_bot")
        await tg.start()
        try:
            cfg = make_config(
                tmp,
                llm,
                channels=telegram_section(tg, allow_from=[str(o) for o in owners]),
                session={"dm_scope": "per-channel-peer"},
                media={"vision": "on"},
            )
            await asyncio.to_thread(warm_up)
            d = Daemon(cfg)
            await d.start()
            try:
                # one small image turn first: Pillow and the code paths loaded
                tg.inject_message(owners[0], "warm", from_id=owners[0], photo=image_bytes(64, 64))
                await tg.wait_for_sent(1, timeout=30)
                base_peak, base_now = rss_mb(), current_rss_mb()
                t0 = time.perf_counter()
                for o in owners:
                    tg.inject_message(o, "what is this?", from_id=o, photo=data)
                await tg.wait_for_sent(1 + turns, timeout=300)
                wall = time.perf_counter() - t0
            finally:
                await d.stop()
        finally:
            await tg.stop()
    print(
        f"{turns} concurrent 12 MP image turns (Telegram → daemon → FakeLLM): "
        f"{wall:.2f} s to the last reply; images per request {sorted(set(seen_images[1:]))}"
    )
    print(
        f"  RSS before: {base_now:.0f} MB (peak so far {base_peak:.0f} MB); "
        f"peak after: {rss_mb():.0f} MB (+{rss_mb() - base_peak:.0f} MB)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--turns", type=int, default=10)
    args = ap.parse_args()
    data = photo_12mp()
    part1(data, args.runs)
    asyncio.run(part2(data, args.turns))
    os._exit(0)  # skip interpreter teardown of litellm's threads


if __name__ == "__main__":
    main()
