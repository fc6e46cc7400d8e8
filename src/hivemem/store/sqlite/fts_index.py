"""Maintenance of memory_fts, the derived search index: one entry per live, active memory (docs/schema.md).

memory_fts reads its text through the view memory_fts_source (schema version 2), which shows exactly the
live, active rows, each column carrying the memory's space as its FTS5 locale. An entry is added after its
row is written and removed before the row changes: FTS5 needs the values that were indexed to remove them.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from hivemem.progress import report
from hivemem.store import connection
from hivemem.store.sqlite.db import Connection, all_rows, atomic, scalar

BATCH = 2000
# A term's lookup visits every segment of the index: written one memory at a time, a 120k-memory index holds
# about 16 segments, and its one-space searches cost 2-3x those on the same index merged into one (D190).
MERGE_FROM_SEGMENTS = 8
MERGE_STEP_PAGES = 64  # one step of the merge: about 10-30 ms of the writer's time


def add(conn: connection.Connection, memory: int) -> None:
    """Index the memory if it is live and active (call after the row is written)."""
    conn.execute(
        "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
        "FROM memory_fts_source WHERE id = ?",
        (memory,),
    )


def add_range(conn: connection.Connection, first: int, last: int) -> None:
    """Index the live, active memories with ids from `first` to `last`, none of which may be indexed yet (rows
    just written), with one statement."""
    conn.execute(
        "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
        "FROM memory_fts_source WHERE id BETWEEN ? AND ?",
        (first, last),
    )


def remove(conn: connection.Connection, memory: int) -> None:
    """Drop the memory's entry, if it has one (call before the row changes)."""
    conn.execute(
        "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
        "FROM memory_fts_source WHERE id = ?",
        (memory,),
    )


def remove_any_version(conn: connection.Connection, memory: int) -> None:
    """`remove` in a database of any schema version (a backup keeps the version it was taken at)."""
    if int(scalar(conn, "PRAGMA user_version") or 0) >= 2:
        remove(conn, memory)
        return
    conn.execute(  # version 1: external content straight from `memories`
        "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
        "FROM memories WHERE id = ? AND deleted IS NULL AND status = 'active'",
        (memory,),
    )


def fill(conn: connection.Connection, progress: Callable[[str], None]) -> int:
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


def problems(conn: connection.Connection) -> list[str]:
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


def segments(conn: connection.Connection) -> int:
    """How many segments memory_fts is made of."""
    return int(scalar(conn, "SELECT count(DISTINCT segid) FROM memory_fts_idx") or 0)


def merge_step(conn: Connection, resume: bool) -> bool:
    """One bounded step of merging memory_fts into one segment, in its own transaction; True while work remains.

    A merge starts only when the index has more than MERGE_FROM_SEGMENTS segments; `resume` goes on with one
    already started. Only the index's layout changes: every entry, and so every search result, stays the same."""
    if not resume and segments(conn) <= MERGE_FROM_SEGMENTS:
        return False
    with atomic(conn):
        before = conn.total_changes()
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('merge', ?)", (-MERGE_STEP_PAGES,))
        return conn.total_changes() - before >= 2  # FTS5's sign that the step found nothing left to merge
