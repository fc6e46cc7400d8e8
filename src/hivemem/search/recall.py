"""memory.recall (SPEC 11.3): the prompt's relevance floor, the session-start selection, then the envelope."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hivemem.auth import Readable
from hivemem.render import HIDDEN_STATES, Bounds, render
from hivemem.search.fuse import rrf
from hivemem.search.terms import floor_terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits

if TYPE_CHECKING:
    from hivemem.search.vector import Runtime

SESSION_KINDS = ("preference", "convention", "lesson", "procedure")


def recall(store: Store, readable: Readable, spaces: list[str], query: str | None, limit: int | None,
           limits: Limits) -> dict[str, Any]:  # fmt: skip
    """`{text, count, truncated}` for the readable `spaces` of a read path, in their order."""
    path = tuple(dict.fromkeys(spaces))
    if query is None:
        flt = Filter(readable=readable, spaces=path, kinds=SESSION_KINDS, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_session_limit
        memories, matched = store.search.newest(flt, count)
    else:
        flt = Filter(readable=readable, spaces=path, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_prompt_limit
        memories, matched = matching(store, query, flt, count)
    bounds = Bounds(count, limits.recall_record_chars, limits.recall_total_chars)
    return render(memories, path, bounds, matched=matched).wire()


def matching(store: Store, query: str, flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The best `limit` memories for the query past the relevance floor, and how many matched.

    With embeddings on, the vector list joins by weighted fusion, but a memory only the vector list found needs
    `recall.min_similarity`: a prompt that matches nothing injects nothing (SPEC 11.3). A query that fails to
    embed recalls by full text alone.
    """
    words = floor_terms(query)
    if not words:
        return [], 0
    runtime: Runtime | None = store.embeddings
    vector = runtime.embed_query(query) if runtime is not None else None
    if vector is None or runtime is None:
        return store.search.matching(words, flt, limit)
    with store.search.snapshot():
        ids = _fused(store, runtime, vector, flt, store.search.ranked(words, flt))
        return store.search.shaped(ids[:limit], flt), len(ids)


def _fused(store: Store, runtime: Runtime, vector: Any, flt: Filter, fts_ids: list[int]) -> list[int]:
    limits = store.limits
    near = runtime.vector_list(store.vectors, vector, flt, limits.search_min_similarity)
    fused = rrf({"fts": fts_ids, "vector": [m for m, _ in near]}, {"vector": limits.vector_weight})
    similarity = dict(near)
    return [m for m, _, ranks in fused if "fts" in ranks or similarity[m] >= limits.recall_min_similarity]
