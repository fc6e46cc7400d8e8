"""The hygiene scan (`memory.hygiene`): live memories, relations and recall times read in one snapshot.

Runs on a reader's read-only connection, so a report never holds the write lock and never writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from hivemem.store.connection import Connection
from hivemem.store.filters import Filter
from hivemem.store.hygiene import End, Relation, Row, Scan
from hivemem.store.sqlite.db import all_rows, scalar, snapshot
from hivemem.store.sqlite.filters import condition

COLUMNS = (
    "id, space, kind, status, title, content, capture_key, tags, source, provenance, confidence, confidence_state, "
    "review_after, expires_at, revision, created, updated"
)


PAGE = 1000  # memories read at a time


def scan(conn: Connection, flt: Filter) -> Scan:
    """Every relation and the newest recall of each memory, read now, and the live memories `flt` admits, oldest
    first, in `pages` read as they are iterated (in the caller's snapshot: `Store.search.snapshot`)."""
    out = Scan(pages=_pages(conn, flt))
    with snapshot(conn):
        for r in conn.execute(
            "SELECT r.source_memory, s.space, s.deleted IS NULL, r.target_memory, t.space, t.deleted IS NULL, "
            "r.relation FROM memory_relations r LEFT JOIN memories s ON s.id = r.source_memory "
            "LEFT JOIN memories t ON t.id = r.target_memory ORDER BY r.id"
        ):
            out.relations.append(Relation(End(r[0], r[1], bool(r[2])), End(r[3], r[4], bool(r[5])), str(r[6])))
        out.recalled = {
            int(m): str(ts)
            for m, ts in conn.execute(
                "SELECT memory, MAX(ts) FROM events WHERE type = 'memory.recalled' AND memory IS NOT NULL "
                "GROUP BY memory"
            )
        }
        out.usage_recorded = bool(out.recalled) or bool(
            scalar(conn, "SELECT EXISTS (SELECT 1 FROM events WHERE type = 'memory.recalled')")
        )
    return out


def _pages(conn: Connection, flt: Filter) -> Iterator[list[Row]]:
    where, args = condition(flt, "m")
    sql = f"SELECT {COLUMNS} FROM memories m WHERE {where} AND m.id > ? ORDER BY m.id LIMIT ?"
    after = 0
    while True:
        page = [Row(*r) for r in all_rows(conn, sql, (*args, after, PAGE))]
        if page:
            yield page
        if len(page) < PAGE:
            return
        after = page[-1].id
