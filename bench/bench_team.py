"""The team store (PostgreSQL) beside the SQLite file, in one run: memory.add p50 and one-space search p50.

Both stores are opened in-process (`open_store`, ops.dispatch as the owner, no socket) and prefilled with the
same generated texts across 20 spaces through one `store.import` of a generated export document each (the bulk
path: memory.add one by one would take hours at 100k on the team store). Each store is then settled as its
daemon or server would settle it once writes pause: SQLite's full-text index merged (the daemon's idle
compaction, D190), PostgreSQL's table vacuumed and analyzed (autovacuum's work, done at once). Then memory.add
and one-space memory.search are measured in alternating rounds. Baselines in the same run: a raw single-row
INSERT in its own transaction on each backend (APSW on a WAL file with synchronous=FULL; psycopg on the same
server), so the verb's overhead over its database is visible.

    .venv/bin/python bench/bench_team.py [--sizes 2000,10000] [--adds 200] [--queries 200]
        [--server postgresql://127.0.0.1:5432/test] [--text synthetic|locomo]

`--text locomo` fills the stores with LoCoMo's turns and queries them with its questions (evaluation data
read from $HIVEMEM_BENCH_DATA or ../shared/data/, never copied into the repo; the run skips without it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import apsw
import psycopg

import benchlib as bl
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_store


def timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def raw_sqlite(path: str) -> Any:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)")

    def insert(text: str) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t(x) VALUES (?)", (text,))
        conn.execute("COMMIT")

    return insert


def raw_pg(url: str) -> Any:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, x text)")

    def insert(text: str) -> None:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t(x) VALUES (%s)", (text,))
        conn.execute("COMMIT")

    return insert


SPACES = 20
WORDS = [f"word{n}" for n in range(5000)]


class Texts:
    """The memories and queries of a run: generated words (`synthetic`: each memory 24 of 5,000 words, each
    query two of them), or LoCoMo's turns and questions (`locomo`: the 5,882 turns over and over, each marked
    with its number so none is a duplicate, and the 1,982 questions as they are, which memory.search cuts
    into terms as always)."""

    def __init__(self, kind: str) -> None:
        self.turns: list[str] = []
        self.questions: list[str] = []
        if kind == "locomo":
            root = bl.locomo_root()
            if root is None:
                raise SystemExit(0)
            self.turns = [d["text"] for d in bl.read_jsonl(root / "corpus.jsonl")]
            self.questions = [q["query"] for q in bl.read_jsonl(root / "queries.jsonl")]

    def memory(self, i: int) -> str:
        if self.turns:
            return f"{self.turns[i % len(self.turns)]} (m{i})"
        return " ".join(WORDS[(i * 7 + k * 131) % len(WORDS)] for k in range(24)) + f" item {i}"

    def query(self, i: int) -> str:
        if self.questions:
            return self.questions[(i * 37) % len(self.questions)]
        return f"{WORDS[(i * 37) % len(WORDS)]} {WORDS[(i * 91) % len(WORDS)]}"


def document(path: str, size: int, texts: Texts) -> None:
    """An export document (docs/operations.md) of `size` generated memories across SPACES spaces."""
    stamp = "2026-01-01T00:00:00.000Z"
    who = {"principal": "owner", "label": "owner"}
    memories = [{"id": f"m{i + 1}", "space": f"project/s{i % SPACES}", "kind": "note", "content": texts.memory(i),
                 "tags": [], "status": "active", "confidence": 1.0, "revision": 1, "author": who,
                 "updated_by": who, "created": stamp, "updated": stamp} for i in range(size)]  # fmt: skip
    doc = {"format": "hivemem.export", "version": 1, "exported": stamp, "store_id": str(uuid.uuid4()),
           "memories": memories, "relations": [], "sessions": []}  # fmt: skip
    with open(path, "w") as f:
        json.dump(doc, f)


def prefill(store: Any, who: Any, path: str, size: int) -> float:
    """Seconds to import the document into the store (one transaction), then settle it (not timed)."""
    t = time.perf_counter()
    result = ops.dispatch(store, who, "store.import", {"path": path, "dry_run": False})
    took = time.perf_counter() - t
    assert result["planned"]["add"] == size, result["planned"]
    url = getattr(store, "url", None)
    if url is None:
        while store.search.compact(False):
            pass
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE memories")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000")
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--server", default="postgresql://127.0.0.1:5432/test")
    parser.add_argument("--text", choices=("synthetic", "locomo"), default="synthetic")
    args = parser.parse_args()
    texts = Texts(args.text)
    bl.print_machine("team store (PostgreSQL) beside SQLite")
    rows = []
    for size in bl.parse_sizes(args.sizes):
        rows.append(run(size, args.adds, args.queries, args.server, texts))
    bl.table(["memories", "backend", "add p50 ms", "raw insert p50 ms", "search p50 ms", "search p95 ms"],
             [r for pair in rows for r in pair])  # fmt: skip
    for lite, team in rows:
        print(
            f"{lite[0]:>8}: add PG/SQLite {team[2] / lite[2]:.2f}x (target <= 3x), "
            f"search PG/SQLite {team[4] / lite[4]:.2f}x (target <= 3x)"
        )
    return 0


def run(size: int, adds: int, queries: int, server: str, texts: Texts) -> tuple[list[Any], list[Any]]:
    name = f"hm_bench_{uuid.uuid4().hex[:12]}"
    raw_name = name + "_raw"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        admin.execute(f'CREATE DATABASE "{raw_name}"')
    url = urlunsplit(urlsplit(server)._replace(path="/" + name))
    raw_url = urlunsplit(urlsplit(server)._replace(path="/" + raw_name))
    base = tempfile.mkdtemp(prefix="team-", dir=str(bl.OUT) if bl.OUT.exists() else None)
    lite = open_store(os.path.join(base, "store.db"))
    team = open_store(os.path.join(base, "team", "store.db"), url=url)
    who = owner()
    try:
        source = os.path.join(base, "prefill.json")
        document(source, size, texts)
        for backend, store in (("sqlite", lite), ("postgresql", team)):
            print(f"# {size:,} memories: prefill {backend} {prefill(store, who, source, size):.1f} s, load {bl.load()}",
                  flush=True)  # fmt: skip
        os.unlink(source)
        inserts = {"sqlite": raw_sqlite(os.path.join(base, "raw.db")), "postgresql": raw_pg(raw_url)}
        stores = {"sqlite": lite, "postgresql": team}
        add_t: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        raw_t: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        search_t: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        for i in range(adds):
            for backend, store in stores.items():
                params = {"space": f"project/s{i % SPACES}", "content": texts.memory(size + i) + " measured"}
                add_t[backend].append(timed(lambda s=store, p=params: ops.dispatch(s, who, "memory.add", p)))
                raw_t[backend].append(timed(lambda b=backend, t=params["content"]: inserts[b](t)))
        for i in range(queries):
            query = texts.query(i)
            for backend, store in stores.items():
                query_params: dict[str, Any] = {"query": query, "spaces": [f"project/s{i % SPACES}"], "limit": 10}
                search_t[backend].append(
                    timed(lambda s=store, p=query_params: ops.dispatch(s, who, "memory.search", p))
                )
    finally:
        lite.close()
        team.close()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP DATABASE IF EXISTS "{raw_name}" WITH (FORCE)')
        shutil.rmtree(base, ignore_errors=True)  # the SQLite stores: 100 MB and more at 100k

    def row(backend: str) -> list[Any]:
        return [size, backend, bl.ms(bl.median(add_t[backend])), bl.ms(bl.median(raw_t[backend])),
                bl.ms(bl.median(search_t[backend])), bl.ms(bl.pct(search_t[backend], 95))]  # fmt: skip

    return row("sqlite"), row("postgresql")


if __name__ == "__main__":
    raise SystemExit(main())
