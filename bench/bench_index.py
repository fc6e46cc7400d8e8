"""Indexing throughput of the search index, schema 1 against schema 2, in one process, rounds interleaved.

Each round builds an in-memory FTS5 table of the same texts two ways and times the inserts in CPU time of this
process (the machine's load does not inflate it) and wall time:

    v1   `porter unicode61 remove_diacritics 2`, plain text (schema 1)
    v2   `hivemem porter unicode61 remove_diacritics 2` with the space as each column's FTS5 locale (schema 2:
         CJK bigrams and a colocated space token, see store/fts5.py)

Texts: LoCoMo turns (English; from $HIVEMEM_BENCH_DATA or ../shared/data, skipped when absent) and the CJK
evaluation memories (bench/cjk_eval.py, repeated). A second table times memory.add in-process (dispatch with
its row, FTS entry, version and event; synchronous=OFF) on this code only: compare it with the same script run
on the code before.

    .venv/bin/python bench/bench_index.py [--rounds 5] [--docs 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from statistics import median

import apsw

import benchlib as bl
from cjk_eval import MEMORIES
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_store
from hivemem.store.sqlite.fts5 import prepare

SCHEMAS = {
    "v1": ("porter unicode61 remove_diacritics 2", False),
    "v2": ("hivemem porter unicode61 remove_diacritics 2", True),
}


def index_rate(texts: list[str], schema: str) -> tuple[float, float]:
    """Documents per CPU second and per wall second for one table build."""
    tokenize, locale = SCHEMAS[schema]
    conn = apsw.Connection(":memory:")
    prepare(conn)
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(title, content, tags, locale = {int(locale)}, "
                 f"tokenize = '{tokenize}')")  # fmt: skip
    value = "fts5_locale('team/space', ?)" if locale else "?"
    sql = f"INSERT INTO t(rowid, title, content, tags) VALUES (?, {value}, {value}, {value})"
    cpu, wall = time.process_time(), time.perf_counter()
    with conn:
        for rowid, text in enumerate(texts, start=1):
            conn.execute(sql, (rowid, "", text, ""))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    conn.close()
    return len(texts) / cpu, len(texts) / wall


def add_rate(texts: list[str]) -> tuple[float, float]:
    store = open_store(tempfile.mkdtemp(prefix="hm-index-", dir=bl.OUT) + "/store.db")
    store.conn.execute("PRAGMA synchronous=OFF")
    who = owner()
    cpu, wall = time.process_time(), time.perf_counter()
    for i, text in enumerate(texts):
        ops.dispatch(store, who, "memory.add", {"space": f"bench/s{i % 20:02d}", "content": text})
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    store.close()
    return len(texts) / cpu, len(texts) / wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--docs", type=int, default=10_000, help="documents per build (default 10000)")
    args = parser.parse_args()
    bl.OUT.mkdir(parents=True, exist_ok=True)
    bl.print_machine("bench_index: FTS5 indexing throughput, schema 1 vs schema 2")
    data = bl.data_dir()
    sets = {"CJK memories": [c for _, _, c in MEMORIES]}
    if data and (data / "locomo" / "corpus.jsonl").exists():
        sets["LoCoMo turns"] = [d["text"] for d in bl.read_jsonl(data / "locomo" / "corpus.jsonl")]
    rows = []
    for name, base in sets.items():
        texts = (base * (args.docs // len(base) + 1))[: args.docs]
        rates: dict[str, list[tuple[float, float]]] = {"v1": [], "v2": []}
        for i in range(args.rounds):
            for schema in ("v1", "v2") if i % 2 == 0 else ("v2", "v1"):
                rates[schema].append(index_rate(texts, schema))
        v1c, v2c = (median(r[0] for r in rates[s]) for s in ("v1", "v2"))
        v1w, v2w = (median(r[1] for r in rates[s]) for s in ("v1", "v2"))
        rows.append((name, len(texts), v1c, v2c, v2c / v1c, v1w, v2w, v2w / v1w))
    print(f"FTS5 inserts, documents per second (median of {args.rounds} interleaved rounds).\n")
    bl.table(("texts", "docs", "v1 /cpu s", "v2 /cpu s", "v2/v1 cpu", "v1 /wall s", "v2 /wall s", "v2/v1 wall"), rows)
    texts = (sets.get("LoCoMo turns") or sets["CJK memories"])[: min(args.docs, 4000)]
    adds = [add_rate(texts) for _ in range(max(1, args.rounds // 2))]
    cpu, wall = median(a[0] for a in adds), median(a[1] for a in adds)
    print(f"memory.add in-process ({len(texts):,} memories over 20 spaces, synchronous=OFF), this code: "
          f"{cpu:,.0f} adds per CPU second, {wall:,.0f} per wall second.")  # fmt: skip
    print(f"load average at end: {bl.load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
