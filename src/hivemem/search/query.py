"""memory.search (SPEC 9.1): terms, the backend's full-text list, the vector list, fusion and the snippet bound."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hivemem.errors import Unavailable, Unsupported
from hivemem.search.fuse import K, rrf
from hivemem.search.terms import terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter

if TYPE_CHECKING:
    from hivemem.search.vector import Runtime

LIST_MAX = 100  # SPEC 9.1: each list holds at most 100 candidates
# FTS5's snippet counts tokens, and one token can be a whole memory (65,536 bytes without a space): 100 such
# hits would not fit a reply frame. 64 ordinary tokens take a few hundred bytes, far below this cut.
SNIPPET_MAX_BYTES = 2048
FALLBACK = "embedding_unavailable"


def search(store: Store, query: str, flt: Filter, limit: int, mode: str) -> dict[str, Any]:
    """Ranked hits in the mode SPEC 9.1's table gives for `mode` and the state of embeddings."""
    runtime: Runtime | None = store.embeddings
    if mode == "vector" and runtime is None:
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    words = terms(query)  # an empty query is an error even when nothing could match
    if runtime is None or mode == "fts":
        return fts_search(store, words, flt, limit)
    vector = runtime.embed_query(query)
    if vector is None:
        if mode == "vector":
            raise Unavailable("embeddings", f"the query could not be embedded: {runtime.last_error}",
                              fix="hivemem doctor  # or search with --mode fts")  # fmt: skip
        return {**fts_search(store, words, flt, limit), "fallback": FALLBACK}
    limits = store.limits
    if not words:
        return {"mode": mode if mode == "vector" else "hybrid", "results": []}  # no word: matches nothing
    with store.search.snapshot():
        fts_ids = store.search.ranked(words, flt) if mode != "vector" else []
        near = runtime.vector_list(store.vectors, vector, flt, limits.search_min_similarity)
        fused = rrf({"fts": fts_ids, "vector": [m for m, _ in near]}, {"vector": limits.vector_weight})[:limit]
        marked = {m for m, _, r in fused if "fts" in r}
        listed = store.search.listed(words, [m for m, _, _ in fused], marked, flt)
    similarity = dict(near)
    by_id = {int(h["id"][1:]): h for h in listed}
    results: list[dict[str, Any]] = []
    for memory, score, ranks in fused:
        found = by_id.get(memory)
        if found is None:
            continue
        hit: dict[str, Any] = {**found, "snippet": cut(found["snippet"], SNIPPET_MAX_BYTES), "score": score}
        if "fts" in ranks:
            hit["fts_rank"] = ranks["fts"]
        if "vector" in ranks:
            hit["vector_rank"] = ranks["vector"]
            hit["similarity"] = similarity[memory]
        results.append(hit)
    return {"mode": "vector" if mode == "vector" else "hybrid", "results": results}


def fts_search(store: Store, words: list[str], flt: Filter, limit: int) -> dict[str, Any]:
    """Full text only. With one list, Reciprocal Rank Fusion keeps the full-text order (score 1/(60 + rank)),
    so only the best `limit` rows of the list are ranked, read and given snippets (D39, D62)."""
    results: list[dict[str, Any]] = []
    for rank, hit in enumerate(store.search.full_text(words, flt, min(limit, LIST_MAX)), start=1):
        results.append({**hit, "snippet": cut(hit["snippet"], SNIPPET_MAX_BYTES), "score": 1.0 / (K + rank),
                        "fts_rank": rank})  # fmt: skip
    return {"mode": "fts", "results": results}


def cut(text: str, limit: int) -> str:
    """The first `limit` bytes of text, at a UTF-8 boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")
