"""LoCoMo retrieval through the daemon: R@5, R@10, MRR@10 vs plain FTS5 bm25 and the reference table.

Reads the evaluation data (licence: evaluation only, never copied into the repo) from
$HIVEMEM_BENCH_DATA or ../shared/data/ relative to the repo root, and skips when it is absent.

Each set (turns, observations, sessions) is loaded through the daemon into its own fresh store, one
space per conversation (`locomo/conv-26`). Duplicate content in a space returns the existing id
(changed: false); that id then stands for every corpus id with that text. Each query runs
memory.search with spaces=[its conversation's space], limit 10. Baseline in the same run: plain
SQLite FTS5 bm25 (porter unicode61, one table per conversation, OR of quoted tokens, stopwords dropped
with hivemem's tokens()), and the same over one shared table filtered by conversation after MATCH (what
one hivemem store with many spaces does: term statistics are shared across conversations); hivemem
should rank exactly like the shared table. Reference: the stopwords-dropped rows of data/README.md.

    .venv/bin/python bench/bench_retrieval.py [--sets turns,observations,sessions] [--store-url URL]

With --store-url (a PostgreSQL server URL, e.g. postgresql://127.0.0.1:5432/test), hivemem runs on a team
store in a fresh database on that server for each set (docs/team.md), beside the same SQLite baselines.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

import benchlib as bl
from hivemem.errors import HivememError
from hivemem.search.terms import terms, tokens
from hivemem.store.sqlite import search as fts

SETS = {
    "turns": ("corpus.jsonl", "queries.jsonl"),
    "observations": ("observations/corpus.jsonl", "observations/queries.jsonl"),
    "sessions": ("sessions/corpus.jsonl", "sessions/queries.jsonl"),
}
# data/README.md, "stopwords dropped" rows: R@5, R@10, MRR@10
REFERENCE = {"turns": (0.590, 0.681, 0.450), "observations": (0.696, 0.763, 0.579), "sessions": (0.900, 0.956, 0.767)}
CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
TOLERANCE = 0.02


def space_name(conversation: str) -> str:
    """`locomo/<conversation>` made to match ^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$."""
    part = re.sub(r"[^a-z0-9._-]+", "-", conversation.lower()).strip("-._") or "x"
    return f"locomo/{part}"


def first_gold_rank(ranked: list[list[str]], gold: set[str]) -> int | None:
    """1-based rank of the first result that stands for a gold corpus id."""
    for rank, ids in enumerate(ranked, start=1):
        if gold.intersection(ids):
            return rank
    return None


def scores(ranks: list[int | None]) -> tuple[float, float, float]:
    n = len(ranks) or 1
    r5 = sum(1 for r in ranks if r is not None and r <= 5) / n
    r10 = sum(1 for r in ranks if r is not None and r <= 10) / n
    mrr = sum(1.0 / r for r in ranks if r is not None and r <= 10) / n
    return r5, r10, mrr


STORE_URL = ""  # --store-url: the PostgreSQL server whose fresh databases hold the team stores


def run_hivemem(docs: list[dict[str, Any]], queries: list[dict[str, Any]], keep: bool) -> dict[str, Any]:
    home = bl.Home("locomo")
    dropped = bl.team_store(home, STORE_URL) if STORE_URL else None
    by_memory: dict[str, list[str]] = defaultdict(list)
    refused: list[str] = []
    duplicates = 0
    try:
        client = home.client()
        t = time.perf_counter()
        for doc in docs:
            try:
                result = client.call("memory.add", space=space_name(doc["conversation"]), content=doc["text"])
            except HivememError as exc:
                refused.append(f"{doc['id']}: {exc.code}")
                continue
            by_memory[result["id"]].append(doc["id"])
            duplicates += not result["changed"]
        load_s = time.perf_counter() - t
        ranks: list[int | None] = []
        latencies: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            try:
                hits = client.call("memory.search", query=q["query"], spaces=[space_name(q["conversation"])], limit=10)
                ranked = [by_memory[h["id"]] for h in hits["results"]]
            except HivememError:
                ranked = []
            latencies.append(time.perf_counter() - t0)
            ranks.append(first_gold_rank(ranked, set(q["gold_ids"])))
        client.close()
    finally:
        home.cleanup(keep)
        if dropped is not None:
            dropped()
    return {"ranks": ranks, "load_s": load_s, "latencies": latencies, "refused": refused, "duplicates": duplicates}


def run_plain(docs: list[dict[str, Any]], queries: list[dict[str, Any]]) -> list[int | None]:
    """Plain FTS5 bm25, one table per conversation, in memory; ties by highest rowid like hivemem."""
    conn = apsw.Connection(":memory:")
    tables: dict[str, str] = {}
    ids: dict[str, list[str]] = {}
    with conn:
        for doc in docs:
            conv = doc["conversation"]
            if conv not in tables:
                tables[conv] = f"t{len(tables)}"
                ids[conv] = []
                conn.execute(f"CREATE VIRTUAL TABLE {tables[conv]} USING fts5(text, tokenize='porter unicode61')")
            ids[conv].append(doc["id"])
            conn.execute(f"INSERT INTO {tables[conv]}(rowid, text) VALUES (?, ?)", (len(ids[conv]), doc["text"]))
    ranks: list[int | None] = []
    for q in queries:
        conv = q["conversation"]
        words = terms(q["query"])
        rows: list[tuple[Any, ...]] = []
        if words and conv in tables:
            rows = conn.execute(
                f"SELECT rowid FROM {tables[conv]} WHERE {tables[conv]} MATCH ? ORDER BY bm25({tables[conv]}), "
                "rowid DESC LIMIT 10",
                (fts.match_expression(words),),
            ).fetchall()
        ranks.append(first_gold_rank([[ids[conv][r[0] - 1]] for r in rows], set(q["gold_ids"])))
    return ranks


def run_shared(docs: list[dict[str, Any]], queries: list[dict[str, Any]],
               split: Callable[[str], list[str]] = terms) -> list[int | None]:  # fmt: skip
    """Plain FTS5 bm25 over one table for every conversation, filtered after MATCH, duplicates merged; `split`
    makes the query's FTS5 strings (schema 2's word runs by default)."""
    conn = apsw.Connection(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, conv UNINDEXED, tokenize='porter unicode61 remove_diacritics 2')"
    )
    rowid_of: dict[tuple[str, str], int] = {}
    ids: dict[int, list[str]] = defaultdict(list)
    with conn:
        for doc in docs:
            key = (doc["conversation"], doc["text"])
            if key not in rowid_of:
                conn.execute("INSERT INTO t(text, conv) VALUES (?, ?)", key[::-1])
                rowid_of[key] = conn.last_insert_rowid()
            ids[rowid_of[key]].append(doc["id"])
    ranks: list[int | None] = []
    for q in queries:
        words = split(q["query"])
        rows: list[tuple[Any, ...]] = []
        if words:
            rows = conn.execute(
                "SELECT rowid FROM t WHERE t MATCH ? AND conv = ? ORDER BY bm25(t), rowid DESC LIMIT 10",
                (fts.match_expression(words), q["conversation"]),
            ).fetchall()
        ranks.append(first_gold_rank([ids[r[0]] for r in rows], set(q["gold_ids"])))
    return ranks


def evaluate(root: Path, name: str, keep: bool) -> dict[str, Any]:
    corpus, qfile = SETS[name]
    docs = bl.read_jsonl(root / corpus)
    queries = bl.read_jsonl(root / qfile)
    print(f"{name}: {len(docs):,} memories, {len(queries):,} queries ...", file=sys.stderr, flush=True)
    hm = run_hivemem(docs, queries, keep)
    plain = run_plain(docs, queries)
    shared = run_shared(docs, queries)
    whole = run_shared(docs, queries, whole_tokens)
    return {"name": name, "docs": len(docs), "queries": queries, "hm": hm, "plain": plain, "shared": shared,
            "whole": whole}  # fmt: skip


def whole_tokens(query: str) -> list[str]:
    """Schema 1's FTS5 strings: each kept token quoted whole (`bike-related` the phrase "bike related")."""
    return tokens(query)


def report(results: list[dict[str, Any]]) -> bool:
    ok_all = True
    rows: list[tuple[Any, ...]] = []
    for r in results:
        hm = scores(r["hm"]["ranks"])
        plain = scores(r["plain"])
        ref = REFERENCE[r["name"]]
        delta = [a - b for a, b in zip(hm, ref, strict=True)]
        ok = all(abs(d) <= TOLERANCE for d in delta)
        ok_all &= ok
        rows.append((r["name"], len(r["queries"]), *hm, *plain, *ref, " / ".join(f"{d:+.3f}" for d in delta),
                     bl.verdict(ok)))  # fmt: skip
    print("Overall. hivemem = memory.search over the daemon; plain = FTS5 bm25 per conversation (same run);")
    print(f"reference = data/README.md, stopwords dropped. Target: |hivemem - reference| <= {TOLERANCE} on each.\n")
    bl.table(("set", "queries", "hm R@5", "hm R@10", "hm MRR@10", "plain R@5", "plain R@10", "plain MRR@10",
              "ref R@5", "ref R@10", "ref MRR@10", "delta vs ref (R@5/R@10/MRR)", "within 0.02"), rows)  # fmt: skip

    rows = []
    for r in results:
        same = sum(a == b for a, b in zip(r["hm"]["ranks"], r["shared"], strict=True))
        rows.append((r["name"], *scores(r["shared"]), *scores(r["hm"]["ranks"]), f"{same}/{len(r['shared'])}"))
    print("hivemem vs plain FTS5 over one shared table filtered after MATCH (same run): same ranking expected.\n")
    bl.table(("set", "shared R@5", "shared R@10", "shared MRR@10", "hm R@5", "hm R@10", "hm MRR@10",
              "queries with identical first-gold rank"), rows)  # fmt: skip

    split_rows = []
    for r in results:
        before, after = scores(r["whole"]), scores(r["shared"])
        delta = " / ".join(f"{b - a:+.3f}" for a, b in zip(before, after, strict=True))  # type: ignore[assignment]
        split_rows.append((r["name"], *before, *after, delta))
    print("The token split alone (docs/search.md): the shared table queried with tokens quoted whole, as schema 1")
    print("did, and with their word runs.\n")
    bl.table(("set", "whole R@5", "whole R@10", "whole MRR@10", "runs R@5", "runs R@10", "runs MRR@10",
              "delta (R@5/R@10/MRR)"), split_rows)  # fmt: skip

    rows = []
    for r in results:
        by_cat: dict[str, list[int]] = defaultdict(list)
        for i, q in enumerate(r["queries"]):
            by_cat[q["category"]].append(i)
        for cat in [c for c in CATEGORIES if c in by_cat] + sorted(set(by_cat) - set(CATEGORIES)):
            idx = by_cat[cat]
            hm = scores([r["hm"]["ranks"][i] for i in idx])
            plain = scores([r["plain"][i] for i in idx])
            shared = scores([r["shared"][i] for i in idx])
            rows.append((r["name"], cat, len(idx), *hm, *plain, shared[0]))
    print("Per category (plain = per-conversation tables; shared = one table).\n")
    bl.table(("set", "category", "queries", "hm R@5", "hm R@10", "hm MRR@10", "plain R@5", "plain R@10",
              "plain MRR@10", "shared R@5"), rows)  # fmt: skip

    rows = []
    for r in results:
        h = r["hm"]
        rows.append((r["name"], r["docs"], h["duplicates"], len(h["refused"]), r["docs"] / h["load_s"],
                     bl.ms(bl.pct(h["latencies"], 50)), bl.ms(bl.pct(h["latencies"], 99))))  # fmt: skip
    print("Load and query cost through the daemon (one connection).\n")
    bl.table(("set", "memories", "duplicates (changed:false)", "refused", "adds/s", "search p50 ms",
              "search p99 ms"), rows)  # fmt: skip
    for r in results:
        for line in r["hm"]["refused"][:10]:
            print(f"refused in {r['name']}: {line}")
    return ok_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of {', '.join(SETS)}")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")
    parser.add_argument("--store-url", default="", help="run hivemem on team stores on this PostgreSQL server")
    args = parser.parse_args()
    global STORE_URL
    STORE_URL = args.store_url
    root = bl.locomo_root()
    if root is None:
        return 0
    bl.print_machine(f"bench_retrieval: LoCoMo through the daemon (data: {root})")
    results = [evaluate(root, name, args.keep) for name in args.sets.split(",") if name]
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
