"""The vector list of docs/embeddings.md, and the embeddings a running daemon searches with.

`Runtime` pairs the configured provider with a `VectorIndex`: every vector of the provider's model held in
memory, quantized to one signed byte per number with a scale per row (a quarter of float32: 38 MB at 100k x 384,
docs/decisions.md D220), with each row's memory id and space. A query is one pass over those bytes instead of
reading every blob from SQLite. The index is a candidate generator only:

- rows outside the filter's spaces and grants are masked *before* top-k, and the rest of the filter (status,
  kinds, tags, sessions) is checked in SQL on the candidates in best-first chunks until the list is full, so
  a filter never leaves a gap;
- the same SQL returns each candidate's float32 vector, and its similarity is computed again from it exactly.
  Every row carries a bound on its quantization error, so candidates are taken by their highest possible
  similarity and the walk stops only when no unchecked row can still enter: the list is the exact one a
  float32 product over every row would give;
- a candidate whose vector SQLite no longer holds (its text changed, so the vector was dropped) is not
  admitted, so an index a little behind the store never ranks stale text. New vectors reach the index
  through `touch`, which the worker calls after each committed batch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from hivemem.embeddings import EmbeddingError, Provider
from hivemem.store.base import Vectors
from hivemem.store.filters import Filter

LIST_MAX = 100
CHUNK = 128  # candidates added to the look while too few have passed the filter, growing 4x
SQL_IDS = 5000  # ids bound in one IN list
PAGE = 1000  # vectors read from the store at a time when the index loads (1.5 MB of blobs at 384; D222)
# Numbers turned back into float32 at a time for the product: 1,024 rows of 384 (1.5 MB, in cache). Measured at
# 100k x 384 on the 2-core machine under load 3 (D220): 1,024 rows a block 8.6-9.2 ms p50 all spaces, 512 rows
# 9.8-10.7, 2,048 rows and more 33-282 ms. From about 1,200 rows of 384 OpenBLAS splits each product over two
# threads, whose waking and spin-waiting on a busy machine costs far more than the product; below, one thread.
if TYPE_CHECKING:
    from typing import TypeVar

    import numpy.typing as npt

    Kind = TypeVar("Kind", bound=np.generic)

    Floats = npt.NDArray[np.float32]  # vectors and per-row numbers
    Codes = npt.NDArray[np.int8]  # quantized rows
    Ints = npt.NDArray[np.int64]  # memory ids, row numbers
    Mask = npt.NDArray[np.bool_]

BLOCK_NUMBERS = 1024 * 384
LEVELS = 127.0  # a row is stored as round(v / scale) in [-127, 127], scale = max |v| / 127
SLACK = 1e-4  # float32 rounding of the approximate and the exact product, well above either (about 2e-5)


def quantize(matrix: Floats) -> tuple[Codes, Floats, Floats]:
    """(codes, scale, error) of float32 rows: int8 codes with `matrix ~ codes * scale[:, None]`, and each
    row's exact residual norm |v - codes * scale|, which bounds the error of its product with a unit query
    (Cauchy-Schwarz)."""
    top = np.abs(matrix).max(axis=1)
    scale = np.where(top > 0, top / LEVELS, 1.0).astype(np.float32)
    codes = np.rint(matrix / scale[:, None]).astype(np.int8)
    error = np.linalg.norm(matrix - codes.astype(np.float32) * scale[:, None], axis=1).astype(np.float32)
    return codes, scale, error


class VectorIndex:
    """The vectors of one model, in memory; thread-safe."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._full = True  # reload everything on next use
        self._stale: set[int] = set()
        self._clear(0)

    def _clear(self, capacity: int) -> None:
        self._n = 0
        self._row: dict[int, int] = {}
        self._spaces: list[str] = []
        self._code: dict[str, int] = {}
        self._width = 0
        self._capacity = capacity  # rows to allocate at the first vector (the store's count on a full load)
        self._ids = np.zeros(0, dtype=np.int64)
        self._codes = np.zeros(0, dtype=np.int32)
        self._alive = np.zeros(0, dtype=bool)
        self._q = np.zeros((0, 0), dtype=np.int8)
        self._scale = np.zeros(0, dtype=np.float32)
        self._error = np.zeros(0, dtype=np.float32)

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
                self._clear(stored.count(self.model))
                after = 0
                while True:  # a page at a time: the blobs of a whole store are never held at once
                    rows = stored.page(self.model, after, PAGE)
                    self._apply(rows, ())
                    if len(rows) < PAGE:
                        break
                    after = rows[-1][0]
            elif self._stale:
                stale, self._stale = sorted(self._stale), set()
                for start in range(0, len(stale), SQL_IDS):
                    part = stale[start : start + SQL_IDS]
                    self._apply(stored.load(self.model, part), part)

    def _apply(self, rows: list[tuple[int, str, bytes]], touched: Sequence[int]) -> None:
        width = self._width or (len(rows[0][2]) // 4 if rows else 0)
        good = [r for r in rows if len(r[2]) == 4 * width and width]  # one model, one length
        if good:
            matrix = np.frombuffer(b"".join(blob for _, _, blob in good), dtype="<f4").reshape(len(good), width)
            self._put(good, matrix)
        found = {memory for memory, _, _ in good}
        for memory in touched:
            if memory not in found and memory in self._row:
                self._alive[self._row[memory]] = False

    def _put(self, good: list[tuple[int, str, bytes]], matrix: Floats) -> None:
        fresh = sum(1 for memory, _, _ in good if memory not in self._row)
        self._grow(self._n + fresh, matrix.shape[1])
        rows = np.empty(len(good), dtype=np.int64)
        codes = np.empty(len(good), dtype=np.int32)
        for i, (memory, space, _) in enumerate(good):
            row = self._row.get(memory)
            if row is None:
                row = self._row[memory] = self._n
                self._n += 1
            code = self._code.get(space)
            if code is None:
                code = self._code[space] = len(self._spaces)
                self._spaces.append(space)
            rows[i], codes[i] = row, code
        q, scale, error = quantize(matrix)
        self._q[rows], self._scale[rows], self._error[rows] = q, scale, error
        self._ids[rows] = [memory for memory, _, _ in good]
        self._codes[rows], self._alive[rows] = codes, True

    def _grow(self, size: int, width: int) -> None:
        """Room for `size` rows: the first allocation takes the store's count, later ones a quarter more (a
        doubling would hold two copies of a large index at once for nothing)."""
        if self._q.shape[0] >= size and self._width == width:
            return
        capacity = max(size, self._capacity, self._q.shape[0] + self._q.shape[0] // 4, 1024)
        self._capacity = 0
        keep = self._n if self._width == width else 0
        self._width = width

        def grown(old: npt.NDArray[Kind], shape: int | tuple[int, int], dtype: type[Kind]) -> npt.NDArray[Kind]:
            new = np.zeros(shape, dtype=dtype)
            if keep:
                new[:keep] = old[:keep]
            return new

        self._q = grown(self._q, (capacity, width), np.int8)
        self._scale = grown(self._scale, capacity, np.float32)
        self._error = grown(self._error, capacity, np.float32)
        self._ids = grown(self._ids, capacity, np.int64)
        self._codes = grown(self._codes, capacity, np.int32)
        self._alive = grown(self._alive, capacity, np.bool_)

    def _space_mask(self, flt: Filter) -> Mask | None:
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

    def scan(self, stored: Vectors, query: Floats, flt: Filter, floor: float,
             limit: int = LIST_MAX) -> list[tuple[int, float]]:  # fmt: skip
        """Up to `limit` (memory, similarity) of admitted memories at or above `floor`, best first, then
        highest id; the similarity is the float32 product of the stored vector and the query."""
        self.refresh(stored)
        query = np.ascontiguousarray(query, dtype=np.float32)
        with self._lock:
            n = self._n
            if not n or self._width != query.shape[0]:
                return []
            mask = self._space_mask(flt)
            alive = self._alive[:n] if mask is None else self._alive[:n] & mask
            rows = None if mask is None and alive.all() else np.nonzero(alive)[0]
            # each row's similarity lies within `bound` of its approximate product
            approx = self._approximate(rows, query)
            bound = (self._error[:n] if rows is None else self._error[rows]) * float(np.linalg.norm(query)) + SLACK
            keep = np.nonzero(approx + bound >= floor)[0]
            candidates = keep if rows is None else rows[keep]
            ids = self._ids[candidates]
            approx, bound = approx[keep], bound[keep]
            width = self._width
        return self._walk(stored, flt, limit, (query, width, floor), ids, approx, bound)

    def _approximate(self, rows: Ints | None, query: Floats) -> Floats:
        """scale * (codes . query) of all rows (None) or of `rows`, in blocks turned into float32: a one-space
        search reads only that space's rows. Error against the float32 product: at most the row's
        residual norm times |query| (1 for a unit query)."""
        count = self._n if rows is None else len(rows)
        step = max(1, BLOCK_NUMBERS // self._width)
        out = np.empty(count, dtype=np.float32)
        block = np.empty((min(step, count), self._width), dtype=np.float32)
        for start in range(0, count, step):
            stop = min(count, start + step)
            part = block[: stop - start]
            np.copyto(part, self._q[start:stop] if rows is None else self._q[rows[start:stop]], casting="unsafe")
            np.dot(part, query, out=out[start:stop])
        out *= self._scale[: self._n] if rows is None else self._scale[rows]
        return out

    def _walk(self, stored: Vectors, flt: Filter, limit: int, asked: tuple[Floats, int, float], ids: Ints,
              approx: Floats, bound: Floats) -> list[tuple[int, float]]:  # fmt: skip
        """Check candidates against the whole filter in SQL and rescore them exactly, highest possible similarity
        first, until `limit` pass and no unchecked candidate can beat them.

        The first look takes every row that could reach the `limit`-th best approximate similarity; once `limit`
        have passed, the next takes every row that could still beat the `limit`-th exact one (so when the filter
        admits them all, two small reads of about 1.5 x `limit` rows in all); while fewer have passed, the look
        grows four times."""
        query, width, floor = asked
        upper = approx + bound
        total = len(ids)
        checked = np.zeros(total, dtype=bool)
        found: dict[int, float] = {}
        take = upper >= (_largest(approx, limit) if total > limit else -np.inf)
        size = CHUNK
        while True:
            chunk = np.nonzero(take & ~checked)[0]
            checked[chunk] = True
            for start in range(0, len(chunk), SQL_IDS):
                part = ids[chunk[start : start + SQL_IDS]].tolist()
                exact = _exact(stored.admitted(self.model, part, flt), query, width)
                found.update((m, s) for m, s in exact.items() if s >= floor)
            left = ~checked
            if not left.any() or not len(chunk):  # (no new row to look at cannot happen with finite bounds)
                break
            beyond = float(upper[left].max())  # the highest similarity an unchecked row can have
            if len(found) >= limit:
                kth = sorted(found.values(), reverse=True)[limit - 1]
                if kth > beyond:
                    break
                take = upper >= kth
            else:
                size = max(size, len(chunk)) * 4
                take = upper >= _largest(upper, min(total, int(checked.sum()) + size))
        best = sorted(found.items(), key=lambda t: (-t[1], -t[0]))
        return best[:limit]


def _exact(blobs: dict[int, bytes], query: Floats, width: int) -> dict[int, float]:
    """The float32 similarity of each memory's stored vector with the query."""
    good = [(m, b) for m, b in blobs.items() if len(b) == 4 * width]
    if not good:
        return {}
    matrix = np.frombuffer(b"".join(b for _, b in good), dtype="<f4").reshape(len(good), width)
    sims = np.einsum("ij,j->i", matrix, query).tolist()
    return {m: s for (m, _), s in zip(good, sims, strict=True)}


def _largest(values: Floats, k: int) -> float:
    """The k-th largest of `values` (1 <= k <= len)."""
    return float(np.partition(values, len(values) - k)[len(values) - k])


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

    def embed_query(self, text: str) -> Floats | None:
        """The unit query vector, or None when the provider fails or runs out of time."""
        try:
            vector = self.provider.embed([text], query=True, timeout=self.query_timeout)[0]
        except EmbeddingError as exc:
            self.last_error = str(exc)
            return None
        return np.asarray(vector, dtype=np.float32)

    def vector_list(self, stored: Vectors, query: Floats, flt: Filter, floor: float) -> list[tuple[int, float]]:
        return self.index.scan(stored, query, flt, floor)
