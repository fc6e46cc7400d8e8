"""The full-text list of SPEC 9.1: query tokens, FTS5 quoting and bm25 ranking."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import apsw

from hivemem.errors import InvalidParams
from hivemem.store.db import all_rows
from hivemem.store.filters import Filter

WORD = re.compile(r"\w+")
LIST_MAX = 100


@cache
def stopwords() -> frozenset[str]:
    """The fixed English stopword list shipped with the package."""
    text = resources.files("hivemem.search").joinpath("stopwords-en.txt").read_text("utf-8")
    return frozenset(w.strip().lower() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def tokens(query: str) -> list[str]:
    """Query tokens after dropping no-word tokens, stopword-only tokens and repeats."""
    if not query.strip():
        raise InvalidParams("query", "the query is empty", param="query")
    # FTS5 reads its query as a C string, so a NUL separates tokens like whitespace does.
    worded = [t for t in query.replace("\x00", " ").split() if WORD.search(t)]
    stop = stopwords()
    kept: list[str] = []
    seen: set[str] = set()
    for token in worded:
        runs = [r.lower() for r in WORD.findall(token)]
        if all(r in stop for r in runs) or token.lower() in seen:
            continue
        seen.add(token.lower())
        kept.append(token)
    return kept or worded


def match_expression(words: list[str]) -> str:
    """Each token as an FTS5 string, `"` doubled, joined with OR: never query syntax."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


RANKED = """
SELECT m.id, bm25(memory_fts, 5.0, 1.0, 3.0) AS r
FROM memory_fts JOIN memories m ON m.id = memory_fts.rowid
WHERE memory_fts MATCH ? AND {where}
ORDER BY r, m.id DESC LIMIT ?"""


def ranked(conn: apsw.Connection, query: str, flt: Filter, limit: int = LIST_MAX) -> list[tuple[int, float]]:
    """Up to `limit` (id, bm25) pairs of live, active, readable rows, best first."""
    words = tokens(query)
    if not words:
        return []
    where, args = flt.where("m")
    rows = all_rows(conn, RANKED.format(where=where), (match_expression(words), *args, limit))
    return [(int(r[0]), float(r[1])) for r in rows]


HITS = """
SELECT {columns}, bm25(memory_fts, 5.0, 1.0, 3.0) AS r, snippet(memory_fts, 1, '', '', '…', 64)
FROM memory_fts JOIN memories m ON m.id = memory_fts.rowid
WHERE memory_fts MATCH ? AND {where}
ORDER BY r, m.id DESC LIMIT ?"""


def hits(conn: apsw.Connection, query: str, flt: Filter, columns: str, limit: int) -> list[tuple[Any, ...]]:
    """The best `limit` rows of the full-text list, each with its `columns`, bm25 and snippet, in one query."""
    words = tokens(query)
    if not words:
        return []
    where, args = flt.where("m")
    sql = HITS.format(columns=columns, where=where)
    return all_rows(conn, sql, (match_expression(words), *args, min(limit, LIST_MAX)))
