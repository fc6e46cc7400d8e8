"""A one-space search with a one-week window against the same search without it, on SQLite and the team store.

Both stores are opened in-process (`open_store`, ops.dispatch as the owner, no socket) and prefilled with the
same generated texts across 20 spaces through one `store.import` each, then their `created` and `updated`
times are spread evenly over two years (memory i at i/N of the way: a week is about 1% of the store), and
each is settled (SQLite's index merged; PostgreSQL vacuumed and analyzed). Then, in alternating rounds, the
same two-word one-space query runs without a window, with `since` a week before the newest memory, and, as
the raw-SQLite baseline of the same run, as a bare FTS5 `MATCH ... ORDER BY bm25 LIMIT 10` on the SQLite
file (no filter, no rows read). The ratio that matters is windowed / unwindowed per backend (issue target:
at most 1.2x at 100k).

    .venv/bin/python bench/bench_window.py [--sizes 100000] [--queries 200]
        [--server postgresql://127.0.0.1:5432/test] [--no-postgres]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import apsw
import psycopg

import benchlib as bl
from bench_team import SPACES, Texts, document, prefill
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import Store, open_store
from hivemem.store.clock import format_time

START = datetime(2025, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=730)


def stamp(i: int, size: int) -> str:
    return format_time(START + SPAN * i / size)


def spread(store: Any, size: int) -> None:
    """created = updated = memory i's point in the two years (ids from 1, in insertion order)."""
    rows = [(stamp(i, size), stamp(i, size), i + 1) for i in range(size)]
    url = getattr(store, "url", None)
    if url is None:
        conn = store.conn
        with conn:
            conn.executemany("UPDATE memories SET created = ?, updated = ? WHERE id = ?", rows)
        return
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany("UPDATE memories SET created = %s, updated = %s WHERE id = %s", rows)
        conn.execute("VACUUM ANALYZE memories")


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--server", default="postgresql://127.0.0.1:5432/test")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    bl.print_machine("search with a one-week window against without, SQLite and the team store")
    rows: list[list[Any]] = []
    for size in bl.parse_sizes(args.sizes):
        rows += run(size, args.queries, None if args.no_postgres else args.server)
    bl.table(["memories", "backend", "raw FTS5 p50 ms", "search p50 ms", "week p50 ms", "week p95 ms",
              "week hits/query", "week / search"], rows)  # fmt: skip
    for row in rows:
        print(f"{row[0]:>8} {row[1]:<10}: windowed / unwindowed {row[-1]:.2f}x (target <= 1.2x)")
    return 0


def run(size: int, queries: int, server: str | None) -> list[list[Any]]:
    name = f"hm_bench_{uuid.uuid4().hex[:12]}"
    url = None
    if server is not None:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = urlunsplit(urlsplit(server)._replace(path="/" + name))
    base = tempfile.mkdtemp(prefix="window-", dir=str(bl.OUT) if bl.OUT.exists() else None)
    texts = Texts("synthetic")
    stores: dict[str, Store] = {"sqlite": open_store(os.path.join(base, "store.db"))}
    if url is not None:
        stores["postgresql"] = open_store(os.path.join(base, "team", "store.db"), url=url)
    who = owner()
    since = format_time(START + SPAN * (size - 1) / size - timedelta(days=7))  # a week before the newest
    raw = apsw.Connection(os.path.join(base, "store.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        source = os.path.join(base, "prefill.json")
        document(source, size, texts)
        for backend, store in stores.items():
            took = prefill(store, who, source, size)
            spread(store, size)
            if backend == "sqlite":
                while store.search.compact(False):
                    pass
            print(f"# {size:,} memories: prefill {backend} {took:.1f} s, load {bl.load()}", flush=True)
        os.unlink(source)
        times, hits, raw_t = measure(stores, texts, queries, since, raw)
    finally:
        raw.close()
        for store in stores.values():
            store.close()
        if server is not None:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(base, ignore_errors=True)
    return [row(size, backend, times[backend], hits[backend] / queries, raw_t) for backend in times]


def row(size: int, backend: str, times: dict[str, list[float]], hits: float, raw_t: list[float]) -> list[Any]:
    plain_p50, week_p50 = bl.median(times["plain"]), bl.median(times["week"])
    return [size, backend, bl.ms(bl.median(raw_t)), bl.ms(plain_p50), bl.ms(week_p50),
            bl.ms(bl.pct(times["week"], 95)), round(hits, 2), round(week_p50 / plain_p50, 2)]  # fmt: skip


def measure(stores: dict[str, Any], texts: Texts, queries: int, since: str,
            raw: apsw.Connection) -> tuple[dict[str, dict[str, list[float]]], dict[str, int], list[float]]:  # fmt: skip
    """Alternating rounds: the raw FTS5 query, then each backend's search without and with the window (which
    first alternating by round)."""
    from hivemem.store.sqlite.fts5 import prepare

    who = owner()
    prepare(raw)
    times: dict[str, dict[str, list[float]]] = {b: {"plain": [], "week": []} for b in stores}
    hits: dict[str, int] = dict.fromkeys(stores, 0)
    raw_t: list[float] = []
    raw_sql = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts, 5.0, 1.0, 3.0) LIMIT ?"
    for i in range(queries):
        query = texts.query(i)
        match = " OR ".join(f'"{w}"' for w in query.split())
        raw_t.append(timed(lambda m=match: raw.execute(raw_sql, (m, 10)).fetchall())[0])
        for backend, store in stores.items():
            plain: dict[str, Any] = {"query": query, "spaces": [f"project/s{i % SPACES}"], "limit": 10}
            week = {**plain, "since": since}
            order = (("plain", plain), ("week", week)) if i % 2 else (("week", week), ("plain", plain))
            for kind, params in order:
                took, out = timed(lambda s=store, p=params: ops.dispatch(s, who, "memory.search", p))
                times[backend][kind].append(took)
                hits[backend] += len(out["results"]) if kind == "week" else 0
    return times, hits, raw_t


if __name__ == "__main__":
    raise SystemExit(main())
