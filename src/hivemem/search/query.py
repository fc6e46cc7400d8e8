"""memory.search: filter, full-text list, fusion and hits (SPEC 9.1)."""

from __future__ import annotations

from typing import Any

import apsw

from hivemem.errors import Unsupported
from hivemem.search import fts
from hivemem.search.fuse import K
from hivemem.store.filters import Filter
from hivemem.store.listing import item
from hivemem.store.memories import COLUMNS, cut

ROW = ", ".join(f"m.{c}" for c in COLUMNS.split(", "))
# FTS5's snippet counts tokens, and one token can be a whole memory (65,536 bytes without a space): 100 such
# hits would not fit a reply frame. 64 ordinary tokens take a few hundred bytes, far below this cut.
SNIPPET_MAX_BYTES = 2048


def search(conn: apsw.Connection, query: str, flt: Filter, limit: int, mode: str) -> dict[str, Any]:
    """Ranked hits; with embeddings off, `auto` and `fts` are full-text only."""
    if mode == "vector":
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    fts.tokens(query)  # an empty query is an error even when nothing could match
    # With one list, Reciprocal Rank Fusion keeps the full-text order (score 1/(60 + rank)), so the best
    # `limit` rows, their snippets and their ranks come from a single query.
    results = []
    for rank, row in enumerate(fts.hits(conn, query, flt, ROW, limit), start=1):
        hit = item(row[:-2])
        hit["snippet"] = cut(row[-1], SNIPPET_MAX_BYTES)
        hit["score"] = 1.0 / (K + rank)
        hit["fts_rank"] = rank
        results.append(hit)
    return {"mode": "fts", "results": results}
