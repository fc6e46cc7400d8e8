"""Authorization cost of memory.search: a client token with read grants vs the owner, same daemon, same queries.

A store of --size memories (default 100,000) spread evenly over 50 spaces `bench/g<G>/s<NN>` (5 groups of
10) is prefilled with the daemon stopped (benchlib.prefill). The owner then creates a client with
`client.add` holding read on 25 of the 50 spaces through a mix of selectors:

    space:bench/g0/*, space:bench/g1/*   (20 spaces by prefix)
    space:bench/g2/s00 .. space:bench/g2/s04   (5 spaces by name)

Each query is sent over the socket by both principals (two connections to one daemon), in alternating order,
for these cases:

    implicit       no `spaces`: the client searches its 25 readable spaces, the owner all 50 (not the same rows)
    implicit=25    no `spaces` for the client; the owner names the client's 25 readable spaces (same rows)
    1 space        both name one space the client reads through a prefix grant
    5 spaces       both name 5 readable spaces (3 by prefix, 2 by name)

Target: client p50 <= 1.10 x owner p50 in every case. Where both see the same rows, the result ids are
compared query by query. An optional second table (--no-sql to skip) times the same ranked SQL in-process
(hivemem.store.sqlite.search.ranked with each principal's Filter) to split SQL filtering cost from the rest.

    .venv/bin/python bench/bench_auth.py [--size 100000] [--queries 300] [--no-sql] [--keep]
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from collections.abc import Callable, Iterator
from typing import Any

import benchlib as bl
from hivemem.auth import Principal, owner
from hivemem.client import DaemonClient
from hivemem.config import load
from hivemem.search.terms import terms
from hivemem.store.filters import Filter
from hivemem.store.sqlite import search as fts
from hivemem.store.sqlite.db import connect
from hivemem.store.sqlite.filters import condition

SPACES = [f"bench/g{g}/s{s:02d}" for g in range(5) for s in range(10)]
GRANT_SCOPES = ["space:bench/g0/*", "space:bench/g1/*"] + [f"space:bench/g2/s{s:02d}" for s in range(5)]
READABLE = [s for s in SPACES if s.startswith(("bench/g0/", "bench/g1/"))] + [f"bench/g2/s{s:02d}" for s in range(5)]
TARGET = 1.10

# (label, client params, owner params, same rows?)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("implicit (client 25 readable, owner all 50)", {}, {}, False),
    ("implicit vs owner naming the 25 readable", {}, {"spaces": READABLE}, True),
    ("1 explicit space (prefix grant)", {"spaces": ["bench/g1/s04"]}, {"spaces": ["bench/g1/s04"]}, True),
    ("5 explicit spaces (3 prefix, 2 named)", {"spaces": ["bench/g0/s02", "bench/g0/s07", "bench/g1/s05",
     "bench/g2/s01", "bench/g2/s03"]}, {"spaces": ["bench/g0/s02", "bench/g0/s07", "bench/g1/s05",
     "bench/g2/s01", "bench/g2/s03"]}, True),
]  # fmt: skip


def items(gen: bl.TextGen, n: int) -> Iterator[tuple[str, str]]:
    """n (space, content) pairs over the 50 spaces, 80-400 bytes each (as bench_search)."""
    for i in range(n):
        yield SPACES[i % len(SPACES)], gen.text(gen.rng.randint(80, 400))


def searcher(client: Any, params: dict[str, Any]) -> Callable[[str], list[tuple[str, str]]]:
    def run(query: str) -> list[tuple[str, str]]:
        hits = client.call("memory.search", query=query, limit=10, **params)["results"]
        return [(h["id"], h["space"]) for h in hits]

    return run


def sql_runner(conn: Any, who: Principal, params: dict[str, Any]) -> Callable[[str], list[int]]:
    spaces = params.get("spaces")
    flt = Filter(readable=who.scope("read"), spaces=tuple(spaces) if spaces else None)

    def run(query: str) -> list[int]:
        return fts.ranked(conn, terms(query), flt)

    return run


def paired(runners: dict[str, Callable[[str], Any]], queries: list[str]) -> tuple[dict[str, list[float]], list[Any]]:
    """Time each query on every runner, alternating which goes first; returns latencies and per-query results."""
    order = list(runners)
    lat: dict[str, list[float]] = {k: [] for k in order}
    results = []
    for i, q in enumerate(queries):
        got = {}
        for name in order[i % 2 :] + order[: i % 2]:
            t0 = time.perf_counter()
            got[name] = runners[name](q)
            lat[name].append(time.perf_counter() - t0)
        results.append(got)
    return lat, results


def summarize(label: str, same: bool, lat: dict[str, list[float]], results: list[dict[str, Any]]) -> dict[str, Any]:
    own, cli = lat["owner"], lat["client"]
    per_query = sorted(c / o for c, o in zip(cli, own, strict=True))
    row: dict[str, Any] = {"case": label, "same": same, "hits": sum(len(r["client"]) for r in results) / len(results)}
    row |= {"owner_p50": bl.ms(bl.pct(own, 50)), "client_p50": bl.ms(bl.pct(cli, 50))}
    row |= {"owner_p99": bl.ms(bl.pct(own, 99)), "client_p99": bl.ms(bl.pct(cli, 99))}
    row["ratio"] = row["client_p50"] / row["owner_p50"]
    row["paired"] = bl.median(per_query)
    row["mismatch"] = sum(r["client"] != r["owner"] for r in results) if same else None
    return row


def leaked(results: list[dict[str, Any]]) -> int:
    return sum(space not in READABLE for r in results for _, space in r["client"])


def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
    gen = bl.TextGen(seed=args.size + 3)
    home = bl.Home(f"auth-{args.size}")
    rows: list[dict[str, Any]] = []
    sql_rows: list[dict[str, Any]] = []
    try:
        t = time.perf_counter()
        added = bl.prefill(home, items(gen, args.size))
        print(f"  prefilled {added:,} memories over {len(SPACES)} spaces in {time.perf_counter() - t:.1f} s",
              file=sys.stderr, flush=True)  # fmt: skip
        own = home.client()
        grants = [{"right": "read", "scope": s} for s in GRANT_SCOPES]
        made = own.call("client.add", name="bench-reader", grants=grants)
        cli = DaemonClient(load(), token=made["token"], name="bench-client")
        who = Principal(made["principal"], "bench-reader", tuple(grants))
        assert cli.call("whoami")["principal"] == made["principal"]
        queries = [gen.query() for _ in range(args.queries)]
        conn = connect(home.paths.store, readonly=True)
        for label, cparams, oparams, same in CASES:
            print(f"  case: {label} ...", file=sys.stderr, flush=True)
            runners = {"owner": searcher(own, oparams), "client": searcher(cli, cparams)}
            paired(runners, queries[: args.warmup])
            lat, results = paired(runners, queries)
            row = summarize(label, same, lat, results)
            row["leaked"] = leaked(results)
            rows.append(row)
            if args.sql:
                sql = {"owner": sql_runner(conn, owner(), oparams), "client": sql_runner(conn, who, cparams)}
                paired(sql, queries[: args.warmup])
                lat, results = paired(sql, queries)
                sql_rows.append(summarize(label, same, lat, results))
        conn.close()
        micro = python_cost(who, CASES[3][1])
        cli.close()
        own.close()
    finally:
        home.cleanup(args.keep)
    return rows, sql_rows, micro


def python_cost(who: Principal, params: dict[str, Any]) -> dict[str, float]:
    """Microseconds of the Python authorization work per request: scope() + can() per space + Filter.where."""

    def work(p: Principal) -> None:
        for space in params["spaces"]:
            p.can("read", space)
        condition(Filter(readable=p.scope("read"), spaces=tuple(params["spaces"])), "m")

    n = 20000
    return {
        "owner": timeit.timeit(lambda: work(owner()), number=n) / n * 1e6,
        "client": timeit.timeit(lambda: work(who), number=n) / n * 1e6,
    }


def report(rows: list[dict[str, Any]], sql_rows: list[dict[str, Any]], micro: dict[str, float]) -> bool:
    failed = False
    out = []
    for r in rows:
        ok = r["ratio"] <= TARGET
        failed |= not ok
        mismatch = "n/a" if r["mismatch"] is None else r["mismatch"]
        out.append((r["case"], r["hits"], r["owner_p50"], r["client_p50"], r["ratio"], r["paired"], bl.verdict(ok),
                    r["owner_p99"], r["client_p99"], mismatch, r["leaked"]))  # fmt: skip
    print("memory.search over the socket, limit 10; latency in ms. ratio = client p50 / owner p50;")
    print("paired = median over queries of (client time / owner time) for the same query. Target: ratio <= 1.10.")
    print("mismatches = queries whose client and owner result ids differ (only where both see the same rows);")
    print("leaked = client hits outside its readable spaces (must be 0).\n")
    bl.table(("case", "client hits", "owner p50", "client p50", "ratio", "paired", "target", "owner p99",
              "client p99", "mismatches", "leaked"), out)  # fmt: skip
    if sql_rows:
        print("Same queries, ranked SQL only (fts.ranked, LIMIT 100) on a read-only connection in this process,")
        print("with each principal's Filter: the SQL cost of the readable clause, without socket or daemon.\n")
        bl.table(("case", "rows", "owner p50", "client p50", "ratio", "paired", "owner p99", "client p99"),
                 [(r["case"], r["hits"], r["owner_p50"], r["client_p50"], r["ratio"], r["paired"], r["owner_p99"],
                   r["client_p99"]) for r in sql_rows])  # fmt: skip
    print(f"Python authorization work per request (5 explicit spaces: can() x5, scope(), Filter.where): "
          f"owner {micro['owner']:.1f} us, client {micro['client']:.1f} us.\n")  # fmt: skip
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store (default 100000)")
    parser.add_argument("--queries", type=int, default=300, help="timed queries per case (default 300)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed warm-up queries per case (default 50)")
    parser.add_argument("--no-sql", dest="sql", action="store_false", help="skip the in-process SQL table")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home under bench/out/")
    args = parser.parse_args()
    bl.print_machine("bench_auth: memory.search as a client with read grants vs as the owner")
    print(f"{args.size:,} memories over {len(SPACES)} spaces; client grants (read): {', '.join(GRANT_SCOPES)}")
    print(f"= {len(READABLE)} of {len(SPACES)} spaces; {args.queries} queries per case, {args.warmup} warm-up.\n")
    return 1 if report(*measure(args)) else 0


if __name__ == "__main__":
    sys.exit(main())
