"""memory.search on real conversational text (LoCoMo turns) against raw FTS5 bm25, in-process, socket and MCP.

Reads the LoCoMo turns and questions (licence: evaluation only, never copied into the repo) from
$HIVEMEM_BENCH_DATA or ../shared/data/ relative to the repo root, and skips when they are absent.

Stores (prefilled with the daemon stopped through hivemem's own dispatch, as the other benchmarks do):

    10k        10,000 memories in one space: the 5,882 turns, then copies marked " (r<k>)" to reach the size
    100k       100,000 memories in one space, the same way
    120k/500   120,000 memories in 500 spaces of 240 consecutive turns each (wrapping around the corpus);
               the measured space is one of them

Queries: 500 LoCoMo questions (every fourth of the 1,982), the same for every store and path.
Paths, each query on every path in rotating order after a warm-up:

    raw       a read-only APSW connection running the query hivemem's full-text list is built on: the same
              quoted tokens, the same bm25 weights, ORDER BY bm25 then highest rowid, LIMIT = page size (10),
              over the whole table (which, for the one-space stores, is the space)
    alone     (120k/500 only) the same raw query on an FTS5 table that holds only the measured space's memories,
              with the same tokenizer and columns
    inproc    hivemem.ops.dispatch("memory.search", spaces=[the space], limit=10) on a read-only store
    socket    memory.search over the daemon's Unix socket (one open DaemonClient)
    mcp       the memory_search tool of a `python -m hivemem mcp` process, over plain JSON-RPC lines on its stdio

Targets: inproc p50 <= 1.5 x raw p50 (10k, 100k); socket p50 <= max(2 x raw, raw + 1 ms); mcp p50 <= socket p50
+ 1.5 ms; at 120k/500: inproc p50 <= 5 ms and <= 3 x alone p50.

    .venv/bin/python bench/bench_search_real.py [--cases 10k,100k,120k/500] [--queries 500] [--warmup 50]
                                                [--cache DIR]

Before measuring, the script waits (up to 5 minutes) until the daemon, idle after the prefill, has merged the
full-text index into one segment, as it does for any store once writes pause (docs/decisions.md D190); the
prefill alone leaves it in 10-20 segments, which every term's lookup visits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import apsw

import benchlib as bl
from bench_mcp import Lines  # a `hivemem mcp` process spoken to in plain JSON-RPC lines
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_reader
from hivemem.store.sqlite import db, fts_index
from hivemem.store.sqlite import search as fts

PAGE = 10
CASES = {"10k": (10_000, 1), "100k": (100_000, 1), "120k/500": (120_000, 500)}
SPACE_SIZE = 240  # memories per space in the 500-space store
MEASURED = 7  # the measured space's index

Runner = Callable[[str], list[int]]


def space_of(index: int) -> str:
    return f"locomo/s{index:03d}"


def corpus(turns: list[str], size: int, spaces: int) -> Iterator[tuple[str, str]]:
    """(space, content) pairs: one space holding copies marked (r<k>), or spaces of consecutive turns."""
    if spaces == 1:
        for i in range(size):
            copy = i // len(turns)
            yield space_of(0), turns[i % len(turns)] + (f" (r{copy})" if copy else "")
        return
    for s in range(spaces):
        for j in range(size // spaces):
            yield space_of(s), turns[(s * SPACE_SIZE + j) % len(turns)]


def weights(conn: Any) -> str:
    """The bm25 weights hivemem ranks with, for however many columns memory_fts has."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(memory_fts)").fetchall()]
    return ", ".join(("5.0", "1.0", "3.0", "0.0")[: len(columns)])


def raw_sql(table: str, weight: str) -> str:
    return (f"SELECT rowid, bm25({table}, {weight}) AS r FROM {table} WHERE {table} MATCH ? "
            "ORDER BY r, rowid DESC LIMIT ?")  # fmt: skip


def match_text(query: str) -> str | None:
    """The MATCH expression of hivemem's full-text list for `query`, without any space restriction."""
    try:
        from hivemem.search.terms import terms  # schema 2: word runs and CJK bigrams
    except ImportError:  # measuring version 1
        terms = fts.tokens  # type: ignore[attr-defined]
    words = terms(query)
    return fts.match_expression(words) if words else None


def raw_runner(conn: Any, table: str) -> Runner:
    sql = raw_sql(table, weights(conn))

    def run(query: str) -> list[int]:
        expr = match_text(query)
        return [int(r[0]) for r in conn.execute(sql, (expr, PAGE)).fetchall()] if expr else []

    return run


def alone_table(conn: Any, space: str) -> Any:
    """An in-memory FTS5 table with memory_fts's columns and tokenizer, holding only `space`'s memories."""
    create = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_fts'").fetchone()[0]
    columns = [r[1] for r in conn.execute("PRAGMA table_info(memory_fts)").fetchall()]
    tokenize = create[create.index("tokenize") :].rstrip(")")
    alone = apsw.Connection(":memory:")
    try:
        from hivemem.store.sqlite.fts5 import prepare  # schema 2: the `hivemem` tokenizer
    except ImportError:  # measuring version 1, whose tokenizer is FTS5's own
        pass
    else:
        prepare(alone)
    alone.execute(f"CREATE VIRTUAL TABLE memory_fts USING fts5({', '.join(columns)}, {tokenize})")
    rows = conn.execute(
        "SELECT id, title, content, tags FROM memories WHERE space = ? AND deleted IS NULL AND status = 'active'",
        (space,),
    ).fetchall()
    marks = ",".join("?" * (len(columns) + 1))
    with alone:
        for row in rows:
            alone.execute(f"INSERT INTO memory_fts(rowid, {', '.join(columns)}) VALUES ({marks})", row)
    return alone


def inproc_runner(store: Any, space: str) -> Runner:
    who = owner()

    def run(query: str) -> list[int]:
        hits = ops.dispatch(store, who, "memory.search", {"query": query, "spaces": [space], "limit": PAGE})
        return [int(h["id"][1:]) for h in hits["results"]]

    return run


def socket_runner(client: Any, space: str) -> Runner:
    def run(query: str) -> list[int]:
        hits = client.call("memory.search", query=query, spaces=[space], limit=PAGE)
        return [int(h["id"][1:]) for h in hits["results"]]

    return run


def mcp_runner(lines: Lines, space: str) -> Runner:
    def run(query: str) -> list[int]:
        args = {"query": query, "spaces": [space], "limit": PAGE}
        ok = lines.request("tools/call", {"name": "memory_search", "arguments": args})["structuredContent"]
        return [int(h["id"][1:]) for h in ok["results"]]

    return run


IN_PROCESS = ("raw", "alone", "inproc")


def rotate(runners: dict[str, Runner], queries: list[str]) -> tuple[dict[str, list[float]], int]:
    """Each query on every path, rotating which goes first; wall latencies (and this process's CPU time for the
    in-process paths, under `<name>_cpu`), and the queries whose hivemem paths answer differently."""
    order = list(runners)
    lat: dict[str, list[float]] = {k: [] for k in order} | {f"{k}_cpu": [] for k in order if k in IN_PROCESS}  # type: ignore[assignment]
    differ = 0
    for i, q in enumerate(queries):
        got: dict[str, list[int]] = {}
        shift = i % len(order)
        for name in order[shift:] + order[:shift]:
            c0, t0 = time.process_time(), time.perf_counter()
            got[name] = runners[name](q)
            lat[name].append(time.perf_counter() - t0)
            if name in IN_PROCESS:
                lat[f"{name}_cpu"].append(time.process_time() - c0)
        served = [got[k] for k in ("inproc", "socket", "mcp") if k in got]
        differ += any(s != served[0] for s in served)
    return lat, differ


def home_for(name: str, cache: str | None) -> bl.Home:
    """A fresh home, or with --cache the one kept there from an earlier run of the same code (prefill is slow)."""
    home = bl.Home(name)
    if cache:
        base = os.path.join(cache, name)
        shutil.rmtree(home.base)
        os.makedirs(base, mode=0o700, exist_ok=True)
        home.base = base
        for var, sub in zip(bl.XDG, ("data", "config", "state", "run"), strict=True):
            home.env[var] = os.path.join(base, sub)
        home.activate()
    return home


def segments(path: str) -> int:
    conn = db.Connection(f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        return fts_index.segments(conn)
    finally:
        conn.close()


def settle(path: str, budget: float = 300.0) -> None:
    """Wait while the running daemon, idle, merges the index that the prefill wrote one memory at a time (D190):
    what a store looks like once its daemon has had a quiet second after the last write."""
    before, t = segments(path), time.perf_counter()
    while segments(path) > 1 and time.perf_counter() - t < budget:
        time.sleep(0.2)
    print(f"  index segments: {before} before the daemon's idle merge, {segments(path)} after "
          f"({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)  # fmt: skip


def measure(case: str, turns: list[str], queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    size, spaces = CASES[case]
    space = space_of(MEASURED if spaces > 1 else 0)
    home = home_for(f"real-{size}-{spaces}", args.cache)
    warmup = args.warmup
    try:
        t = time.perf_counter()
        if os.path.exists(home.paths.store):
            existing = open_reader(home.paths.store)
            added = int(existing.conn.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]
            existing.close()
        else:
            added = bl.prefill(home, corpus(turns, size, spaces))
        print(f"  {case}: {added:,} memories ready in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        client = home.client()
        client.call("store.status")  # starts the daemon
        settle(home.paths.store)
        store = open_reader(home.paths.store)
        runners: dict[str, Runner] = {"raw": raw_runner(store.conn, "memory_fts")}
        alone = None
        if spaces > 1:
            alone = alone_table(store.conn, space)
            runners["alone"] = raw_runner(alone, "memory_fts")
        runners |= {"inproc": inproc_runner(store, space), "socket": socket_runner(client, space)}
        with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
            lines = Lines(home, errlog)
            runners["mcp"] = mcp_runner(lines, space)
            rotate(runners, queries[:warmup])
            lat, differ = rotate(runners, queries)
            lines.close()
        if alone is not None:
            alone.close()
        store.close()
        client.close()
    finally:
        home.cleanup(args.keep or bool(args.cache))
    row: dict[str, Any] = {"case": case, "memories": added, "differ": differ}
    for name, values in lat.items():
        row[name] = bl.ms(bl.pct(values, 50))
        row[name + "_p99"] = bl.ms(bl.pct(values, 99))
    row["paired"] = bl.median([a / b for a, b in zip(lat["inproc"], lat["raw"], strict=True) if b > 0])
    row["load"] = bl.load()
    return row


def report(rows: list[dict[str, Any]]) -> bool:
    ok_all = True
    out, cpu = [], []
    for r in rows:
        raw, inproc, sock, mcp = r["raw"], r["inproc"], r["socket"], r["mcp"]
        base = r.get("alone", raw)
        checks = [sock <= max(2 * raw, raw + 1.0), mcp <= sock + 1.5]
        checks += [inproc <= 5.0, inproc <= 3 * base] if "alone" in r else [inproc <= 1.5 * raw]
        ok_all &= all(checks)
        out.append((r["case"], r["memories"], raw, r.get("alone", "-"), inproc, inproc / base, r["paired"], sock,
                    sock / raw, mcp, mcp - sock, r["inproc_p99"], r["socket_p99"], r["differ"],
                    bl.verdict(all(checks))))  # fmt: skip
        cpu.append((r["case"], r["raw_cpu"], r.get("alone_cpu", "-"), r["inproc_cpu"],
                    r["inproc_cpu"] / r.get("alone_cpu", r["raw_cpu"]), r["load"]))  # fmt: skip
    print(
        "p50 wall latency in ms per query (p99 where named). raw = hivemem's query terms as one bm25 MATCH, LIMIT 10,"
    )
    print("on the store's memory_fts; alone = the same on a table of only the measured space; inproc = ops.dispatch")
    print("memory.search; socket = the daemon; mcp = memory_search over `hivemem mcp` stdio (JSON-RPC lines).")
    print("inproc/base = inproc / alone (120k/500) or inproc / raw; paired = median over queries of inproc/raw.")
    print("differ = queries whose inproc, socket and mcp results differ. Targets: inproc <= 1.5 x raw (one-space")
    print("stores); inproc <= 5 ms and <= 3 x alone (120k/500); socket <= max(2 x raw, raw + 1 ms);")
    print("mcp <= socket + 1.5 ms.\n")
    bl.table(("case", "memories", "raw", "alone", "inproc", "inproc/base", "paired", "socket", "socket/raw", "mcp",
              "mcp-socket", "inproc p99", "socket p99", "differ", "verdict"), out)  # fmt: skip
    print(
        "The same in-process paths in CPU time of this process (p50 ms), which the machine's load does not inflate.\n"
    )
    bl.table(("case", "raw cpu", "alone cpu", "inproc cpu", "inproc/base cpu", "load at end"), cpu)
    return ok_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--queries", type=int, default=500, help="timed queries (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed warm-up queries per case (default 50)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")
    parser.add_argument("--cache", help="keep the prefilled homes in this directory and reuse them on the next run")
    args = parser.parse_args()
    root = bl.locomo_root()
    if root is None:
        return 0
    bl.print_machine("bench_search_real: memory.search on LoCoMo turns vs raw FTS5 bm25")
    turns = [d["text"] for d in bl.read_jsonl(root / "corpus.jsonl")]
    questions = [q["query"] for q in bl.read_jsonl(root / "queries.jsonl")]
    queries = questions[::4][: args.queries]
    rows = []
    for case in [c for c in args.cases.split(",") if c]:
        rows.append(measure(case, turns, queries, args))
        print(rows[-1], file=sys.stderr, flush=True)
    print(f"{len(queries)} queries per case ({args.warmup} warm-up); load average at end: {bl.load()}\n")
    return 0 if report(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
