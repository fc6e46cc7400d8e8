"""Full-text search in Chinese, Japanese and Korean: R@1, R@5 and MRR@10 on the hand-written set of cjk_eval.py.

The 63 memories are added through hivemem's dispatch to a fresh store (schema 2: CJK runs as bigrams); each of
the 36 questions runs memory.search over every space, limit 10. Same-run baseline: what schema 1 did, a plain
FTS5 table (`porter unicode61 remove_diacritics 2`, bm25 5/1/3) queried with each whitespace token quoted
whole, as version 1 built its MATCH expression; a sentence without spaces was then one token.

    .venv/bin/python bench/bench_cjk.py
"""

from __future__ import annotations

import re
import sys
import tempfile

import apsw

import benchlib as bl
from cjk_eval import MEMORIES, QUERIES
from hivemem import ops
from hivemem.auth import owner
from hivemem.search.terms import tokens
from hivemem.store import open_store
from hivemem.store.sqlite import search as fts

LANGUAGES = {"zh": "Chinese", "ja": "Japanese", "ko": "Korean"}


def first_gold(ranked: list[str], gold: list[str]) -> int | None:
    return next((i for i, m in enumerate(ranked, start=1) if m in gold), None)


def hivemem_ranks() -> list[int | None]:
    store = open_store(tempfile.mkdtemp(prefix="hm-cjk-") + "/store.db")
    ids = {}
    for key, space, content in MEMORIES:
        ids[ops.dispatch(store, owner(), "memory.add", {"space": space, "content": content})["id"]] = key
    ranks = []
    for question, gold in QUERIES:
        hits = ops.dispatch(store, owner(), "memory.search", {"query": question, "limit": 10})["results"]
        ranks.append(first_gold([ids[h["id"]] for h in hits], gold))
    store.close()
    return ranks


def version1_ranks() -> list[int | None]:
    """Schema 1's tokenizer and query: whitespace tokens (stopwords dropped) quoted whole, OR-ed."""
    conn = apsw.Connection(":memory:")
    conn.execute(  # version 1's tokenizer
        "CREATE VIRTUAL TABLE t USING fts5(title, content, tags, tokenize='porter unicode61 remove_diacritics 2')"
    )
    for rowid, (_, _, content) in enumerate(MEMORIES, start=1):
        conn.execute("INSERT INTO t(rowid, title, content, tags) VALUES (?, '', ?, '')", (rowid, content))
    ranks = []
    for question, gold in QUERIES:
        words = [w for w in tokens(question) if re.search(r"\w", w)]
        rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, 5.0, 1.0, 3.0), rowid DESC LIMIT 10",
                            (fts.match_expression(words),)).fetchall()  # fmt: skip
        ranks.append(first_gold([MEMORIES[r[0] - 1][0] for r in rows], gold))  # type: ignore[index, operator]
    return ranks


def scores(ranks: list[int | None]) -> tuple[float, float, float]:
    n = len(ranks) or 1
    return (sum(r == 1 for r in ranks) / n, sum(r is not None and r <= 5 for r in ranks) / n,
            sum(1 / r for r in ranks if r is not None) / n)  # fmt: skip


def main() -> int:
    bl.print_machine("bench_cjk: full-text search in Chinese, Japanese and Korean")
    now, before = hivemem_ranks(), version1_ranks()
    rows = []
    for prefix, language in [*LANGUAGES.items(), ("", "all")]:
        idx = [i for i, (_, gold) in enumerate(QUERIES) if gold[0].startswith(prefix)]
        rows.append((language, len(idx), *scores([now[i] for i in idx]), *scores([before[i] for i in idx])))
    print(f"{len(MEMORIES)} memories, {len(QUERIES)} questions (bench/cjk_eval.py); search over all spaces, limit 10.")
    print("hivemem = schema 2 through memory.search; v1 = schema 1's tokenizer and query on the same memories.\n")
    bl.table(("language", "questions", "R@1", "R@5", "MRR@10", "v1 R@1", "v1 R@5", "v1 MRR@10"), rows)
    missed = [q for (q, _), r in zip(QUERIES, now, strict=True) if r is None or r > 5]
    print("not in the top 5: " + (", ".join(missed) if missed else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
