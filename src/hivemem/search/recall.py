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
NEAR_WINDOW = 8  # tokens: two prompt terms this close in a memory recall it on words (docs/decisions.md D126)


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


def matching(store: Store, query: str, flt: Filter, limit: int,
             window: int | None = NEAR_WINDOW) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """The best `limit` memories for the query past the relevance floor, and how many matched.

    A prompt that matches nothing injects nothing (SPEC 11.3). A memory enters on words only when it holds two
    of the prompt's floor terms at most `NEAR_WINDOW` tokens apart in one field (the term, when the prompt
    has one): one shared common word (*difference*, *time*), or two far apart in a long text, is not a
    match (docs/decisions.md D126). With embeddings on, the vector list
    joins by weighted fusion, and a memory that does not pass on words needs `recall.min_similarity`. A
    query that fails to embed recalls by full text alone. `window=None` drops the rule on words (for
    bench/bench_hybrid.py's before-and-after).
    """
    words = floor_terms(query)
    if not words:
        return [], 0
    runtime: Runtime | None = store.embeddings
    vector = runtime.embed_query(query) if runtime is not None else None
    with store.search.snapshot():
        fts_ids = store.search.ranked(words, flt)
        lexical = set(fts_ids) if window is None else store.search.near(words, fts_ids, window)
        if vector is None or runtime is None:
            ids = [m for m in fts_ids if m in lexical]
        else:
            ids = _fused(store, runtime, vector, flt, fts_ids, lexical)
        return store.search.shaped(ids[:limit], flt), len(ids)


def _fused(store: Store, runtime: Runtime, vector: Any, flt: Filter, fts_ids: list[int],
           lexical: set[int]) -> list[int]:  # fmt: skip
    limits = store.limits
    near = runtime.vector_list(store.vectors, vector, flt, limits.search_min_similarity)
    fused = rrf({"fts": fts_ids, "vector": [m for m, _ in near]}, {"vector": limits.vector_weight})
    similarity = dict(near)
    return [m for m, _, _ in fused if m in lexical or similarity.get(m, -1.0) >= limits.recall_min_similarity]
