"""memory.search over the socket vs the raw FTS5 bm25 query hivemem runs, on the same database file.

Baseline: a read-only APSW connection to the daemon's store.db executing the full-text list as schema 1 ran it
(hivemem.store.sqlite.search.JOINED with FTS5's bm25: every match ranked, the filter applied in the join to memories)
with the same WHERE clause (hivemem.store.filters.Filter.where for the owner) and the same
match_expression(terms(query)), LIMIT 100, fetched to completion. A second reference, "in-process",
runs hivemem.search.query.search (ranking + rows + snippets, no socket) on that same connection, to
split the daemon's overhead into query work and transport. Each query is timed on all three, in
rotating order. Two filters: all spaces (owner, no `spaces`) and one space out of 20.

Targets: daemon p50 <= max(2 x raw p50, raw p50 + 1 ms); daemon p99 <= 3 x raw p99.

    .venv/bin/python bench/bench_search.py [--sizes 1000,10000,100000] [--queries 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import benchlib as bl
from hivemem.auth import owner
from hivemem.search.query import search as inprocess_search
from hivemem.search.terms import terms
from hivemem.store import open_reader
from hivemem.store.filters import Filter
from hivemem.store.sqlite import search as fts
from hivemem.store.sqlite.filters import condition

SPACES = 20


def raw_runner(conn: Any, spaces: list[str] | None) -> Callable[[str], int]:
    flt = Filter(readable=owner().scope("read"), spaces=tuple(spaces) if spaces else None)
    where, args = condition(flt, "m")
    sql = fts.JOINED.format(rank=fts.BM25, where=where)  # bm25 over every match, the filter in the join

    def run(query: str) -> int:
        return len(conn.execute(sql, (fts.match_expression(terms(query)), *args, fts.LIST_MAX)).fetchall())

    return run


def local_runner(store: Any, spaces: list[str] | None) -> Callable[[str], int]:
    flt = Filter(readable=owner().scope("read"), spaces=tuple(spaces) if spaces else None)

    def run(query: str) -> int:
        return len(inprocess_search(store, store.embeddings, query, flt, 10, "auto")["results"])

    return run


def daemon_runner(client: Any, spaces: list[str] | None) -> Callable[[str], int]:
    extra = {"spaces": spaces} if spaces else {}

    def run(query: str) -> int:
        return len(client.call("memory.search", query=query, limit=10, **extra)["results"])

    return run


def measure(size: int, nqueries: int, keep: bool) -> list[dict[str, Any]]:
    gen = bl.TextGen(seed=size)
    home = bl.Home(f"search-{size}")
    out = []
    try:
        t = time.perf_counter()
        added = bl.prefill(home, gen.memories(size, 80, 400, SPACES))
        print(f"  prefilled {added:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        client = home.client()
        client.call("store.status")  # starts the daemon
        store = open_reader(home.paths.store)
        conn = store.conn
        queries = [gen.query() for _ in range(nqueries)]
        for label, spaces in (("all spaces", None), ("one space", ["bench/s07"])):
            runners = {
                "raw": raw_runner(conn, spaces),
                "local": local_runner(store, spaces),
                "daemon": daemon_runner(client, spaces),
            }
            for q in queries[: min(100, len(queries))]:  # warm caches on every path
                for run in runners.values():
                    run(q)
            lat: dict[str, list[float]] = {k: [] for k in runners}
            hits = 0
            order = list(runners)
            for i, q in enumerate(queries):
                for name in order[i % 3 :] + order[: i % 3]:
                    t0 = time.perf_counter()
                    n = runners[name](q)
                    lat[name].append(time.perf_counter() - t0)
                    if name == "raw":
                        hits += n
            row = {"size": size, "filter": label, "hits": hits / len(queries)}
            for name, values in lat.items():
                row[f"{name}_p50"] = bl.ms(bl.pct(values, 50))
                row[f"{name}_p99"] = bl.ms(bl.pct(values, 99))
            out.append(row)
        store.close()
        client.close()
    finally:
        home.cleanup(keep)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser)
    parser.add_argument("--queries", type=int, default=500, help="queries per size and filter (default 500)")
    args = parser.parse_args()
    bl.print_machine("bench_search: memory.search over the socket vs raw FTS5 bm25 SQL")
    rows = []
    failed = False
    for size in bl.parse_sizes(args.sizes):
        print(f"size {size:,}: {args.queries} queries ...", file=sys.stderr, flush=True)
        for r in measure(size, args.queries, args.keep):
            p50_ok = r["daemon_p50"] <= max(2 * r["raw_p50"], r["raw_p50"] + 1.0)
            p99_ok = r["daemon_p99"] <= 3 * r["raw_p99"]
            failed |= not (p50_ok and p99_ok)
            rows.append((r["size"], r["filter"], r["hits"], r["raw_p50"], r["local_p50"], r["daemon_p50"],
                         r["daemon_p50"] / r["raw_p50"], bl.verdict(p50_ok), r["raw_p99"], r["local_p99"],
                         r["daemon_p99"], r["daemon_p99"] / r["raw_p99"], bl.verdict(p99_ok)))  # fmt: skip
    print("Latency in ms per query. raw = RANKED SQL only (LIMIT 100); in-process = hivemem search() on the")
    print("same connection (ranking + rows + snippets, no socket); daemon = memory.search over the socket (limit 10).")
    print("Targets: daemon p50 <= max(2 x raw, raw + 1 ms); daemon p99 <= 3 x raw.\n")
    bl.table(
        ("memories", "filter", "raw rows", "raw p50", "in-proc p50", "daemon p50", "p50 ratio", "p50 target",
         "raw p99", "in-proc p99", "daemon p99", "p99 ratio", "p99 target"),
        rows,
    )  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
