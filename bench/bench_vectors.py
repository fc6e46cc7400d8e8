"""The vector list's cost as stores grow: what hybrid search adds to full-text search, at N vectors of 384.

A store of N memories (synthetic text, 20 spaces) is filled through hivemem's own dispatch with the daemon
stopped, then each memory gets a random unit vector of 384 numbers (what a provider would store). Queries are
random unit vectors, so no embedding cost is measured: only the vector list of docs/search.md over the
filtered set (`search.vector.Runtime.vector_list`), in-process, for one space and for all spaces, beside the
same search in full-text mode and in hybrid mode. Baseline in the same run: raw NumPy over the same matrix
(one matrix-vector product and an argpartition, no filter), the floor any implementation pays. The first
query pays the index load (reported apart).

    .venv/bin/python bench/bench_vectors.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

import numpy as np

import benchlib as bl
from hivemem.auth import Readable
from hivemem.embeddings import Settings
from hivemem.embeddings.fake import FakeProvider
from hivemem.search.query import search
from hivemem.search.vector import Runtime
from hivemem.store import open_store
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits
from hivemem.store.sqlite import vectors

WIDTH = 384
QUERIES = 200
DEFAULTS = Limits()


class RandomQueries(FakeProvider):
    def __init__(self, model: str, seed: int = 3) -> None:
        super().__init__(Settings(model=model))
        self.rng = np.random.default_rng(seed)

    def embed(self, texts: Any, *, query: bool, timeout: float) -> list[list[float]]:
        v = self.rng.standard_normal(WIDTH).astype(np.float32)
        return [list(map(float, v / np.linalg.norm(v)))]


def fill(home: bl.Home, n: int) -> None:
    gen = bl.TextGen()
    bl.prefill(home, gen.memories(n, 80, 400, spaces=20))
    store = open_store(home.paths.store)
    store.conn.execute("PRAGMA synchronous=OFF")
    rng = np.random.default_rng(1)
    pending = vectors.pending(store.conn, n + 1)
    for start in range(0, len(pending), 5000):
        part = pending[start : start + 5000]
        m = rng.standard_normal((len(part), WIDTH)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        vectors.put(
            store.conn, "random-384", [(i, t, d, list(map(float, v))) for (i, t, _, d), v in zip(part, m, strict=True)]
        )
    store.conn.execute("PRAGMA synchronous=FULL")
    store.close()


def timed(fn: Any, count: int = QUERIES) -> list[float]:
    out = []
    for _ in range(count):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def measure(n: int) -> list[tuple[Any, ...]]:
    home = bl.Home("vectors")
    try:
        fill(home, n)
        store = open_store(home.paths.store)
        runtime = Runtime(RandomQueries("random-384"), 2000, "fake")
        store.limits = DEFAULTS
        everything = Readable(everything=True)
        spaces = sorted(r[0] for r in store.conn.execute("SELECT DISTINCT space FROM memories"))
        one = Filter(readable=everything, spaces=(spaces[0],))
        every = Filter(readable=everything)
        t = time.perf_counter()
        runtime.index.refresh(store.vectors)
        load_ms = bl.ms(time.perf_counter() - t)
        raw = np.stack([np.frombuffer(b, dtype="<f4") for _, _, b in vectors.load(store.conn, "random-384")])
        gen = bl.TextGen(seed=5)
        words = [gen.query() for _ in range(QUERIES)]
        rows = []

        def q() -> Any:
            return np.asarray(runtime.provider.embed(["q"], query=True, timeout=1)[0], dtype=np.float32)

        rows.append((n, "raw numpy top-100 (baseline)", timed(lambda: np.argpartition(-(raw @ q()), 100)[:100])))
        for label, flt in (("one space", one), ("all spaces", every)):
            rows.append(
                (n, f"vector list, {label}", timed(lambda flt=flt: runtime.vector_list(store.vectors, q(), flt, 0.0)))
            )
            it = iter(words * 2)
            rows.append(
                (
                    n,
                    f"search fts, {label}",
                    timed(lambda flt=flt, it=it: search(store, runtime, next(it), flt, 10, "fts")),
                )
            )
            it = iter(words * 2)
            rows.append(
                (n, f"search hybrid, {label}",
                 timed(lambda flt=flt, it=it: search(store, runtime, next(it), flt, 10, "auto")))
            )  # fmt: skip
        store.close()
        out = [(size, label, bl.ms(bl.median(lat)), bl.ms(bl.pct(lat, 99))) for size, label, lat in rows]
        out.append((n, "index load (first query)", load_ms, load_ms))
        return out
    finally:
        home.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "10000,100000")
    args = parser.parse_args()
    random.seed(1)
    bl.print_machine("Vector list cost at N vectors of 384")
    rows: list[tuple[Any, ...]] = []
    for n in bl.parse_sizes(args.sizes):
        print(f"filling {n:,} ...", file=sys.stderr, flush=True)
        rows += measure(n)
    bl.table(("vectors", "what", "p50 ms", "p99 ms"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
