"""Search ranks exactly as docs/search.md on every path (D62): the same ids, order and snippets as one plain FTS5 table.

The reference is what version 1 did: one FTS5 table over every memory with the same tokenizer, ranked by
`bm25(t, 5.0, 1.0, 3.0)` then highest rowid, the space filter applied after MATCH, snippets from that table.
hivemem must answer the same through each of its plans: the whole index, MATCH restricted by space tokens
with its own bm25, and the join for larger spaces or other filters.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw
import pytest

from hivemem import ops
from hivemem.auth import Principal, owner
from hivemem.search.terms import terms
from hivemem.store import SQLiteStore, open_store
from hivemem.store.filters import Filter
from hivemem.store.sqlite import search as fts
from hivemem.store.sqlite.fts5 import prepare

WORDS = (
    "deploy", "server", "backup", "database", "index", "query", "token", "space", "memory", "agent", "review",
    "cache", "latency", "build", "release", "python", "rust", "zig", "sqlite", "postgres", "schema", "migration",
    "socket", "daemon", "client", "grant", "secret", "window", "snippet", "running", "runs", "ran", "café", "cafe",
    "naïve", "resume", "résumé", "bike-related", "bachelor's", "e-mail", "state-of-the-art", "the", "a", "of",
    "to", "and", "in", "is", "it", "that", "for", "on", "with", "was", "as", "we", "you", "this",
)  # fmt: skip
CJK = ["我们的项目使用北京的服务器部署", "数据库备份每天凌晨三点执行", "北方的天气很冷", "京剧很好看",
       "東京タワーに行った", "ラーメンを食べた", "서울에서 만나요", "서버 배포는 금요일에"]  # fmt: skip
SMALL, BIG = [f"team/s{i:02d}" for i in range(40)], "project/big"


def text(rng: random.Random, n: int) -> str:
    parts = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.25:
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(CJK)[: rng.randint(2, 8)])
    return " ".join(parts)


@dataclass
class Fixture:
    store: SQLiteStore
    ref: apsw.Connection
    queries: list[str]


@pytest.fixture(scope="module")
def fixture() -> Iterator[Fixture]:
    built = build()
    yield built
    built.store.close()


def build() -> Fixture:
    """About 1,700 memories: 40 small spaces of 25 and one of 700, some titled, tagged or of kind `fact`."""
    rng = random.Random(20261201)
    store = open_store(tempfile.mkdtemp(prefix="hm-rank-") + "/store.db")
    store.conn.execute("PRAGMA synchronous=OFF")  # filling speed only; nothing here depends on durability
    ref = apsw.Connection(":memory:")
    prepare(ref)
    ref.execute("CREATE VIRTUAL TABLE t USING fts5(title, content, tags, space UNINDEXED, "
                "tokenize = 'hivemem porter unicode61 remove_diacritics 2')")  # fmt: skip
    spaces = [s for s in SMALL for _ in range(25)] + [BIG] * 700
    rng.shuffle(spaces)
    for space in spaces:
        p: dict[str, Any] = {"space": space, "content": text(rng, rng.choice((4, 8, 15, 40, 120)))}
        if rng.random() < 0.3:
            p["title"] = text(rng, 2)
        if rng.random() < 0.2:
            p["tags"] = sorted({rng.choice(("deploy", "build", "db", "ops")) for _ in range(2)})
        if rng.random() < 0.2:
            p["kind"] = "fact"
        made = ops.dispatch(store, owner(), "memory.add", p)
        if made["changed"]:
            row = (int(made["id"][1:]), p.get("title", ""), p["content"], " ".join(p.get("tags", ())), space)
            ref.execute("INSERT INTO t(rowid, title, content, tags, space) VALUES (?, ?, ?, ?, ?)", row)
    queries = [text(rng, rng.randint(1, 4)) for _ in range(120)] + [
        "北京",
        "怎么做数据库备份",
        "タワー",
        "서울",
        "cafe",
    ]
    return Fixture(store, ref, queries)


def reference(fx: Fixture, query: str, spaces: list[str] | None, kinds: list[str] | None = None) -> list[int]:
    words = terms(query)
    if not words:
        return []
    rows = fx.ref.execute("SELECT rowid, space FROM t WHERE t MATCH ? ORDER BY bm25(t, 5.0, 1.0, 3.0), rowid DESC",
                          (fts.match_expression(words),)).fetchall()  # fmt: skip
    fact = {int(r[0][1:]) for r in fx.store.conn.execute("SELECT 'm' || id FROM memories WHERE kind = 'fact'")}
    return [m for m, s in rows if (spaces is None or s in spaces) and (kinds is None or m in fact)][:100]  # type: ignore[return-value]


def hivemem(fx: Fixture, query: str, flt: Filter) -> list[int]:
    return fts.ranked(fx.store.conn, terms(query), flt)


READ_ALL = owner().scope("read")
TWO_SPACES = Principal("g1", "c", ({"right": "read", "scope": f"space:{SMALL[3]}"},
                                   {"right": "read", "scope": f"space:{SMALL[4]}"})).scope("read")  # fmt: skip
CASES = {
    "all spaces (whole index)": (Filter(readable=READ_ALL), None, None),
    "one small space (MATCH by space token)": (Filter(readable=READ_ALL, spaces=(SMALL[7],)), [SMALL[7]], None),
    "two small spaces": (Filter(readable=READ_ALL, spaces=(SMALL[1], SMALL[9])), [SMALL[1], SMALL[9]], None),
    "readable set of two spaces": (Filter(readable=TWO_SPACES), [SMALL[3], SMALL[4]], None),
    "small space and a kind (token and join)": (
        Filter(readable=READ_ALL, spaces=(SMALL[5],), kinds=("fact",)), [SMALL[5]], ["fact"]),
    "the big space (join)": (Filter(readable=READ_ALL, spaces=(BIG,)), [BIG], None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_every_plan_ranks_as_one_fts5_table(fixture: Fixture, case: str) -> None:
    flt, spaces, kinds = CASES[case]
    matched = 0
    for query in fixture.queries:
        want = reference(fixture, query, spaces, kinds)
        assert hivemem(fixture, query, flt) == want, (case, query)
        matched += bool(want)
    assert matched >= len(fixture.queries) // 3, "the fixture must exercise real rankings"


def test_plans_are_the_ones_named(fixture: Fixture) -> None:
    conn = fixture.store.conn
    assert fts._small(conn, (SMALL[7],)) and fts._small(conn, (SMALL[3], SMALL[4]))
    assert not fts._small(conn, (BIG,)) and not fts._covers_store(conn, (BIG,))
    assert fts._covers_store(conn, tuple(sorted([*SMALL, BIG])))


def test_own_bm25_is_fts5_bm25_bit_for_bit(fixture: Fixture) -> None:
    conn = fixture.store.conn
    for query in fixture.queries:
        words = terms(query)
        if not words:
            continue
        counts = fts.document_counts(conn, words)
        marks = ", ".join("?" * len(counts))
        rows = conn.execute(f"SELECT {fts.BM25}, hivemem_bm25(memory_fts, {marks}) FROM memory_fts "
                            "WHERE memory_fts MATCH ?", (*counts, fts.match_expression(words))).fetchall()  # fmt: skip
        assert all(a == b for a, b in rows), query


def test_snippets_are_fts5_snippets(fixture: Fixture) -> None:
    checked = 0
    for query in fixture.queries:
        words = terms(query)
        hits = ops.dispatch(fixture.store, owner(), "memory.search", {"query": query, "limit": 20})["results"]
        for hit in hits:
            want = fixture.ref.execute("SELECT snippet(t, 1, '', '', '…', 64) FROM t WHERE t MATCH ? AND rowid = ?",  # type: ignore[index]
                                       (fts.match_expression(words), int(hit["id"][1:]))).fetchone()[0]  # fmt: skip
            assert hit["snippet"] == want, (query, hit["id"])
            checked += "…" in want
    assert checked > 20, "long contents must be cut by the snippet window"
