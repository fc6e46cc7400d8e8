"""memory.search: filter, full-text list, fusion and hits (SPEC 9.1)."""

from __future__ import annotations

from typing import Any

import apsw

from hivemem.errors import Unsupported
from hivemem.search import fts
from hivemem.search.fuse import rrf
from hivemem.store.filters import Filter
from hivemem.store.listing import item, rows_by_id


def search(conn: apsw.Connection, query: str, flt: Filter, limit: int, mode: str) -> dict[str, Any]:
    """Ranked hits; with embeddings off, `auto` and `fts` are full-text only."""
    if mode == "vector":
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    fts.tokens(query)  # an empty query is an error even when nothing could match
    ranked = fts.ranked(conn, query, flt)
    fused = rrf({"fts_rank": [m for m, _ in ranked]})[:limit]
    ids = [m for m, _, _ in fused]
    rows = rows_by_id(conn, ids)
    snippets = fts.snippets(conn, query, ids)
    results = []
    for memory, score, ranks in fused:
        hit = item(rows[memory])
        hit["snippet"] = snippets.get(memory, hit["snippet"])
        hit["score"] = score
        hit.update(ranks)
        results.append(hit)
    return {"mode": "fts", "results": results}
