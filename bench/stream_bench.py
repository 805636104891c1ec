"""Streaming benchmark (SPEC §12; not a pass/fail test): time to first token.

    cd /work/main && python bench/stream_bench.py [--tokens 150] [--rate 50] [--runs 5]

A fake model streams ``--tokens`` tokens of ~4 characters at ``--rate`` tokens/s
(``FakeLLM.stream_interval``), through the real daemon (litellm with ``stream=True``, the
agent loop, the conversation) to:

  HTTP      the OpenAI-compatible API with ``stream: true`` read by the ``openai`` SDK:
            request sent → first content chunk (TTFT), → last chunk (total); the same
            answer without ``stream`` for comparison (its first token is its last).
  Telegram  FakeTelegram → daemon with ``streaming = "partial"`` (real clock, previews
            edited at most once a second): message injected → the preview's sendMessage
            (TTFT), → the final reply's editMessageText (total); Bot API calls per reply
            (sendMessage + editMessageText + deleteMessage; target ≤ 1 + one edit per
            second of streaming), and the same with streaming off.

Medians over ``--runs``.  Prints a table and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.app.daemon import Daemon
from tests.e2e import TG_TOKEN, make_config, telegram_section
from tests.fakes.llm import FakeLLM, delay, text
from tests.fakes.telegram import FakeTelegram

TOKEN = "bench-http-token-0123456789"


def answer(tokens: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]
    return " ".join(words[i % len(words)][:3] for i in range(tokens)) + "."


def scripted(llm: FakeLLM, tokens: int, stream: bool) -> None:
    """The answer; without streaming the fake waits as long as the stream would take
    (the model writes at the same speed either way)."""
    body = answer(tokens)
    if stream:
        llm.script(text(body))
        return
    chunks = -(-len(body) // llm.stream_chunk_chars)
    llm.script(delay(max(0, chunks - 1) * llm.stream_interval, text(body)))


async def http_run(llm: FakeLLM, port: int, tokens: int, stream: bool) -> tuple[float, float]:
    import openai

    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key=TOKEN, max_retries=0
    )
    scripted(llm, tokens, stream)
    t0 = time.perf_counter()
    first = None
    try:
        if not stream:
            await client.chat.completions.create(
                model="chela", messages=[{"role": "user", "content": "go"}]
            )
            t = time.perf_counter() - t0
            return t, t
        resp = await client.chat.completions.create(
            model="chela", messages=[{"role": "user", "content": "go"}], stream=True
        )
        async for chunk in resp:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - t0
        return first or 0.0, time.perf_counter() - t0
    finally:
        await client.close()


async def http_phase(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("ttft", "total", "plain")}
    async with FakeLLM() as llm:
        llm.keep_requests = False
        llm.stream_chunk_chars = 4
        llm.stream_interval = 1.0 / args.rate
        os.environ["BENCH_HTTP_TOKEN"] = TOKEN
        cfg = make_config(
            tmp / "http",
            llm,
            channels={
                "http": {"enabled": True, "listen": "127.0.0.1:0", "token_env": "BENCH_HTTP_TOKEN"}
            },
        )
        d = Daemon(cfg)
        await d.start()
        try:
            port = getattr(d.channels["http"], "bound_port", 0)
            await http_run(llm, port, 5, True)  # warm-up: litellm imported, connections open
            for _ in range(args.runs):
                ttft, total = await http_run(llm, port, args.tokens, True)
                out["ttft"].append(ttft)
                out["total"].append(total)
                plain, _ = await http_run(llm, port, args.tokens, False)
                out["plain"].append(plain)
        finally:
            await d.stop()
    return out


async def telegram_phase(
    args: argparse.Namespace, tmp: Path, streaming: str
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("ttft", "total", "calls", "edits")}
    async with FakeLLM() as llm:
        llm.keep_requests = False
        llm.stream_chunk_chars = 4
        llm.stream_interval = 1.0 / args.rate
        tg = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
        await tg.start()
        section = telegram_section(tg, streaming=streaming)
        cfg = make_config(tmp / f"tg-{streaming}", llm, channels=section)
        d = Daemon(cfg)
        await d.start()
        try:
            for run in range(args.runs + 1):  # the first run warms up
                scripted(llm, 5 if run == 0 else args.tokens, streaming == "partial")
                before = len(tg.calls)
                t0 = time.perf_counter()
                tg.inject_message(42, f"go {run}", from_id=42)
                await tg.wait_for(partial(_api, tg, before, "sendMessage"), 60)
                ttft = time.perf_counter() - t0
                # done: the final reply (the last call formats HTML)
                await tg.wait_for(partial(_final_sent, tg, before), 60)
                total = time.perf_counter() - t0
                await asyncio.sleep(0.3)
                if run == 0:
                    continue
                calls = [
                    m
                    for m, _ in tg.calls[before:]
                    if m.endswith("Message") or m.endswith("MessageText")
                ]
                out["ttft"].append(ttft)
                out["total"].append(total)
                out["calls"].append(float(len(calls)))
                out["edits"].append(float(calls.count("editMessageText")))
        finally:
            await d.stop()
            await tg.stop()
    return out


def _api(tg: FakeTelegram, before: int, method: str) -> bool:
    return any(m == method for m, _ in tg.calls[before:])


def _final_sent(tg: FakeTelegram, before: int) -> bool:
    """The final reply went out (it is the call that formats HTML)."""
    return any(p.get("parse_mode") == "HTML" for m, p in tg.calls[before:] if "essage" in m)


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=150)
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    stream_s = args.tokens / args.rate
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        http = await http_phase(args, tmp)
        tg_on = await telegram_phase(args, tmp, "partial")
        tg_off = await telegram_phase(args, tmp, "off")
    print(
        f"fake model: {args.tokens} tokens at {args.rate:g} tokens/s "
        f"(~{stream_s:.1f} s of streaming), medians of {args.runs} runs"
    )
    print(f"{'path':<34} {'first token':>12} {'full reply':>11} {'Bot API calls':>14}")
    print(
        f"{'HTTP stream: true':<34} {med(http['ttft']) * 1000:>9.0f} ms "
        f"{med(http['total']) * 1000:>8.0f} ms {'-':>14}"
    )
    print(
        f"{'HTTP without stream':<34} {med(http['plain']) * 1000:>9.0f} ms "
        f"{med(http['plain']) * 1000:>8.0f} ms {'-':>14}"
    )
    for label, r in (("Telegram streaming = partial", tg_on), ("Telegram streaming = off", tg_off)):
        print(
            f"{label:<34} {med(r['ttft']) * 1000:>9.0f} ms {med(r['total']) * 1000:>8.0f} ms "
            f"{med(r['calls']):>7.0f} ({med(r['edits']):.0f} edits)"
        )
    took = med(tg_on["total"])
    print(
        f"target Bot API calls per streamed reply: <= 1 + {math.ceil(took)} (the preview, then "
        f"one edit a second over the {took:.1f} s reply; the last edit is the final reply)"
    )


if __name__ == "__main__":
    asyncio.run(main())
