"""Prompt engine benchmark (not a pass/fail test).

    python bench/prompt_bench.py

Workspace: 8 bootstrap files of 20,000 chars each, 10 skills, 25 tools.
Budgets: cold build < 10 ms, cached lookup < 20 µs.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.prompt.builder import build_prompt
from bot.prompt.cache import PromptCache
from bot.prompt.context import PromptContext, RuntimeInfo, ToolSpec

FILES = (
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
)
COLD_RUNS = 50
LOOKUPS = 10_000


def make_workspace(root: Path) -> Path:
    ws = root / "workspace"
    ws.mkdir()
    line = "- a line of workspace notes that is long enough to look like real prose.\n"
    for name in FILES:
        body = "---\nname: Bench\n---\n" + (line * (20000 // len(line) + 1))
        (ws / name).write_text(body[:20000])
    for i in range(10):
        d = ws / "skills" / f"skill-{i:02d}"
        d.mkdir(parents=True)
        (d / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: Does thing number {i} & more <fast>.\n---\nSteps...\n"
        )
    # Pretend the files were written a while ago (a freshly edited file triggers one
    # extra verification read in the cache; see bot/prompt/cache.py).
    old = time.time_ns() - 3600 * 10**9
    for p in [*ws.rglob("*"), ws]:
        os.utime(p, ns=(old, old))
    return ws


def make_ctx(ws: Path) -> PromptContext:
    names = [
        "read",
        "write",
        "edit",
        "exec",
        "process",
        "web_search",
        "web_fetch",
        "browser",
        "cron",
        "message",
        "gateway",
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "session_status",
        "image",
        "memory_search",
        "memory_get",
        "tts",
        "calendar",
        "weather",
        "notes",
        "todo",
        "gpio_read",
    ]
    tools = tuple(
        ToolSpec(
            n,
            f"The {n} tool: does {n} things with care.",
            {"type": "object", "properties": {"arg": {"type": "string"}}},
        )
        for n in names
    )
    assert len(tools) == 25
    return PromptContext(
        workspace=ws,
        model="openai/gpt-4o-mini",
        tools=tools,
        timezone="Europe/Paris",
        channel="telegram",
        capabilities=("media", "reactions"),
        reactions="minimal",
        heartbeat_enabled=True,
        owner_numbers=("+1555",),
        runtime=RuntimeInfo(host="bench", os="linux", arch="x86_64", python="3.11", shell="bash"),
    )


def us(ns: float) -> str:
    return f"{ns / 1000:.1f} µs"


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = make_workspace(Path(tmp))
        ctx = make_ctx(ws)
        r = build_prompt(ctx)
        print(
            f"prompt: {r.chars} chars (~{r.approx_tokens} tokens), {len(r.sections)} sections, "
            f"{len(r.deps)} deps, {len(r.skills)} skills, {len(r.tools)} tools"
        )

        samples = []
        for _ in range(COLD_RUNS):
            t = time.perf_counter_ns()
            build_prompt(ctx)
            samples.append(time.perf_counter_ns() - t)
        print(
            f"build_prompt (pure build)           median {ms(statistics.median(samples))}  (budget 10 ms)"
        )

        for watch in (True, False):
            label = "inotify" if watch else "stat"
            cold = []
            for _ in range(COLD_RUNS):
                t = time.perf_counter_ns()
                c = PromptCache(watch=watch)
                c.get(ctx)
                cold.append(time.perf_counter_ns() - t)
                c.close()
            c = PromptCache(watch=watch)
            if watch and not c.watching:
                print("inotify unavailable on this system; skipping")
                continue
            first = c.get(ctx)
            hot = []
            perf = time.perf_counter_ns
            get = c.get
            for _ in range(LOOKUPS):
                t = perf()
                get(ctx)
                hot.append(perf() - t)
            assert get(ctx) is first and c.builds == 1
            t = perf()
            for _ in range(LOOKUPS):
                get(ctx)
            loop = (perf() - t) / LOOKUPS
            # An equal but distinct context object (what a caller building a fresh ctx per
            # turn passes): the lookup has to hash the context.
            fresh = [dataclasses.replace(ctx) for _ in range(LOOKUPS)]
            eq = []
            for other in fresh:
                t = perf()
                get(other)
                eq.append(perf() - t)
            assert get(fresh[-1]) is first
            print(
                f"cache[{label:7s}] cold get (new cache) median {ms(statistics.median(cold))}  (budget 10 ms)"
            )
            print(
                f"cache[{label:7s}] cached get, same ctx object   median {us(statistics.median(hot))}, "
                f"p99 {us(sorted(hot)[int(LOOKUPS * 0.99)])}, loop mean {us(loop)}  (budget 20 µs)"
            )
            print(
                f"cache[{label:7s}] cached get, equal new ctx     median {us(statistics.median(eq))}, "
                f"p99 {us(sorted(eq)[int(LOOKUPS * 0.99)])}  (budget 20 µs)"
            )
            c.close()


if __name__ == "__main__":
    main()
