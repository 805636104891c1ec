"""The OpenAI-compatible HTTP API under load (SPEC §13): requests/s and latency for many
concurrent stateless clients, each an official ``openai`` SDK client, against the daemon
(HTTP channel on 127.0.0.1) and the fake LLM answering at once.

    python bench/openai_bench.py [--clients 100] [--requests 2000] [--system]

Every client runs a closed loop (send, wait for the answer, send again) until the
requests are used up.  Latency = the SDK call from start to the parsed answer.
``--system`` adds a client system message and one earlier exchange to every request.
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

TOKEN = "bench-openai-api-token-0123456789"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] if s else 0.0


async def run(clients: int, requests: int, with_system: bool) -> None:
    import logging

    import openai

    from bot.app.daemon import Daemon
    from tests.e2e import make_config
    from tests.fakes.llm import FakeLLM, text, usage

    logging.basicConfig(level=logging.WARNING)
    fake = FakeLLM(keep_requests=False)
    fake.default = lambda req: text("ok", usage=usage(10, 2))
    await fake.start()
    os.environ["BENCH_HTTP_TOKEN"] = TOKEN
    tmp = Path(tempfile.mkdtemp(prefix="chela-openai-bench-"))
    cfg = make_config(
        tmp,
        fake,
        channels={
            "http": {"enabled": True, "listen": "127.0.0.1:0", "token_env": "BENCH_HTTP_TOKEN"}
        },
    )
    d = Daemon(cfg)
    await d.start()
    base = f"http://127.0.0.1:{d.channels['http'].bound_port}/v1"
    messages: list[dict] = [{"role": "user", "content": "hello"}]
    if with_system:
        messages = [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "earlier question"},
            {"role": "assistant", "content": "earlier answer"},
            *messages,
        ]
    sdk = [openai.AsyncOpenAI(base_url=base, api_key=TOKEN, max_retries=0) for _ in range(clients)]
    # warm-up: litellm's first call, the prompt cache, connection pools
    await asyncio.gather(
        *(c.chat.completions.create(model="chela", messages=messages) for c in sdk[:10])
    )
    latencies: list[float] = []
    errors = 0
    left = requests

    async def client_loop(c: openai.AsyncOpenAI) -> None:
        nonlocal left, errors
        while left > 0:
            left -= 1
            t0 = time.perf_counter()
            try:
                r = await c.chat.completions.create(model="chela", messages=messages)
                assert r.choices[0].message.content == "ok"
            except Exception:
                errors += 1
                continue
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(client_loop(c) for c in sdk))
    wall = time.perf_counter() - started
    for c in sdk:
        await c.close()
    await d.stop()
    await fake.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ms = [x * 1000 for x in latencies]
    print(f"openai SDK -> Chela HTTP API -> FakeLLM: {clients} concurrent stateless clients")
    print(f"{'requests':>10} {'errors':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB':>8}")
    print(
        f"{len(ms):>10} {errors:>7} {len(ms) / wall:>8.1f} {pct(ms, 0.5):>8.1f} "
        f"{pct(ms, 0.99):>8.1f} {rss:>8.0f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--system", action="store_true", help="client system message + history")
    args = ap.parse_args()
    asyncio.run(run(args.clients, args.requests, args.system))


if __name__ == "__main__":
    main()
