"""CPU per HTTP call of the daemon's client side (not a test): the Telegram channel's
typing + sendMessage pair, and one light-path model request (``bot.model.openai_compat``)
with a body the size of a real turn's (a ~6.6 KB system prompt, a few messages, a tool).
The fakes run in a child process, so only the client's CPU is counted (process time of
this process per call, sequential calls on kept-alive connections).

    python3 bench/wire_bench.py [--calls 1500] [--rounds 5]
    python3 bench/wire_bench.py --roots /tmp/old /work/main   # interleaved: old, new, old, …
    python3 bench/wire_bench.py --floor    # aiohttp's own user CPU per POST vs a raw exchange

With ``--roots`` each round runs every tree in its own process (``PYTHONPATH=<root>``)
against the same fakes, in turn, and the best of the rounds is printed per tree (the host
is noisy: best of several, interleaved).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
TOKEN = "123:WIREBENCH"


def _body_kw(base: str) -> dict:
    system = "You are a personal assistant running inside Chela.\n" + (
        "- a line of the system prompt describing a tool or a rule, about this long.\n" * 85
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "[Fri 2026-11-27 08:00 UTC] alice: hello there, how are you?"},
        {"role": "system", "content": "Conversation summary: " + "words " * 90},
        {"role": "assistant", "content": "I am fine, thanks for asking."},
        {"role": "user", "content": "and what time is it?"},
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "session_status",
                "description": "Show the current date and time in the user's time zone",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    return {
        "model": "openai/fake-model",
        "messages": messages,
        "tools": tools,
        "api_base": base,
        "api_key": "sk-bench",
        "timeout": 60.0,
        "num_retries": 0,
        "drop_params": True,
    }


async def _serve() -> None:
    sys.path.insert(0, str(HERE.parents[1]))
    from tests.fakes.llm import FakeLLM, text, usage
    from tests.fakes.telegram import FakeTelegram

    llm = FakeLLM(keep_requests=False)
    llm.default = lambda req: text("ok", usage=usage(10, 2))
    await llm.start()
    tg = FakeTelegram(token=TOKEN, bot_username="chela_bot")
    await tg.start()
    print(json.dumps({"llm": llm.base_url, "tg": tg.api_base}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin


async def _tg_calls(tg_base: str, calls: int) -> float:
    import tempfile

    from channels.base import OutboundMessage
    from channels.telegram import TelegramChannel

    ch = TelegramChannel(
        token=TOKEN, api_base=tg_base, media_dir=Path(tempfile.mkdtemp()) / "media"
    )
    await ch.open_for_sending()
    msg = OutboundMessage(chat_id="42", text="Here is the answer to your question, in a line.")

    async def pair() -> None:
        await ch.typing("42")
        await ch.send(msg)

    for _ in range(100):
        await pair()
    t0 = time.process_time()
    for _ in range(calls):
        await pair()
    spent = time.process_time() - t0
    await ch.stop()
    return spent / calls * 1000


async def _tg_layer(calls: int) -> float:
    """Our Telegram layer alone (Sender → PTB's ``Bot`` → a request that encodes the form
    like AiohttpRequest and answers at once): µs of CPU per typing+send pair, no socket.
    (A tree from before issue 35 runs with its own ``LeanBot``, for an A/B.)"""
    import urllib.parse

    from telegram import Bot
    from telegram.request import BaseRequest

    from channels.base import OutboundMessage
    from channels.telegram import send
    from channels.telegram.send import Sender

    sent = b'{"ok":true,"result":{"message_id":5,"chat":{"id":42,"type":"private"},"date":1}}'

    class Stub(BaseRequest):
        read_timeout = 5.0

        async def initialize(self) -> None: ...

        async def shutdown(self) -> None: ...

        async def do_request(self, url, method, request_data=None, **kw):  # type: ignore[no-untyped-def]
            body = urllib.parse.urlencode(request_data.json_parameters).encode()
            assert body and not request_data.multipart_data
            if url.endswith("sendChatAction"):
                return 200, b'{"ok":true,"result":true}'
            return 200, sent

    bot_class = getattr(send, "LeanBot", Bot)
    bot = bot_class(TOKEN, request=Stub(), get_updates_request=Stub())
    sender = Sender(
        lambda: bot,
        account="bench",
        chunk_limit=4096,
        request_timeout=5.0,
        send_retries=3,
        max_retry_after=30.0,
        backoff_initial=0.5,
        backoff_max=5.0,
    )
    msg = OutboundMessage(chat_id="42", text="Here is the answer to your question, in a line.")
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(calls):
            await sender.typing("42")
            await sender.send(msg)
        best = min(best, time.process_time() - t0)
    return best / calls * 1e6


async def _model_calls(llm_base: str, calls: int) -> float:
    from bot.model import openai_compat

    kw = _body_kw(llm_base)
    route = openai_compat.route(kw["model"])
    for _ in range(100):
        await openai_compat.send(dict(kw), route, 60.0)
    t0 = time.process_time()
    for _ in range(calls):
        await openai_compat.send(dict(kw), route, 60.0)
    return (time.process_time() - t0) / calls * 1000


async def _measure(where: dict, calls: int) -> dict:
    import logging

    logging.disable(logging.WARNING)
    return {
        "tg layer us": await _tg_layer(calls),
        "tg typing+send ms": await _tg_calls(where["tg"], calls),
        "model call ms": await _model_calls(where["llm"], calls),
    }


async def _floor(where: dict, calls: int) -> dict:
    """The HTTP client's own floor (``--floor``): user CPU per POST of a 7 KB JSON body to
    the fake LLM through a bare aiohttp session (no code of ours) and through a raw
    HTTP/1.1 exchange on asyncio streams (kept-alive, Content-Length answers only)."""
    import resource

    import aiohttp

    url = where["llm"] + "/chat/completions"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 7000}]})
    data = body.encode()

    def user() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_utime

    async def timed(one) -> float:  # type: ignore[no-untyped-def]
        for _ in range(100):
            await one()
        t0 = user()
        for _ in range(calls):
            await one()
        return (user() - t0) / calls * 1e6

    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        limit = aiohttp.ClientTimeout(total=60)
        kind = {"Content-Type": "application/json"}

        async def via_aiohttp() -> None:
            async with session.post(url, data=data, headers=kind, timeout=limit) as resp:
                await resp.read()

        aio = await timed(via_aiohttp)
    hostport = url.split("//", 1)[1].split("/", 1)[0]
    host, port = hostport.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {hostport}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data

    async def via_streams() -> None:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":", 1)[1]))

    raw = await timed(via_streams)
    writer.close()
    return {"aiohttp POST user us": aio, "raw streams POST user us": raw}


def _child(root: str, where: dict, calls: int, extra: tuple[str, ...] = ()) -> dict:
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", json.dumps(where), "--calls", str(calls), *extra],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--roots", nargs="*", default=None)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--child", default=None)
    ap.add_argument("--floor", action="store_true", help="aiohttp's own cost per request")
    a = ap.parse_args()
    if a.serve:
        asyncio.run(_serve())
        return
    if a.child:
        sys.path.insert(0, os.getcwd())
        measure = _floor if a.floor else _measure
        print(json.dumps(asyncio.run(measure(json.loads(a.child), a.calls))))
        return
    roots = a.roots or [str(HERE.parents[1])]
    server = subprocess.Popen(
        [sys.executable, str(HERE), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(HERE.parents[1]),
    )
    try:
        assert server.stdout is not None
        where = json.loads(server.stdout.readline())
        best: dict[str, dict[str, float]] = {r: {} for r in roots}
        for n in range(a.rounds):
            for root in roots:
                got = _child(root, where, a.calls, ("--floor",) if a.floor else ())
                print(f"round {n + 1} {root}: " + ", ".join(f"{k} {v:.3f}" for k, v in got.items()))
                for k, v in got.items():
                    best[root][k] = min(v, best[root].get(k, v))
        print("best of rounds:")
        for root, vals in best.items():
            print(f"  {root}: " + ", ".join(f"{k} {v:.3f}" for k, v in vals.items()))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
