"""memory.add over one persistent socket connection vs raw APSW doing the same inserts.

Baseline: a fresh database with hivemem's V1 schema (and its page size), WAL, synchronous=FULL (the docs/reliability.md
connection settings), one BEGIN IMMEDIATE/COMMIT per add holding INSERTs into memories, memory_fts,
memory_versions and events (with a SHA-256 chain). Both stores are pre-filled to the same size with
the same texts; the measured adds alternate in rounds between baseline and hivemem so both see the
same disk. Target: hivemem throughput >= 50% of the baseline.

    .venv/bin/python bench/bench_add.py [--sizes 1000,10000,100000] [--adds 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import apsw

import benchlib as bl
from hivemem.store.sqlite import schema
from hivemem.store.sqlite.schema import APPLICATION_ID, V1

MEM_COLS = (
    "space, kind, title, content, content_sha256, capture_key, tags, status, source, provenance, confidence, "
    "confidence_state, review_after, expires_at, revision, principal, label, updated_by, updated_label, session, "
    "created, updated"
)
INSERT_MEMORY = f"INSERT INTO memories({MEM_COLS}) VALUES ({','.join('?' * 22)})"
INSERT_FTS = "INSERT INTO memory_fts(rowid, title, content, tags) VALUES (?,?,?,?)"
INSERT_VERSION = "INSERT INTO memory_versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
INSERT_EVENT = (
    "INSERT INTO events(ts, type, principal, label, space, memory, session, revision, data, chain) "
    "VALUES (?,?,?,?,?,?,?,?,?,?)"
)
META = json.dumps(
    {"confidence": 1.0, "confidence_state": None, "expires_at": None, "provenance": None, "review_after": None,
     "source": None}, sort_keys=True)  # fmt: skip


class RawStore:
    """The baseline: plain APSW, same schema and connection settings, the same four inserts per add."""

    def __init__(self, path: str) -> None:
        self.conn = apsw.Connection(path)
        page_size = getattr(schema, "PAGE_SIZE", None)  # the page size hivemem gives a new store, if it sets one
        if page_size:
            self.conn.execute(f"PRAGMA page_size = {int(page_size)}")
        self.conn.execute("PRAGMA journal_mode=WAL").fetchall()
        self.conn.execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON")
        self.conn.set_busy_timeout(5000)
        with self.conn:
            self.conn.execute(V1)
            self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        self.chain = bytes(32)

    def _inserts(self, space: str, content: str) -> None:
        conn = self.conn
        at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        digest = hashlib.sha256(content.encode("utf-8")).digest()
        row = (space, "note", "", content, digest, content.lower(), "", "active", None, None, 1.0, None, None, None,
               1, "owner", "owner", "owner", "owner", None, at, at)  # fmt: skip
        conn.execute(INSERT_MEMORY, row)
        memory = conn.last_insert_rowid()
        conn.execute(INSERT_FTS, (memory, "", content, ""))
        conn.execute(INSERT_VERSION, (memory, 1, "add", "note", "", content, "", "active", META, "owner", "owner", at))
        data = json.dumps({"memory": memory, "space": space, "ts": at, "type": "memory.added"}, sort_keys=True)
        self.chain = hashlib.sha256(self.chain + data.encode()).digest()
        conn.execute(INSERT_EVENT, (at, "memory.added", "owner", "owner", space, memory, None, 1, "{}", self.chain))

    def add(self, space: str, content: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self._inserts(space, content)
        self.conn.execute("COMMIT")

    def bulk(self, items: list[tuple[str, str]]) -> None:
        with self.conn:
            for space, content in items:
                self._inserts(space, content)
        self.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)


def measure(size: int, adds: int, rounds: int, keep: bool) -> dict[str, float]:
    gen = bl.TextGen(seed=size)
    items = list(gen.memories(size + adds + 20, 80, 400))
    fill, warm, timed = items[:size], items[size : size + 20], items[size + 20 :]

    home = bl.Home(f"add-{size}")
    try:
        t = time.perf_counter()
        bl.prefill(home, fill)
        raw = RawStore(os.path.join(home.base, "raw.db"))
        raw.bulk(fill)
        print(f"  prefilled {size:,} memories into both stores in {time.perf_counter() - t:.1f} s", file=sys.stderr)

        client = home.client()
        for space, content in warm:
            client.call("memory.add", space=space, content=content)
            raw.add(space, "warm " + content)

        lat: dict[str, list[float]] = {"raw": [], "hm": []}
        wall = {"raw": 0.0, "hm": 0.0}
        chunk = len(timed) // rounds
        for r in range(rounds):
            part = timed[r * chunk : (r + 1) * chunk]
            t0 = time.perf_counter()
            for space, content in part:
                t = time.perf_counter()
                raw.add(space, content)
                lat["raw"].append(time.perf_counter() - t)
            t1 = time.perf_counter()
            for space, content in part:
                t = time.perf_counter()
                result = client.call("memory.add", space=space, content=content)
                lat["hm"].append(time.perf_counter() - t)
                assert result["changed"], result
            t2 = time.perf_counter()
            wall["raw"] += t1 - t0
            wall["hm"] += t2 - t1
        client.close()
        raw.conn.close()
    finally:
        home.cleanup(keep)
    n = chunk * rounds
    return {
        "raw_tps": n / wall["raw"],
        "hm_tps": n / wall["hm"],
        "raw_p50": bl.ms(bl.pct(lat["raw"], 50)),
        "raw_p99": bl.ms(bl.pct(lat["raw"], 99)),
        "hm_p50": bl.ms(bl.pct(lat["hm"], 50)),
        "hm_p99": bl.ms(bl.pct(lat["hm"], 99)),
        "n": n,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser)
    parser.add_argument("--adds", type=int, default=2000, help="measured adds per size (default 2000)")
    parser.add_argument("--rounds", type=int, default=10, help="alternating baseline/hivemem rounds (default 10)")
    args = parser.parse_args()
    bl.print_machine("bench_add: memory.add over one socket connection vs raw APSW inserts")
    rows = []
    failed = False
    for size in bl.parse_sizes(args.sizes):
        print(f"size {size:,}: measuring {args.adds:,} adds ...", file=sys.stderr, flush=True)
        m = measure(size, args.adds, args.rounds, args.keep)
        ratio = m["hm_tps"] / m["raw_tps"]
        failed |= ratio < 0.5
        rows.append((size, m["n"], m["raw_tps"], m["hm_tps"], ratio, bl.verdict(ratio >= 0.5),
                     m["raw_p50"], m["hm_p50"], m["raw_p99"], m["hm_p99"]))  # fmt: skip
    print("Throughput: adds/s over the measured adds; latency in ms per add (client-side, round trip).")
    print("Target: hivemem throughput >= 0.5 x raw APSW.\n")
    bl.table(
        ("store size", "adds", "raw adds/s", "hivemem adds/s", "ratio", "target >=0.5",
         "raw p50 ms", "hivemem p50 ms", "raw p99 ms", "hivemem p99 ms"),
        rows,
    )  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
