"""The vector list of SPEC 9.1 step 3, and the embeddings a running daemon searches with.

`Runtime` pairs the configured provider with a `VectorIndex`: every vector of the provider's model held in
one NumPy matrix with each row's memory id and space, so a query is one matrix-vector product instead of
reading every blob from SQLite. The index is a candidate generator only:

- rows outside the filter's spaces and grants are masked *before* top-k, and the rest of the filter (status,
  kinds, tags, sessions) is checked in SQL on the candidates in best-first chunks until the list is full, so
  a filter never leaves a gap;
- a candidate whose vector SQLite no longer holds (its text changed, so the vector was dropped) is not
  admitted, so an index a little behind the store never ranks stale text. New vectors reach the index
  through `touch`, which the worker calls after each committed batch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hivemem.embeddings import EmbeddingError, Provider
from hivemem.store.base import Vectors
from hivemem.store.filters import Filter

LIST_MAX = 100
CHUNK = 128  # candidates checked against the filter in SQL at a time, growing 4x while the list is short
SQL_IDS = 5000  # ids bound in one IN list


class VectorIndex:
    """The vectors of one model, in memory; thread-safe."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._full = True  # reload everything on next use
        self._stale: set[int] = set()
        self._ids = np.zeros(0, dtype=np.int64)
        self._codes = np.zeros(0, dtype=np.int32)
        self._alive = np.zeros(0, dtype=bool)
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._row: dict[int, int] = {}
        self._spaces: list[str] = []
        self._code: dict[str, int] = {}

    def touch(self, memories: Sequence[int]) -> None:
        """These memories' vectors changed in a committed transaction."""
        with self._lock:
            self._stale.update(memories)

    def reset(self) -> None:
        with self._lock:
            self._full = True

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def refresh(self, stored: Vectors) -> None:
        with self._lock:
            if self._full:
                self._full, self._stale = False, set()
                self._n, self._row = 0, {}
                self._apply(stored.load(self.model), ())
            elif self._stale:
                stale, self._stale = sorted(self._stale), set()
                self._apply(stored.load(self.model, stale), stale)

    def _apply(self, rows: list[tuple[int, str, bytes]], touched: Sequence[int]) -> None:
        found = set()
        for memory, space, blob in rows:
            vector = np.frombuffer(blob, dtype="<f4")
            if self._n and vector.shape[0] != self._matrix.shape[1]:
                continue  # one model, one length: a stray row is never compared
            self._put(memory, space, vector)
            found.add(memory)
        for memory in touched:
            if memory not in found and memory in self._row:
                self._alive[self._row[memory]] = False

    def _put(self, memory: int, space: str, vector: Any) -> None:
        row = self._row.get(memory)
        if row is None:
            row = self._n
            self._grow(row + 1, vector.shape[0])
            self._n += 1
            self._row[memory] = row
        code = self._code.get(space)
        if code is None:
            code = self._code[space] = len(self._spaces)
            self._spaces.append(space)
        self._ids[row], self._codes[row], self._alive[row] = memory, code, True
        self._matrix[row] = vector

    def _grow(self, size: int, width: int) -> None:
        if self._matrix.shape[0] >= size and self._matrix.shape[1] == width:
            return
        capacity = max(size, 2 * self._matrix.shape[0], 1024)
        matrix = np.zeros((capacity, width), dtype=np.float32)
        if self._matrix.shape[1] == width:
            matrix[: self._n] = self._matrix[: self._n]
        else:
            self._n, self._row = 0, {}
        self._matrix = matrix
        self._ids = np.resize(self._ids, capacity)
        self._codes = np.resize(self._codes, capacity)
        self._alive = np.resize(self._alive, capacity)

    def _space_mask(self, flt: Filter) -> Any:
        readable, wanted = flt.readable, None if flt.spaces is None else set(flt.spaces)
        if readable.everything and wanted is None:
            return None
        ok = np.array(
            [(wanted is None or s in wanted) and readable.covers(s) for s in self._spaces] or [False], dtype=bool
        )
        mask = ok[self._codes[: self._n]]
        if readable.memories:  # a grant on single memories
            extra = np.isin(self._ids[: self._n], np.fromiter(readable.memories, dtype=np.int64))
            if wanted is not None:
                extra &= np.array([s in wanted for s in self._spaces] or [False], dtype=bool)[self._codes[: self._n]]
            mask |= extra
        return mask

    def scan(self, stored: Vectors, query: Any, flt: Filter, floor: float,
             limit: int = LIST_MAX) -> list[tuple[int, float]]:  # fmt: skip
        """Up to `limit` (memory, similarity) of admitted memories at or above `floor`, best first, then
        highest id."""
        self.refresh(stored)
        with self._lock:
            n = self._n
            if not n or self._matrix.shape[1] != query.shape[0]:
                return []
            mask = self._space_mask(flt)
            alive = self._alive[:n] if mask is None else self._alive[:n] & mask
            if mask is None and alive.all():
                rows, sims = None, _dot(self._matrix[:n], query)
            else:  # only the rows the spaces and grants admit: a one-space search reads one space's vectors
                rows = np.nonzero(alive)[0]
                sims = _dot(self._matrix[rows], query)
            keep = np.nonzero(sims >= floor)[0]
            candidates = keep if rows is None else rows[keep]
            ids = self._ids[candidates]
            sims = sims[keep]
        return self._walk(stored, flt, limit, ids, sims)

    def _walk(self, stored: Vectors, flt: Filter, limit: int, ids: Any, sims: Any) -> list[tuple[int, float]]:
        """Check candidates against the whole filter in SQL, best first, in growing chunks, until `limit` pass."""
        found: dict[int, float] = {}
        done, size, total = 0, CHUNK, len(ids)
        while done < total and len(found) < limit:
            k = min(total, done + size)
            top = np.argpartition(-sims, k - 1)[:k] if k < total else np.arange(total)
            chunk = top[np.argsort(-sims[top], kind="stable")][done:k]
            for start in range(0, len(chunk), SQL_IDS):
                part = ids[chunk[start : start + SQL_IDS]].tolist()
                passed = stored.admitted(self.model, part, flt)
                found.update((m, s) for m, s in zip(part, sims[chunk[start : start + SQL_IDS]].tolist(), strict=True)
                             if m in passed)  # fmt: skip
            done, size = k, size * 4
        best = sorted(found.items(), key=lambda t: (-t[1], -t[0]))
        return best[:limit]


BLAS_ROWS = 20_000  # from this many rows the product is long enough for BLAS's threads to pay


def _dot(matrix: Any, query: Any) -> Any:
    """Matrix-vector product. Below BLAS_ROWS in NumPy's own loop: BLAS's thread pool spin-waits on a busy
    2-core machine, measured 0.1 to 40 ms for 2,000 rows where this takes 0.13 ms. From BLAS_ROWS on, BLAS:
    the product reads the whole matrix (154 MB at 100k x 384) and two threads read it faster (measured at
    100k: 15-18 ms against 21 ms p50, and 27 against 41 ms p95, on a loaded machine)."""
    if matrix.shape[0] >= BLAS_ROWS:
        return matrix @ query
    return np.einsum("ij,j->i", matrix, query)


class Runtime:
    """The provider and index a daemon searches with (None of it exists when embeddings are off)."""

    def __init__(self, provider: Provider, query_timeout_ms: int, kind: str) -> None:
        self.provider = provider
        self.kind = kind  # the configured provider: http or local
        self.query_timeout = query_timeout_ms / 1000
        self.index = VectorIndex(provider.model)
        self.last_error: str | None = None

    @property
    def model(self) -> str:
        return self.provider.model

    def embed_query(self, text: str) -> Any | None:
        """The unit query vector, or None when the provider fails or runs out of time."""
        try:
            vector = self.provider.embed([text], query=True, timeout=self.query_timeout)[0]
        except EmbeddingError as exc:
            self.last_error = str(exc)
            return None
        return np.asarray(vector, dtype=np.float32)

    def vector_list(self, stored: Vectors, query: Any, flt: Filter, floor: float) -> list[tuple[int, float]]:
        return self.index.scan(stored, query, flt, floor)
