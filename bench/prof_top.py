"""Summarise a py-spy raw (collapsed) profile: the top functions by self and by total time.

    py-spy record -r 250 -f raw -o /tmp/p.txt -- python3 bench/e2e_bench.py ...
    python3 bench/prof_top.py /tmp/p.txt [--top 25] [--grep burst]

Each line of the raw file is ``frame;frame;...;leaf COUNT``; a frame is ``func (file:line)``.
Line numbers are dropped so a function's samples add up; files are shown from their package.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def _name(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m["file"]
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m['func']} ({path})"


def summarise(lines: list[str]) -> tuple[Counter[str], Counter[str], int]:
    self_c: Counter[str] = Counter()
    total_c: Counter[str] = Counter()
    n = 0
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        n += k
        frames = [_name(f) for f in stack.split(";")]
        self_c[frames[-1]] += k
        for f in set(frames):
            total_c[f] += k
    return self_c, total_c, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--idle", action="store_true", help="keep samples idle in select/epoll")
    ap.add_argument(
        "--drop",
        default=r"_find_and_load|Daemon\.start|Daemon\.stop",
        help="drop stacks matching this regex (default: imports, start and stop)",
    )
    a = ap.parse_args()
    with open(a.raw) as f:
        lines = f.readlines()
    if not a.idle:
        lines = [ln for ln in lines if not re.search(r"\b(select|poll) \(selectors", ln)]
    if a.drop:
        lines = [ln for ln in lines if not re.search(a.drop, ln)]
    self_c, total_c, n = summarise(lines)
    print(f"{n} busy samples")
    print("-- self")
    for name, k in self_c.most_common(a.top):
        print(f"{k / n * 100:6.1f}%  {name}")
    print("-- total (inclusive)")
    for name, k in total_c.most_common(a.top):
        print(f"{k / n * 100:6.1f}%  {name}")


if __name__ == "__main__":
    main()
