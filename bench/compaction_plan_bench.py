"""Micro-bench (not a test): the per-turn compaction plan of a session of 300 stored
messages, in ms per plan (``Compactor.history_for_turn`` + the loop's first fit check).

    cd /work/main && python bench/compaction_plan_bench.py [--messages 300] [--plans 300]
        [--litellm]   # count with litellm's tokenizer (a model on litellm's path)

No model is called: the window is large enough that the plan only counts and decides.
After each plan the turn (user message and answer) is stored, as the daemon does, so the
session grows by two messages a plan (300 -> 300 + 2 * plans).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.compaction import Compactor, message_counter
from bot.agent.request import TurnRequest
from bot.config import parse_config
from bot.store import Store

SYSTEM = "You are Chela.\n" + "\n".join(f"## Section {i}\n" + "rule text " * 40 for i in range(30))
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "does a thing " * 20,
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        },
    }
    for i in range(20)
]


def config(tmp: Path, litellm: bool):
    model = "anthropic/claude-3-5-haiku-20241022" if litellm else "openai/fake-model"
    agent = {
        "workspace": str(tmp / "ws"),
        "state_dir": str(tmp / "state"),
        "model": model,
        "api_base": "" if litellm else "http://127.0.0.1:9/v1",
        "history_limit": 1000,
        "compaction": {"context_window": 1_000_000},
    }
    return parse_config({"agent": agent, "heartbeat": {"every": "0m"}})


def request(key: str, i: int) -> TurnRequest:
    return TurnRequest(session_key=key, user_text=f"message {i}: " + "words " * 60)


async def bench(n_messages: int, plans: int, litellm: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as d:
        cfg = config(Path(d), litellm)
        if litellm:
            from bot.model import litellm_path

            await litellm_path.litellm()
        store = Store(Path(d) / "state.db", token_counter=message_counter(cfg))
        key = "agent:main:main"
        for t in range(n_messages // 2):
            store.commit_turn(
                key,
                f"t{t}",
                [
                    {"role": "user", "content": f"question {t}: " + "some text " * 50},
                    {"role": "assistant", "content": f"answer {t}: " + "more text " * 80},
                ],
            )
        comp = Compactor(cfg, store, llm_factory=lambda *a, **k: None, main_llm=None)
        out = []
        for i in range(plans):
            req = request(key, i)
            new = [{"role": "user", "content": req.user_text}]
            t0 = time.perf_counter()
            hist, state = await comp.history_for_turn(req, SYSTEM, TOOLS, None, None, new)  # type: ignore[arg-type]
            fit = comp.fitter(req, SYSTEM, TOOLS, None, None, state)  # type: ignore[arg-type]
            convo = [{"role": "system", "content": SYSTEM}, *hist, *new]
            await fit(convo, False)
            out.append((time.perf_counter() - t0) * 1000)
            # the turn is stored, as the daemon does: the next plan sees two more messages
            store.commit_turn(key, f"n{i}", [*new, {"role": "assistant", "content": "ok " * 40}])
        store.close()
        return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--messages", type=int, default=300)
    p.add_argument("--plans", type=int, default=100)
    p.add_argument("--litellm", action="store_true")
    a = p.parse_args()
    ms = asyncio.run(bench(a.messages, a.plans, a.litellm))
    ms = ms[5:]  # warm-up
    print(
        f"{a.messages} messages, {'litellm' if a.litellm else 'estimate'} counting: "
        f"plan p50 {statistics.median(ms):.3f} ms, mean {statistics.mean(ms):.3f} ms, "
        f"p90 {sorted(ms)[int(len(ms) * 0.9)]:.3f} ms"
    )


if __name__ == "__main__":
    main()
