"""`store check` on the writer against `store check --online` on a reader, and what each does to writes.

For each store size: the time of one check through the daemon (owner connection) either way, beside the raw
`PRAGMA integrity_check` and `PRAGMA quick_check` on a read-only APSW connection to the same file (the floor of
any check); then `memory.add` latency from a second client while no check runs, while the writer's check runs,
and while the online check runs (the health page's). The claim measured: the online check never holds writes up,
so adds during it stay near the idle latency, while adds during the writer's check wait for it.

    .venv/bin/python bench/bench_check.py [--sizes 10000,100000] [--adds 50]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

import benchlib as bl
from hivemem.store.sqlite.db import connect

SPACES = 20


def once(run: Any) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def adds_during(home: bl.Home, check: dict[str, Any] | None, adds: int, tag: str) -> list[float]:
    """Latencies of `adds` memory.add calls, started while a check (if any) runs on another connection."""
    checker = home.client()
    writer = home.client()
    done = threading.Event()

    def run_check() -> None:
        try:
            while check is not None and not done.is_set():
                checker.call("store.check", **check)
        finally:
            done.set()

    thread = threading.Thread(target=run_check, daemon=True)
    if check is not None:
        thread.start()
        time.sleep(0.05)  # let the first check reach the daemon before the first add
    out = []
    for i in range(adds):
        content = f"{tag} add {i} {time.time_ns()}"
        out.append(once(lambda content=content: writer.call("memory.add", space="bench/adds", content=content)))
    done.set()
    if check is not None:
        thread.join()
    checker.close()
    writer.close()
    return out


def measure(size: int, adds: int, keep: bool) -> list[tuple[Any, ...]]:
    gen = bl.TextGen(seed=size)
    home = bl.Home(f"check-{size}")
    rows: list[tuple[Any, ...]] = []
    try:
        t = time.perf_counter()
        added = bl.prefill(home, gen.memories(size, 80, 400, SPACES))
        print(f"  prefilled {added:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        raw = connect(home.paths.store, readonly=True)
        owner = home.client()
        owner.call("store.status")  # the daemon is up and warm
        raw_integrity = once(lambda: raw.execute("PRAGMA integrity_check").fetchall())
        raw_quick = once(lambda: raw.execute("PRAGMA quick_check").fetchall())
        writer_check = once(lambda: owner.call("store.check"))
        online_check = once(lambda: owner.call("store.check", online=True))
        owner.close()
        raw.close()
        idle = adds_during(home, None, adds, "idle")
        under_writer = adds_during(home, {}, adds, "writer")
        under_online = adds_during(home, {"online": True}, adds, "online")
        rows.append((size, "store check (writer)", bl.ms(raw_integrity), bl.ms(raw_quick), bl.ms(writer_check),
                     bl.ms(bl.pct(idle, 50)), bl.ms(bl.pct(under_writer, 50)), bl.ms(max(under_writer))))  # fmt: skip
        rows.append((size, "store check --online", bl.ms(raw_integrity), bl.ms(raw_quick), bl.ms(online_check),
                     bl.ms(bl.pct(idle, 50)), bl.ms(bl.pct(under_online, 50)), bl.ms(max(under_online))))  # fmt: skip
    finally:
        home.cleanup(keep)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "10000,100000")
    parser.add_argument("--adds", type=int, default=50, help="memory.add calls per condition (default 50)")
    args = parser.parse_args()
    bl.print_machine("store check on the writer and on a reader, and memory.add while each runs")
    rows = []
    for size in bl.parse_sizes(args.sizes):
        rows += measure(size, args.adds, args.keep)
    bl.table(("memories", "check", "raw integrity ms", "raw quick ms", "check ms", "add p50 idle ms",
              "add p50 during ms", "add max during ms"), rows)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
