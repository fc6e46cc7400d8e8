"""memory.search (SPEC 9.1): terms, the backend's full-text list, fusion scores and the snippet bound."""

from __future__ import annotations

from typing import Any

from hivemem.errors import Unsupported
from hivemem.search.fuse import K
from hivemem.search.terms import terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter

LIST_MAX = 100  # SPEC 9.1: each list holds at most 100 candidates
# FTS5's snippet counts tokens, and one token can be a whole memory (65,536 bytes without a space): 100 such
# hits would not fit a reply frame. 64 ordinary tokens take a few hundred bytes, far below this cut.
SNIPPET_MAX_BYTES = 2048


def search(store: Store, query: str, flt: Filter, limit: int, mode: str) -> dict[str, Any]:
    """Ranked hits; with embeddings off, `auto` and `fts` are full-text only."""
    if mode == "vector":
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    words = terms(query)  # an empty query is an error even when nothing could match
    # With one list, Reciprocal Rank Fusion keeps the full-text order (score 1/(60 + rank)), so only the best
    # `limit` rows of the list are ranked, read and given snippets (D39, D62).
    results: list[dict[str, Any]] = []
    for rank, hit in enumerate(store.search.full_text(words, flt, min(limit, LIST_MAX)), start=1):
        results.append({**hit, "snippet": cut(hit["snippet"], SNIPPET_MAX_BYTES), "score": 1.0 / (K + rank),
                        "fts_rank": rank})  # fmt: skip
    return {"mode": "fts", "results": results}


def cut(text: str, limit: int) -> str:
    """The first `limit` bytes of text, at a UTF-8 boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")
