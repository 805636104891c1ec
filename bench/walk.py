"""The walk of one DM (ARCHITECTURE.md, move 0): how often control enters each product module.

    cd /work/main && python bench/walk.py [--module bot.conversation.pipeline] [--all]

The real daemon (python-telegram-bot against the fake Bot API, the fake LLM) in this process;
a warm-up DM first (imports, the prompt cache, the first SQLite statements), then one measured
DM from the owner: injected, answered, the reply seen by the fake.  While the measured DM is
handled a profiler watches every Python call.  An *entry* into module M is control
arriving in M (a call, a coroutine of M resumed, or a callee returning to M) from another
product module (`bot/` or
`channels/`): the nearest product frame on the stack, or for a coroutine the event loop resumed,
the product module that ran before the loop took over.

Reported (numbers, not a pass/fail test): for each product module, its entries and from how many
distinct modules they came; the figure of the house issue is the line of the conversation
pipeline, `bot.conversation.pipeline` (was `bot.conversation` before move 5): "re-entered N times from
K modules".
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.app.daemon import Daemon  # noqa: E402
from tests.e2e import TG_TOKEN, make_config, telegram_section  # noqa: E402
from tests.fakes.llm import FakeLLM, text  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

PRODUCT_DIRS = (str(ROOT / "bot") + os.sep, str(ROOT / "channels") + os.sep)


def product_module(filename: str) -> str | None:
    """`bot.conversation` for .../bot/router.py; None for anything outside bot/ and channels/."""
    if not filename.startswith(PRODUCT_DIRS):
        return None
    rel = Path(filename).relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class Walk:
    """A `sys.setprofile` hook following control between product modules.

    Control *enters* module M when a frame of M starts or resumes (a coroutine resumed by the
    event loop counts) and the product module that ran last was another one.  The caller is
    the nearest product frame on the stack; for a coroutine the event loop resumed, it is the
    product module that ran before the loop took over."""

    def __init__(self) -> None:
        self.entries: Counter[str] = Counter()
        self.sources: dict[str, set[str]] = defaultdict(set)
        # fresh calls (a frame's first start, not a coroutine resumed) of a module's own
        # functions and methods (closures and lambdas are ports handed to others, not
        # counted), by (callee module, the caller's module on the stack)
        self.calls: Counter[tuple[str, str]] = Counter()
        # the same fresh calls by the function entered: (callee module, qualname, caller)
        self.functions: Counter[tuple[str, str, str]] = Counter()
        self.last: str | None = None
        self._module_of: dict[str, str | None] = {}
        self._seen: dict[int, object] = {}  # frames already started (kept alive: ids stay)

    def _module(self, filename: str) -> str | None:
        mod = self._module_of.get(filename, "")
        if mod == "":
            mod = self._module_of[filename] = product_module(filename)
        return mod

    def _nearest(self, frame) -> str | None:
        while frame is not None:
            mod = self._module(frame.f_code.co_filename)
            if mod is not None:
                return mod
            frame = frame.f_back
        return None

    def __call__(self, frame, event, arg) -> None:
        if event == "return":
            back = self._nearest(frame.f_back)
            if back is None:
                return
            here = self._module(frame.f_code.co_filename)
            if here is not None and here != back:
                self._enter(back, here)  # control comes back to the caller's module
            self.last = back
            return
        if event != "call":
            return
        callee = self._module(frame.f_code.co_filename)
        if callee is None:
            return
        on_stack = self._nearest(frame.f_back)
        caller = on_stack or self.last
        self.last = callee
        if caller is not None and caller != callee:
            self._enter(callee, caller)
        if id(frame) not in self._seen:
            self._seen[id(frame)] = frame
            if on_stack not in (None, callee) and "<" not in frame.f_code.co_qualname:
                self.calls[(callee, on_stack)] += 1
                self.functions[(callee, frame.f_code.co_qualname, on_stack)] += 1

    def _enter(self, module: str, source: str) -> None:
        self.entries[module] += 1
        self.sources[module].add(source)


async def one_dm(tg: FakeTelegram, n: int) -> None:
    tg.inject_message(42, f"hello {n}", from_id=42)
    await tg.wait_for_sent(n, timeout=30)


STAGES = tuple(
    f"bot.conversation.{m}"
    for m in ("intake", "dispatch", "commands", "prepare", "run", "reply", "commit")
)


def stage_callers(walk: Walk) -> dict[str, Counter[str]]:
    """Who called each pipeline stage's functions (ARCHITECTURE.md rule 3: only
    ``bot.conversation.pipeline`` sequences them): stage -> caller module -> calls."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for (callee, caller), n in walk.calls.items():
        stage = next((s for s in STAGES if callee == s or callee.startswith(s + ".")), None)
        if stage is not None and not caller.startswith(stage):
            out[stage][caller] += n
    return dict(out)


def stage_entries(walk: Walk) -> dict[str, Counter[str]]:
    """How often each stage's functions were entered from another module (its public
    method, and any other function some module calls; who called them is
    ``stage_callers``): stage -> "<submodule>:<qualname>" -> fresh calls."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for (callee, name, caller), n in walk.functions.items():
        stage = next((s for s in STAGES if callee == s or callee.startswith(s + ".")), None)
        if stage is not None and not caller.startswith(stage):
            out[stage][f"{callee.removeprefix(stage)}:{name}"] += n
    return dict(out)


async def main(args: argparse.Namespace) -> None:
    llm = FakeLLM()
    await llm.start()
    llm.script(*[text(f"reply {i}") for i in range(2)])
    tg = FakeTelegram(token=TG_TOKEN, bot_username="chela_bot")
    await tg.start()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = make_config(Path(tmp), llm, channels=telegram_section(tg))
        daemon = Daemon(cfg)
        await daemon.start()
        try:
            await one_dm(tg, 1)  # warm-up
            walk = Walk()
            threading_profile = sys.getprofile()
            sys.setprofile(walk)
            try:
                await one_dm(tg, 2)
            finally:
                sys.setprofile(threading_profile)
        finally:
            await daemon.stop()
            await tg.stop()
            await llm.stop()
    report(walk, args)


def report(walk: Walk, args: argparse.Namespace) -> None:
    rows = sorted(walk.entries.items(), key=lambda kv: (-kv[1], kv[0]))
    if not args.all:
        rows = [r for r in rows if r[0].startswith("bot.")]
    print(f"{'module':40} {'entries':>8} {'from modules':>13}")
    for mod, n in rows:
        print(f"{mod:40} {n:8d} {len(walk.sources[mod]):13d}")
    print(f"\n{'stage':34} called from (fresh calls)")
    for stage, callers in sorted(stage_callers(walk).items()):
        print(f"{stage:34} {', '.join(f'{c} {n}' for c, n in sorted(callers.items()))}")
    print(f"\n{'stage':34} entered (fresh calls from another module)")
    for stage, funcs in sorted(stage_entries(walk).items()):
        print(f"{stage:34} {', '.join(f'{f} {n}' for f, n in sorted(funcs.items()))}")
    focus = args.module
    print(
        f"\n{focus}: re-entered {walk.entries.get(focus, 0)} times "
        f"from {len(walk.sources.get(focus, ()))} modules "
        f"({', '.join(sorted(walk.sources.get(focus, ())))})"
    )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--module", default="bot.conversation.pipeline", help="the module to summarise")
    p.add_argument("--all", action="store_true", help="list channels/ modules too")
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(p.parse_args()))
