"""memory.recall (SPEC 11.3): the prompt's relevance floor, the session-start selection, then the envelope."""

from __future__ import annotations

from typing import Any

from hivemem.auth import Readable
from hivemem.render import HIDDEN_STATES, Bounds, render
from hivemem.search.terms import floor_terms
from hivemem.store.base import Store
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits

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
    """The best `limit` memories for the query past the relevance floor, and how many matched (≤ 100)."""
    words = floor_terms(query)
    if not words:
        return [], 0
    return store.search.matching(words, flt, limit)
