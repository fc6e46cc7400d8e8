"""memory.search: filter, full-text list, fusion and hits (SPEC 9.1)."""

from __future__ import annotations

from typing import Any

import apsw

from hivemem.errors import Unsupported
from hivemem.search.fuse import K
from hivemem.search.terms import terms
from hivemem.store.filters import Filter
from hivemem.store.sqlite import search as fts
from hivemem.store.sqlite.db import snapshot
from hivemem.store.sqlite.listing import item
from hivemem.store.sqlite.memories import cut

# FTS5's snippet counts tokens, and one token can be a whole memory (65,536 bytes without a space): 100 such
# hits would not fit a reply frame. 64 ordinary tokens take a few hundred bytes, far below this cut.
SNIPPET_MAX_BYTES = 2048


def search(conn: apsw.Connection, query: str, flt: Filter, limit: int, mode: str) -> dict[str, Any]:
    """Ranked hits; with embeddings off, `auto` and `fts` are full-text only."""
    if mode == "vector":
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    words = terms(query)  # an empty query is an error even when nothing could match
    # With one list, Reciprocal Rank Fusion keeps the full-text order (score 1/(60 + rank)), so only the best
    # `limit` rows of the list are ranked, read and given snippets (D39, D62).
    with snapshot(conn):
        ids = fts.ranked(conn, words, flt, min(limit, fts.LIST_MAX))
        rows = fts.page_rows(conn, ids, flt)
    snippets = fts.snippets(conn, words, {m: (rows[m][3], rows[m][4], rows[m][5]) for m in ids if m in rows})
    results = []
    for rank, memory in enumerate((m for m in ids if m in rows), start=1):
        hit = item(rows[memory])
        hit["snippet"] = cut(snippets.get(memory, hit["snippet"]), SNIPPET_MAX_BYTES)
        hit["score"] = 1.0 / (K + rank)
        hit["fts_rank"] = rank
        results.append(hit)
    return {"mode": "fts", "results": results}
