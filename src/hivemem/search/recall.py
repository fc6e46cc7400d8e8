"""memory.recall (SPEC 11.3): the prompt's relevance floor, the session-start selection, then the envelope."""

from __future__ import annotations

from typing import Any

import apsw

from hivemem.auth import Readable
from hivemem.render import HIDDEN_STATES, Bounds, render
from hivemem.search import fts
from hivemem.search.terms import floor_terms
from hivemem.store.db import all_rows, scalar, snapshot
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits
from hivemem.store.memories import COLUMNS, shape

SESSION_KINDS = ("preference", "convention", "lesson", "procedure")


def recall(conn: apsw.Connection, readable: Readable, spaces: list[str], query: str | None, limit: int | None,
           limits: Limits) -> dict[str, Any]:  # fmt: skip
    """`{text, count, truncated}` for the readable `spaces` of a read path, in their order."""
    path = tuple(dict.fromkeys(spaces))
    if query is None:
        flt = Filter(readable=readable, spaces=path, kinds=SESSION_KINDS, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_session_limit
        memories, matched = newest(conn, flt, count)
    else:
        flt = Filter(readable=readable, spaces=path, hide_states=HIDDEN_STATES)
        count = limit or limits.recall_prompt_limit
        memories, matched = matching(conn, query, flt, count)
    bounds = Bounds(count, limits.recall_record_chars, limits.recall_total_chars)
    return render(memories, path, bounds, matched=matched).wire()


def matching(conn: apsw.Connection, query: str, flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The best `limit` memories for the query past the relevance floor, and how many matched (≤ 100)."""
    words = floor_terms(query)
    if not words:
        return [], 0
    with snapshot(conn):
        ids = fts.ranked(conn, words, flt)
        rows = fts.page_rows(conn, ids[:limit], flt)
    return [shape(rows[m]) for m in ids[:limit] if m in rows], len(ids)


def newest(conn: apsw.Connection, flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The `limit` most recently updated memories, and how many the filter matches in all."""
    where, args = flt.where("m")
    rows = all_rows(
        conn, f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY m.updated DESC, m.id DESC LIMIT ?",
        (*args, limit),
    )  # fmt: skip
    matched = int(scalar(conn, f"SELECT COUNT(*) FROM memories m WHERE {where}", args) or 0)
    return [shape(r) for r in rows], matched
