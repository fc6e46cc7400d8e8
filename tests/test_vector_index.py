"""The vector list's index (search/vector.py, docs/decisions.md D220) on a real SQLite store, in-process.

The index keeps each vector as int8 codes with a per-row scale and error bound and rescores its candidates from
the stored float32 blobs. Whatever the quantization, the list must be the vector list docs/search.md defines: the
float32 product of the query with every stored vector the filter admits, at or above the floor, by similarity
then highest id, the first 100. The reference here computes exactly that, in float64, from SQLite directly.
Filters (spaces, grants on spaces and on single memories, kinds, status, deleted memories) apply before top-k,
so a filter never leaves a gap.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hivemem import ops
from hivemem.auth import Readable, owner
from hivemem.search import vector
from hivemem.search.vector import LIST_MAX, VectorIndex, quantize
from hivemem.store import SQLiteStore, open_store
from hivemem.store.filters import Filter
from hivemem.store.sqlite import vectors
from hivemem.store.sqlite.filters import condition

MODEL = "test-48"
WIDTH = 48
SPACES = ("user", "team/a", "team/b", "project/x", "project/y")
N = 2400
EVERYTHING = Readable(everything=True)


def unit(rng: np.random.Generator, shape: Any) -> Any:
    m = rng.standard_normal(shape).astype(np.float32)
    return m / np.linalg.norm(m, axis=-1, keepdims=True)


def build(n: int) -> tuple[SQLiteStore, list[Any]]:
    """n memories over five spaces (5% of kind fact, some archived or deleted), each with a unit vector near one
    of ten centers, some of them exact copies of another's vector (ties broken by highest id); and queries."""
    rng = np.random.default_rng(20261202)
    store = open_store(tempfile.mkdtemp(prefix="hm-vec-") + "/store.db")
    store.conn.execute("PRAGMA synchronous=OFF")  # filling speed only
    who = owner()
    made = []
    for i in range(n):
        kind = "fact" if i % 20 == 7 else "note"
        made.append(ops.dispatch(store, who, "memory.add", {"space": SPACES[i % len(SPACES)], "kind": kind,
                                                            "content": f"memory number {i}"}))  # fmt: skip
    for m in made[3::50]:
        ops.dispatch(store, who, "memory.delete", {"id": m["id"], "revision": m["revision"]})
    for m in made[11::60]:
        ops.dispatch(store, who, "memory.archive", {"id": m["id"], "revision": m["revision"]})
    centers = unit(rng, (10, WIDTH))
    pending = vectors.pending(store.conn, n + 1)
    matrix = centers[rng.integers(0, 10, len(pending))]
    matrix = matrix + 0.35 * rng.standard_normal((len(pending), WIDTH)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    for k in range(0, len(pending) - 1, 97):
        matrix[k + 1] = matrix[k]  # exact ties
    vectors.put(store.conn, MODEL, [(m, t, d, v) for (m, t, _, d), v in zip(pending, matrix.tolist(), strict=True)])
    return store, [*unit(rng, (12, WIDTH)), *centers[:4], matrix[1], matrix[98]]


def close(store: SQLiteStore) -> None:
    store.close()
    shutil.rmtree(os.path.dirname(store.path), ignore_errors=True)


@pytest.fixture(scope="module")
def fixture() -> Iterator[tuple[SQLiteStore, list[Any]]]:
    store, queries = build(N)
    yield store, queries
    close(store)


def reference(store: SQLiteStore, query: Any, flt: Filter, floor: float) -> list[tuple[int, float]]:
    where, args = condition(flt, "m")
    rows: list[Any] = store.conn.execute(
        f"SELECT m.id, v.embedding FROM memories m JOIN memory_vectors v ON v.memory = m.id "
        f"WHERE {where} AND v.model = ?",
        (*args, MODEL),
    ).fetchall()
    q = np.asarray(query, dtype=np.float64)
    scored = [(int(m), float(np.frombuffer(blob, dtype="<f4").astype(np.float64) @ q)) for m, blob in rows]
    return sorted(((m, s) for m, s in scored if s >= floor), key=lambda t: (-t[1], -t[0]))[:LIST_MAX]


def same_list(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same similarities in the same order (float32 against float64: within 1e-5), and the same ids except
    where two similarities are that close."""
    assert len(got) == len(want)
    assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-5)
    exact = dict(want)
    for (gm, _), (wm, ws) in zip(got, want, strict=True):
        assert gm == wm or (gm in exact and abs(exact[gm] - ws) < 1e-5), (gm, wm)


# fmt: off
FILTERS = {
    "everything": Filter(readable=EVERYTHING),
    "one space": Filter(readable=EVERYTHING, spaces=("team/a",)),
    "two spaces": Filter(readable=EVERYTHING, spaces=("team/b", "project/y")),
    "a grant on a prefix": Filter(readable=Readable(prefixes=("project",))),
    "a grant on one space and three memories": Filter(readable=Readable(spaces=frozenset({"user"}),
                                                                         memories=frozenset({2, 3, 4}))),
    "kind fact (5%: the walk grows)": Filter(readable=EVERYTHING, kinds=("fact",)),
    "archived ones": Filter(readable=EVERYTHING, status="archived"),
    "any status": Filter(readable=EVERYTHING, status=None),
}
# fmt: on


@pytest.mark.parametrize("name", FILTERS)
def test_the_list_is_the_exact_float32_list(fixture: tuple[SQLiteStore, list[Any]], name: str) -> None:
    store, queries = fixture
    index = VectorIndex(MODEL)
    for query in queries:
        for floor in (-1.0, 0.3, 0.6):
            got = index.scan(store.vectors, query, FILTERS[name], floor)
            same_list(got, reference(store, query, FILTERS[name], floor))


def test_exact_ties_rank_the_highest_id_first(fixture: tuple[SQLiteStore, list[Any]]) -> None:
    store, queries = fixture
    got = VectorIndex(MODEL).scan(store.vectors, queries[-1], FILTERS["everything"], -1.0)
    top = [m for m, s in got if s == got[0][1]]
    assert len(top) == 2 and top[0] > top[1]


def test_the_int8_rows_alone_would_not_give_the_same_list(fixture: tuple[SQLiteStore, list[Any]]) -> None:
    """Why rescoring is needed: ranked by the quantized products only, some lists differ from the exact ones."""
    store, queries = fixture
    rows: list[Any] = store.conn.execute("SELECT memory, embedding FROM memory_vectors ORDER BY memory").fetchall()
    ids = np.array([r[0] for r in rows])
    matrix = np.stack([np.frombuffer(r[1], dtype="<f4") for r in rows])
    codes, scale, _ = quantize(matrix)
    differ = 0
    for query in queries:
        exact = ids[np.argsort(-(matrix.astype(np.float64) @ query), kind="stable")[:LIST_MAX]]
        approx = ids[np.argsort(-((codes.astype(np.float32) @ query) * scale), kind="stable")[:LIST_MAX]]
        differ += list(exact) != list(approx)
    assert differ > 0


def test_paged_loading_and_touched_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full load a page at a time, then vectors replaced and dropped through `touch`, as the worker does."""
    store, queries = build(700)
    try:
        monkeypatch.setattr(vector, "PAGE", 97)
        index = VectorIndex(MODEL)
        flt, query = FILTERS["everything"], queries[0]
        same_list(index.scan(store.vectors, query, flt, -1.0), reference(store, query, flt, -1.0))
        count: Any = store.conn.execute("SELECT COUNT(*) FROM memory_vectors").fetchone()
        assert len(index) == count[0]
        sql = (
            "SELECT v.memory, m.title, m.content_sha256 FROM memory_vectors v JOIN memories m ON m.id = v.memory "
            "ORDER BY v.memory LIMIT 40"
        )
        rows: list[Any] = store.conn.execute(sql).fetchall()
        closest = [(int(m), t, d, list(map(float, query))) for m, t, d in rows[:20]]
        vectors.put(store.conn, MODEL, closest)
        dropped = [int(m) for m, _, _ in rows[20:]]
        store.conn.execute(f"DELETE FROM memory_vectors WHERE memory IN ({','.join(map(str, dropped))})")
        index.touch([m for m, _, _, _ in closest] + dropped)
        got = index.scan(store.vectors, query, flt, -1.0)
        same_list(got, reference(store, query, flt, -1.0))
        assert {m for m, _ in got[:20]} == {m for m, _, _, _ in closest}
        assert not {m for m, _ in got} & set(dropped)
    finally:
        close(store)


def test_the_error_bound_holds() -> None:
    """|approximate - float32| <= the row's residual norm x |query| for unit rows, including rows with one large
    component (the scale is set by it) and rows of very different norms of their parts."""
    rng = np.random.default_rng(7)
    rows = unit(rng, (3000, 384))
    rows[:500, 0] = 5.0
    rows[500:1000, :300] *= 0.01
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    codes, scale, error = quantize(rows)
    for query in unit(rng, (50, 384)):
        exact = rows.astype(np.float64) @ query
        approx = (codes.astype(np.float32) @ query) * scale
        assert np.all(np.abs(approx - exact) <= error * np.linalg.norm(query) + vector.SLACK)
