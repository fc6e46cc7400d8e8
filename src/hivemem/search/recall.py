"""memory.recall (docs/hooks.md): the prompt's relevance floor, the session-start selection, then the envelope."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hivemem.auth import Readable
from hivemem.render import HIDDEN_STATES, Bounds, render
from hivemem.search import evidence
from hivemem.search.fuse import rrf
from hivemem.search.terms import floor_terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits

if TYPE_CHECKING:
    from hivemem.records import MemoryRead, Recall
    from hivemem.search.vector import Floats, Runtime

SESSION_KINDS = ("preference", "convention", "lesson", "procedure")
NEAR_WINDOW = 8  # tokens: D126's rule, two prompt terms this close (kept for bench/ to measure against)
RULES = ("evidence", "near", "none")  # the shipped rule on words (D282), D126's, and none at all


def recall(store: Store, runtime: Runtime | None, readable: Readable, spaces: list[str], query: str | None,
           limit: int | None, limits: Limits) -> Recall:  # fmt: skip
    """`{text, count, truncated}` for the readable `spaces` of a read path, in their order; `runtime` is the search
    side's embeddings, None when they are off."""
    path = tuple(dict.fromkeys(spaces))
    memories, matched, bounds = select(store, runtime, readable, path, query, limit, limits)
    return render(memories, path, bounds, matched=matched).wire()


def select(store: Store, runtime: Runtime | None, readable: Readable, path: tuple[str, ...], query: str | None,
           limit: int | None, limits: Limits) -> tuple[list[MemoryRead], int, Bounds]:  # fmt: skip
    """The memories a recall of `path` renders (best first), how many matched, and the render's bounds; a daemon
    with a team store mounted selects in each store and renders them together (docs/team.md)."""
    if query is None:
        flt = Filter(readable=readable, spaces=path, kinds=SESSION_KINDS, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_session_limit
        memories, matched = store.search.newest(flt, count)
    else:
        flt = Filter(readable=readable, spaces=path, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_prompt_limit
        memories, matched = matching(store, runtime, query, flt, count)
    return memories, matched, Bounds(count, limits.recall_record_chars, limits.recall_total_chars)


def matching(store: Store, runtime: Runtime | None, query: str, flt: Filter, limit: int,
             rule: str = "evidence") -> tuple[list[MemoryRead], int]:  # fmt: skip
    """The best `limit` memories for the query past the relevance floor, and how many matched.

    A prompt that matches nothing injects nothing (docs/hooks.md). A memory enters on words when the prompt words
    it holds carry enough evidence, weighed by how rare each is in the read path (search/evidence.py,
    docs/decisions.md D282): one rare word is enough, one common word is not. With embeddings on, the vector
    list joins by weighted fusion, and a memory that does not pass on words needs `recall.min_similarity`. A
    query that fails to embed recalls by full text alone. `rule` is `near` for D126's rule (two terms within
    8 tokens) and `none` for none, which bench/ measures against.
    """
    words = floor_terms(query)
    if not words:
        return [], 0
    vector = runtime.embed_query(query) if runtime is not None else None
    with store.search.snapshot():
        fts_ids = store.search.ranked(words, flt)
        if rule == "none":
            lexical = set(fts_ids)
        elif rule == "near":
            lexical = store.search.near(words, fts_ids, NEAR_WINDOW)
        else:
            lexical = evidenced(store, query, words, fts_ids, flt)
        if vector is None or runtime is None:
            ids = [m for m in fts_ids if m in lexical]
        else:
            ids = _fused(store, runtime, vector, flt, fts_ids, lexical)
        return store.search.shaped(ids[:limit], flt), len(ids)


def evidenced(store: Store, query: str, words: list[str], ids: list[int], flt: Filter) -> set[int]:
    """Those of the full-text candidates `ids` whose shared words carry enough evidence (D282)."""
    held = store.search.held(words, ids, evidence.NEAR_TOKENS)
    if not held:
        return set()
    union = 0
    for mask, _, _ in held.values():
        union |= mask
    named = evidence.names(query)
    needed = [n for n, w in enumerate(words) if union >> n & 1 or w.lower() in named]
    rows, counts = store.search.counts([words[n] for n in needed], flt)
    held_by = dict(zip(needed, counts, strict=True))
    weights = [evidence.weight(w, held_by[n], rows) if n in held_by else 0.0 for n, w in enumerate(words)]
    absent = any(held_by[n] == 0 and words[n].lower() in named for n in needed)
    if len(words) == 1 and not evidence.is_common(words[0]):
        need = 0.0  # a prompt of one word that is not a common one: what holds it
    elif absent:
        need = evidence.ABSENT_NAME_THRESHOLD
    else:  # each word of the prompt that no candidate holds says the prompt is about something else
        unknown = sum(1 for n, w in enumerate(words) if n not in held_by and len(w) > 2 and not evidence.is_common(w))
        need = evidence.THRESHOLD + evidence.UNKNOWN_STEP * min(unknown, evidence.UNKNOWN_MAX)
    return {m for m, masks in held.items() if evidence.evidence(weights, *masks) >= need}


def _fused(store: Store, runtime: Runtime, vector: Floats, flt: Filter, fts_ids: list[int],
           lexical: set[int]) -> list[int]:  # fmt: skip
    limits = store.limits
    near = runtime.vector_list(store.vectors, vector, flt, limits.search_min_similarity)
    fused = rrf({"fts": fts_ids, "vector": [m for m, _ in near]}, {"vector": limits.vector_weight})
    similarity = dict(near)
    return [m for m, _, _ in fused if m in lexical or similarity.get(m, -1.0) >= limits.recall_min_similarity]
