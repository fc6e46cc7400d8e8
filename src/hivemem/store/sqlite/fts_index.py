"""Maintenance of memory_fts, the derived search index: one entry per live, active memory (SPEC 5.3).

memory_fts reads its text through the view memory_fts_source (schema version 2), which shows exactly the
live, active rows, each column carrying the memory's space as its FTS5 locale. An entry is added after its
row is written and removed before the row changes: FTS5 needs the values that were indexed to remove them.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from hivemem.progress import report
from hivemem.store.sqlite.db import all_rows, scalar

BATCH = 2000


def add(conn: apsw.Connection, memory: int) -> None:
    """Index the memory if it is live and active (call after the row is written)."""
    conn.execute(
        "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
        "FROM memory_fts_source WHERE id = ?",
        (memory,),
    )


def add_range(conn: apsw.Connection, first: int, last: int) -> None:
    """Index the live, active memories with ids from `first` to `last`, none of which may be indexed yet (rows
    just written), with one statement."""
    conn.execute(
        "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
        "FROM memory_fts_source WHERE id BETWEEN ? AND ?",
        (first, last),
    )


def remove(conn: apsw.Connection, memory: int) -> None:
    """Drop the memory's entry, if it has one (call before the row changes)."""
    conn.execute(
        "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
        "FROM memory_fts_source WHERE id = ?",
        (memory,),
    )


def remove_any_version(conn: apsw.Connection, memory: int) -> None:
    """`remove` in a database of any schema version (a backup keeps the version it was taken at)."""
    if int(scalar(conn, "PRAGMA user_version") or 0) >= 2:
        remove(conn, memory)
        return
    conn.execute(  # version 1: external content straight from `memories`
        "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
        "FROM memories WHERE id = ? AND deleted IS NULL AND status = 'active'",
        (memory,),
    )


def fill(conn: apsw.Connection, progress: Callable[[str], None]) -> int:
    """Index every live, active memory into an empty memory_fts, in batches, reporting progress; returns the count."""
    ids = [int(r[0]) for r in all_rows(conn, "SELECT id FROM memory_fts_source ORDER BY id")]
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        conn.execute(
            "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
            "FROM memory_fts_source WHERE id BETWEEN ? AND ?",
            (batch[0], batch[-1]),
        )
        progress(f"search index: {start + len(batch):,} of {len(ids):,} memories")
        report("indexing", start + len(batch), len(ids))
    return len(ids)


def problems(conn: apsw.Connection) -> list[str]:
    """What is wrong with memory_fts against the canonical rows: missing and orphaned entries, and FTS5's own
    integrity check, which re-tokenizes every live, active row (text, CJK bigrams and space tokens)."""
    live = {int(r[0]) for r in all_rows(conn, "SELECT id FROM memory_fts_source")}
    indexed = {int(r[0]) for r in all_rows(conn, "SELECT id FROM memory_fts_docsize")}
    found = [f"fts.missing m{m}" for m in sorted(live - indexed)]
    found += [f"fts.orphaned m{m}" for m in sorted(indexed - live)]
    try:
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")
    except apsw.Error as exc:
        found.append(f"fts.mismatched: {exc}")
    return found
