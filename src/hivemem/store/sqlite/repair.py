"""repair-fts (docs/operations.md): preview what a rebuild would change; rebuild memory_fts from canonical rows.

Canonical rows and the audit log are never changed here; a failure rolls back with the index as it was.
"""

from __future__ import annotations

from hivemem.errors import Failed
from hivemem.records import Repair
from hivemem.store.sqlite import backup, fts_index, integrity
from hivemem.store.sqlite.db import Connection, atomic

REFUSED: dict[str, integrity.Check] = {
    "schema.unexpected": integrity.schema_unexpected,
    "tags.invalid": integrity.tags_invalid,
    "foreign_keys": integrity.foreign_keys,
}


def preview(conn: Connection) -> Repair:
    """The index findings a rebuild would clear (read-only)."""
    return {"applied": False, "findings": integrity.run(conn, integrity.FTS)}


def rebuild(conn: Connection, backups: str, keep: int) -> Repair:
    """Refuse a store whose canonical data is damaged; else back it up, then rebuild the index in one transaction."""
    blockers = integrity.run(conn, REFUSED)
    if blockers:
        raise Failed("repair_refused", f"repair-fts refuses this store: {blockers[0]['detail']} "
                     f"({len(blockers)} finding(s)); run `hivemem store check`", findings=blockers[:20])  # fmt: skip
    before = integrity.run(conn, integrity.FTS)
    dest = backup.automatic(conn, backups, keep)
    with atomic(conn):
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('delete-all')")
        indexed = fts_index.fill(conn, lambda line: None)
        after = integrity.run(conn, integrity.FTS)
        if after:
            raise Failed("store", f"the rebuilt search index still fails: {after[0]['detail']}; nothing changed",
                         backup=dest)  # fmt: skip
    return {"applied": True, "findings": before, "backup": dest, "indexed": indexed}
