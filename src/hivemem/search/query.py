"""memory.search (docs/embeddings.md): terms, the backend's full-text list, the vector list, fusion and the snippet
bound."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hivemem.errors import Unavailable, Unsupported
from hivemem.search.fuse import K, rrf
from hivemem.search.terms import terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    from hivemem.records import Hit, SearchHit, SearchResult
    from hivemem.search.vector import Runtime

    class Ranked(SearchResult):
        """A page of hits, with where the next page starts when one follows: (hits shown, the last one's id)."""

        more: NotRequired[tuple[int, str]]

    class Ranks(TypedDict, total=False):
        """A hit's rank in each list that found it, and its similarity when the vector list did."""

        fts_rank: int
        vector_rank: int
        similarity: float


LIST_MAX = 100  # docs/embeddings.md: each list holds at most 100 candidates
# FTS5's snippet counts tokens, and one token can be a whole memory (65,536 bytes without a space): 100 such
# hits would not fit a reply frame. 64 ordinary tokens take a few hundred bytes, far below this cut.
SNIPPET_MAX_BYTES = 2048
FALLBACK = "embedding_unavailable"


def search(store: Store, runtime: Runtime | None, query: str, flt: Filter, limit: int, mode: str, shown: int = 0,
           last: int | None = None) -> Ranked:  # fmt: skip
    """Ranked hits in the mode docs/embeddings.md's table gives for `mode` and the state of embeddings: the page after
    the `shown` hits of the pages before, the last of them `last`. `more` is (hits shown with this page, the
    last one's id) when a page follows (docs/decisions.md D293). `runtime` is the search side's embeddings, None
    when they are off."""
    if mode == "vector" and runtime is None:
        raise Unsupported("embeddings_off", "vector search needs embeddings; they are off", fix="use --mode fts")
    words = terms(query)  # an empty query is an error even when nothing could match
    if runtime is None or mode == "fts":
        return fts_search(store, words, flt, limit, shown, last)
    vector = runtime.embed_query(query)
    if vector is None:
        if mode == "vector":
            raise Unavailable("embeddings", f"the query could not be embedded: {runtime.last_error}",
                              fix="hivemem doctor  # or search with --mode fts")  # fmt: skip
        return {**fts_search(store, words, flt, limit, shown, last), "fallback": FALLBACK}
    limits = store.limits
    if not words:
        return {"mode": mode if mode == "vector" else "hybrid", "results": []}  # no word: matches nothing
    with store.search.snapshot():
        fts_ids = store.search.ranked(words, flt) if mode != "vector" else []
        near = runtime.vector_list(store.vectors, vector, flt, limits.search_min_similarity)
        every = rrf({"fts": fts_ids, "vector": [m for m, _ in near]}, {"vector": limits.vector_weight})
        start = resume([m for m, _, _ in every], shown, last)
        fused = every[start : start + limit]
        marked = {m for m, _, r in fused if "fts" in r}
        listed = store.search.listed(words, [m for m, _, _ in fused], marked, flt)
    similarity = dict(near)
    by_id = {int(h["id"][1:]): h for h in listed}
    results: list[SearchHit] = []
    for memory, score, ranks in fused:
        found = by_id.get(memory)
        if found is None:
            continue
        ranked: Ranks = {}
        if "fts" in ranks:
            ranked["fts_rank"] = ranks["fts"]
        if "vector" in ranks:
            ranked["vector_rank"] = ranks["vector"]
            ranked["similarity"] = similarity[memory]
        results.append(_hit(found, score, ranked))
    out: Ranked = {"mode": "vector" if mode == "vector" else "hybrid", "results": results}
    return _more(out, start, [m for m, _, _ in fused], len(every))


def resume(ranked: list[int], shown: int, last: int | None) -> int:
    """Where the page after `shown` hits starts in `ranked`: just after `last` where it still ranks, else at
    `shown` (the store changed since the page before: docs/verbs.md says what the next page may then show)."""
    if last is not None and last in ranked:
        return ranked.index(last) + 1
    return min(shown, len(ranked))


def _more(out: Ranked, start: int, page: list[int], total: int) -> Ranked:
    """`out` with `more` when hits rank after the page's."""
    if page and start + len(page) < total:
        out["more"] = (start + len(page), f"m{page[-1]}")
    return out


def fts_search(store: Store, words: list[str], flt: Filter, limit: int, shown: int = 0,
               last: int | None = None) -> Ranked:  # fmt: skip
    """Full text only. With one list, Reciprocal Rank Fusion keeps the full-text order (score 1/(60 + rank)),
    so only the best rows of the list up to the page's end are ranked, and the page's rows read and given
    snippets (D39, D62). A later page ranks again down to its end (D293)."""
    if not shown:
        found = store.search.full_text(words, flt, min(limit + 1, LIST_MAX))
        start = 0
    else:
        with store.search.snapshot():
            ids = store.search.ranked(words, flt)
            start = resume(ids, shown, last)
            page = ids[start : start + limit + 1]
            found = store.search.listed(words, page, set(page), flt)
    results: list[SearchHit] = []
    for rank, hit in enumerate(found[:limit], start=start + 1):
        results.append(_hit(hit, 1.0 / (K + rank), {"fts_rank": rank}))
    out: Ranked = {"mode": "fts", "results": results}
    return _more(out, start, [int(h["id"][1:]) for h in results], start + len(found))


def _hit(found: Hit, score: float, ranks: Ranks) -> SearchHit:
    """A listed hit with its snippet cut to SNIPPET_MAX_BYTES, its score and its ranks, in that order."""
    return {**found, "snippet": cut(found["snippet"], SNIPPET_MAX_BYTES), "score": score, **ranks}


def cut(text: str, limit: int) -> str:
    """The first `limit` bytes of text, at a UTF-8 boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")
