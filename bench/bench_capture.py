"""memory.capture vs memory.add in one large space, beside raw APSW doing an add's inserts.

Each store is pre-filled with N memories in ONE space (so capture takes its FTS-bounded path for related
memories, docs/governance.md). Then rounds alternate: raw APSW adds (the bench_add baseline: one BEGIN IMMEDIATE with
the memories, memory_fts, memory_versions and events inserts), hivemem memory.add, hivemem memory.capture,
each with fresh texts, over one persistent socket connection. Target: capture p50 <= 3 x add p50.

    .venv/bin/python bench/bench_capture.py [--sizes 10000,100000] [--ops 600] [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import benchlib as bl
from bench_add import RawStore

SPACE = "project/bench"
TARGET = 3.0


def measure(size: int, ops: int, rounds: int, keep: bool) -> dict[str, float]:
    gen = bl.TextGen(seed=size + 11)
    texts = [content for _, content in gen.memories(size + 3 * ops + 30, 80, 400)]
    fill, rest = texts[:size], texts[size:]
    home = bl.Home(f"capture-{size}")
    try:
        t = time.perf_counter()
        bl.prefill(home, [(SPACE, c) for c in fill])
        raw = RawStore(os.path.join(home.base, "raw.db"))
        raw.bulk([(SPACE, c) for c in fill])
        print(f"  prefilled {size:,} memories into both stores in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        client = home.client()
        for _ in range(10):  # warm the connection, the caches and the daemon's plans
            client.call("memory.add", space=SPACE, content=rest.pop())
            client.call("memory.capture", space=SPACE, content=rest.pop())
            raw.add(SPACE, rest.pop())
        lat: dict[str, list[float]] = {"raw": [], "add": [], "capture": []}
        exhaustive = 0
        chunk = ops // rounds
        for _ in range(rounds):
            for _ in range(chunk):
                t = time.perf_counter()
                raw.add(SPACE, rest.pop())
                lat["raw"].append(time.perf_counter() - t)
            for _ in range(chunk):
                t = time.perf_counter()
                assert client.call("memory.add", space=SPACE, content=rest.pop())["changed"]
                lat["add"].append(time.perf_counter() - t)
            for _ in range(chunk):
                t = time.perf_counter()
                result = client.call("memory.capture", space=SPACE, content=rest.pop())
                lat["capture"].append(time.perf_counter() - t)
                exhaustive += bool(result["exhaustive"])
        client.close()
        raw.conn.close()
    finally:
        home.cleanup(keep)
    out = {f"{k}_p{q}": bl.ms(bl.pct(v, q)) for k, v in lat.items() for q in (50, 99)}
    return out | {"n": float(chunk * rounds), "exhaustive": float(exhaustive)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "10000,100000")
    parser.add_argument("--ops", type=int, default=600, help="measured operations of each kind per size")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds (default 6)")
    args = parser.parse_args()
    bl.print_machine("bench_capture: memory.capture vs memory.add in one space, beside raw APSW adds")
    rows = []
    failed = False
    for size in bl.parse_sizes(args.sizes):
        print(f"size {size:,}: measuring {args.ops:,} of each ...", file=sys.stderr, flush=True)
        m = measure(size, args.ops, args.rounds, args.keep)
        ratio = m["capture_p50"] / m["add_p50"]
        failed |= ratio > TARGET
        rows.append((size, int(m["n"]), m["raw_p50"], m["add_p50"], m["capture_p50"], ratio,
                     bl.verdict(ratio <= TARGET), m["raw_p99"], m["add_p99"], m["capture_p99"],
                     int(m["exhaustive"])))  # fmt: skip
    print("Latency in ms per operation (client-side round trip for hivemem). One space holds the whole store.")
    print(f"Target: capture p50 <= {TARGET:g} x add p50. `exhaustive` counts captures that compared the whole space.\n")
    bl.table(
        ("memories in the space", "ops each", "raw add p50", "add p50", "capture p50", "capture/add", "target",
         "raw add p99", "add p99", "capture p99", "exhaustive"),
        rows,
    )  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
