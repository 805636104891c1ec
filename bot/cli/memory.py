"""``chela memory reindex|search|status``: each agent's memory index (search by meaning).

They work beside a running daemon: the index lives in the state database, which both open
(short transactions; an unchanged chunk is never embedded twice, whoever reads it first)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from bot.cli.common import load


def add_parser(sub) -> None:
    sp = sub.add_parser("memory", help="the memory index: reindex, search, status")
    verbs = sp.add_subparsers(dest="verb", required=True, metavar="VERB", help="what to do")
    reindex = _verb_parser(verbs, "reindex", "read the memory files and embed what is new")
    reindex.add_argument("--force", action="store_true", help="embed every chunk again")
    search = _verb_parser(verbs, "search", "search an agent's memory (the fused score)")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--limit", type=int, default=10, metavar="N", help="at most N hits")
    status = _verb_parser(verbs, "status", "model, chunks, vectors and progress per agent")
    for p in (reindex, search, status):
        p.add_argument("--agent", metavar="ID", help="only this agent (default: every agent)")
        p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=run)


def _verb_parser(verbs, name: str, what: str) -> argparse.ArgumentParser:
    sp = verbs.add_parser(name, help=what, description=what[0].upper() + what[1:] + ".")
    sp.add_argument(  # as add_common's, but a --config given before the verb stays in force
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="config file (default: $CHELA_CONFIG, ./config.toml, ~/.chela/config.toml)",
    )
    return sp


def run(args: argparse.Namespace) -> int:
    from bot.config import agent_config, agent_ids

    cfg = load(args)
    ids = agent_ids(cfg)
    if args.agent is not None and args.agent not in ids:
        print(
            f"chela memory: unknown agent {args.agent!r} (agents: {', '.join(ids)})",
            file=sys.stderr,
        )
        return 2
    if args.verb == "search" and args.agent is None:
        args.agent = cfg.agent.id  # one agent's memory: the default agent's
    chosen = [args.agent] if args.agent is not None else ids
    return asyncio.run(_run(args, [agent_config(cfg, a) for a in chosen]))


async def _run(args: argparse.Namespace, configs: list[Any]) -> int:
    from bot.memory import memory_index
    from bot.store import Store

    store = Store(configs[0].db_path)
    out: list[dict[str, Any]] = []
    try:
        for cfg in configs:
            index = memory_index(cfg, store)
            if index.embedder is None:
                out.append({"agent": cfg.agent.id, "model": "", "note": "full-text only"})
                await index.stop()
                continue
            try:
                out.append(await _verb(args, index))
            finally:
                await index.stop()
    finally:
        store.close()
    _print(args, out)
    return 1 if any(r.get("error") for r in out) else 0


async def _verb(args: argparse.Namespace, index: Any) -> dict[str, Any]:
    from bot.memory.embed import Unavailable
    from bot.model import BudgetRefused

    row: dict[str, Any] = {"agent": index.agent, "model": index.model}
    if args.verb == "search":
        found = await index.search(args.query, max(1, args.limit))
        row["hits"] = [
            {"path": h.path, "start": h.start, "end": h.end, "score": h.score, "text": h.snippet}
            for h in found.hits
        ]
        row["words_only"] = found.words_only
        return row
    if args.verb == "reindex":
        try:
            row["embedded"] = await index.refresh(force=args.force)
        except Unavailable as e:
            row["error"] = f"the embedding model does not answer: {e}"
        except BudgetRefused as e:
            row["error"] = e.message
    s = await asyncio.to_thread(index.status)
    row.update(
        chunks=s.chunks,
        texts=s.texts,
        vectors=s.vectors,
        other_model_vectors=s.other_vectors,
        last_indexed=s.indexed,
        reembedding=bool(s.other_vectors) and s.vectors < s.texts,
    )
    return row


def _print(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    if args.json:
        print(json.dumps(rows if args.verb != "search" else rows[0], indent=2))
        return
    for r in rows:
        if "note" in r:
            print(f"{r['agent']}: no [memory] embedding_model: memory_search is full-text only")
        elif args.verb == "search":
            _print_hits(r)
        else:
            _print_status(r)


def _print_hits(r: dict[str, Any]) -> None:
    for h in r["hits"]:
        lines = f"{h['start']}" if h["start"] == h["end"] else f"{h['start']}-{h['end']}"
        print(f"{h['path']}:{lines} (score {h['score']:.4f}): {h['text'][:200]}")
    if not r["hits"]:
        print("no matches")
    if r["words_only"]:
        print(f"(searched by words only: {r['words_only']})")


def _print_status(r: dict[str, Any]) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["last_indexed"]))
    done = f"{r['vectors']}/{r['texts']} texts embedded"
    if r["reembedding"]:
        done += f" (re-embedding for the new model; {r['other_model_vectors']} old vectors)"
    head = f"{r['agent']}: model {r['model']}, {r['chunks']} chunks, {done}"
    print(head + (f", last indexed {when}" if r["last_indexed"] else ", never indexed"))
    if "embedded" in r:
        print(f"  embedded now: {r['embedded']}")
    if r.get("error"):
        print(f"  error: {r['error']}", file=sys.stderr)
