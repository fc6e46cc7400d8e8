"""Footprint: daemon RSS after a batch of searches, and store file size vs the raw text it holds.

RSS: VmRSS (and peak VmHWM) of the daemon (pid from `<socket>.lock`) at each store size after
--searches memory.search calls (half over all spaces, half over one space) plus a few memory.list
pages. Baseline: the same daemon idle on an empty store, measured in the same run. Target at
100,000 memories: RSS < 150 MB.

Size: store.db + store.db-wal after `daemon.stop` (which checkpoints with TRUNCATE) against the UTF-8
bytes of content held. Reference in the same run: a plain SQLite file with one FTS5 table
(porter unicode61) holding the same texts. Targets: <= 4x for ~1 KB memories, <= 10x for ~150 B.

    .venv/bin/python bench/bench_footprint.py [--sizes 1000,10000,100000] [--searches 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import apsw

import benchlib as bl

SHAPES = {"~1 KB": (700, 1300, 4.0), "~150 B": (100, 200, 10.0)}
MIB = 1024 * 1024


def idle_baseline(keep: bool) -> dict[str, int]:
    home = bl.Home("fp-idle")
    try:
        client = home.client()
        client.call("store.status")
        pid = home.daemon_pid()
        assert pid is not None
        rss = bl.rss_kib(pid)
        client.close()
    finally:
        home.cleanup(keep)
    return rss


def plain_fts_bytes(path: str, texts: list[str]) -> int:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    with conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
        for text in texts:
            conn.execute("INSERT INTO t(text) VALUES (?)", (text,))
    conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    conn.close()
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def breakdown(store: str) -> list[tuple[str, int, int, int, int]]:
    """(b-tree, bytes, payload bytes, unused bytes, overflow pages) per table and index, from dbstat."""
    conn = apsw.Connection(store, flags=apsw.SQLITE_OPEN_READONLY)
    rows: list[tuple[Any, ...]] = conn.execute(
        "SELECT name, sum(pgsize), sum(payload), sum(unused), sum(pagetype = 'overflow') FROM dbstat GROUP BY name "
        "ORDER BY 2 DESC"
    ).fetchall()
    conn.close()
    return [(str(n), int(b), int(p), int(u), int(o)) for n, b, p, u, o in rows]


def measure(shape: str, size: int, searches: int, keep: bool) -> dict[str, Any]:
    lo, hi, _ = SHAPES[shape]
    gen = bl.TextGen(seed=size + lo)
    items = list(gen.memories(size, lo, hi))
    text_bytes = sum(len(c.encode("utf-8")) for _, c in items)
    home = bl.Home(f"fp-{size}")
    try:
        t = time.perf_counter()
        added = bl.prefill(home, items)
        assert added == size, (added, size)
        print(f"  {shape} x {size:,}: prefilled in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        client = home.client()
        client.call("store.status")
        pid = home.daemon_pid()
        assert pid is not None
        start = bl.rss_kib(pid)
        t = time.perf_counter()
        for i in range(searches):
            extra = {"spaces": [f"bench/s{i % 20:02d}"]} if i % 2 else {}
            client.call("memory.search", query=gen.query(), limit=10, **extra)
            if i % 50 == 0:
                client.call("memory.list", limit=200)
        print(f"  {searches} searches in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        after = bl.rss_kib(pid)
        client.close()
        home.stop()
        files = {suffix: os.path.getsize(home.paths.store + suffix)
                 for suffix in ("", "-wal", "-shm") if os.path.exists(home.paths.store + suffix)}  # fmt: skip
        parts = breakdown(home.paths.store)
        plain = plain_fts_bytes(os.path.join(home.base, "plain.db"), [c for _, c in items])
    finally:
        home.cleanup(keep)
    return {"shape": shape, "size": size, "text": text_bytes, "start": start, "after": after, "files": files,
            "parts": parts, "plain": plain}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser)
    parser.add_argument("--searches", type=int, default=300, help="searches before reading RSS (default 300)")
    args = parser.parse_args()
    bl.print_machine("bench_footprint: daemon RSS and store size")
    sizes = bl.parse_sizes(args.sizes)
    idle = idle_baseline(args.keep)
    results = [measure(shape, size, args.searches, args.keep) for shape in SHAPES for size in sizes]
    failed = False

    print(f"RSS of the daemon in MiB. Baseline: idle daemon on an empty store = {idle['VmRSS'] / 1024:.1f} MiB.")
    print("Target: RSS after searches < 150 MB at 100,000 memories.\n")
    rows: list[tuple[Any, ...]] = []
    for r in results:
        rss = r["after"]["VmRSS"] * 1024
        target = "-"
        if r["size"] >= 100_000:
            target = bl.verdict(rss < 150e6)
            failed |= rss >= 150e6
        idle_mib = idle["VmRSS"] / 1024
        rows.append((r["shape"], r["size"], idle_mib, r["start"]["VmRSS"] / 1024, rss / MIB,
                     r["after"]["VmHWM"] / 1024, rss / MIB / idle_mib, f"{rss / 1e6:.1f} MB", target))  # fmt: skip
    bl.table(("memories", "count", "idle empty MiB", "at start MiB", "after searches MiB", "peak (HWM) MiB",
              "ratio to idle", "RSS", "target <150 MB"), rows)  # fmt: skip

    print("Store size after daemon.stop (WAL checkpointed): store.db + store.db-wal vs UTF-8 content bytes.")
    print("plain FTS5 = one SQLite FTS5 table with the same texts (same run), for reference.\n")
    rows = []
    for r in results:
        store = r["files"].get("", 0) + r["files"].get("-wal", 0)
        ratio = store / r["text"]
        limit = SHAPES[r["shape"]][2]
        failed |= ratio > limit
        rows.append((r["shape"], r["size"], r["text"] / r["size"], r["text"] / MIB, store / MIB, ratio,
                     f"{bl.verdict(ratio <= limit)} (<= {limit:.0f}x)", r["plain"] / MIB, r["plain"] / r["text"],
                     r["files"].get("-wal", 0)))  # fmt: skip
    bl.table(("memories", "count", "avg bytes", "text MiB", "store MiB", "store/text", "target", "plain FTS5 MiB",
              "plain/text", "wal bytes"), rows)  # fmt: skip

    print("Where the bytes are (dbstat per table and index, largest store of each shape; x text = bytes / text):\n")
    for shape in SHAPES:
        r = max((x for x in results if x["shape"] == shape), key=lambda x: x["size"])
        rows = [(name, size / MIB, size / r["text"], payload / MIB, unused / MIB, overflow)
                for name, size, payload, unused, overflow in r["parts"] if size >= 0.005 * r["text"]]  # fmt: skip
        bl.table((f"{shape} x {r['size']:,}: b-tree", "MiB", "x text", "payload MiB", "unused MiB",
                  "overflow pages"), rows)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
