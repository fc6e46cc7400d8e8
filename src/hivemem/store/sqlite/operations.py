"""The Operations repository of the SQLite store (docs/operations.md): export, import, check, repair-fts and backup."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol

from hivemem.auth import Principal
from hivemem.records import BackupMade, CheckReport, Exported, Imported, Repair
from hivemem.store import files
from hivemem.store.base import Visible
from hivemem.store.limits import Limits
from hivemem.store.sqlite import backup, integrity, repair, transfer
from hivemem.store.sqlite.db import Connection
from hivemem.store.transfer_check import Document


class Host(Protocol):
    """What these operations need of the SQLite store (named here, not imported: the store imports this)."""

    conn: Connection
    limits: Limits

    @property
    def data_dir(self) -> str: ...
    def close(self, *, checkpoint: bool = False, moved: bool = False) -> None: ...


class SQLiteOperations:
    __slots__ = ("_store",)

    def __init__(self, store: Host) -> None:
        self._store = store

    def export(self, actor: Principal, dest: str, keep: Callable[[str, int], bool], spaces: list[str] | None,
               include_deleted: bool, sessions: Visible | None) -> Exported:  # fmt: skip
        result = transfer.export(self._store.conn, actor, dest, keep, spaces, include_deleted, sessions)
        return result

    def import_document(self, actor: Principal, doc: Document, dry_run: bool) -> Imported:
        if dry_run:
            return transfer.dry_run(self._store.conn, doc)
        return transfer.apply(self._store.conn, self._store.limits, actor, doc)

    def check(self) -> CheckReport:
        """Every check; on a read-only connection (a reader of the daemon, or a read-only store) the ones that
        need the writer are skipped and named, and nothing here ever takes the write lock."""
        conn = self._store.conn
        skipped = integrity.WRITER_ONLY if conn.readonly("main") else ()
        checks = {name: check for name, check in integrity.CHECKS.items() if name not in skipped}
        if not skipped or conn.in_transaction:
            return integrity.report(integrity.run(conn, checks), skipped)
        # A reader checks one snapshot. FTS5 keeps the index's structure per connection and refreshes it when a
        # statement reads the table, not for PRAGMA integrity_check: read a row first, or a reader whose last
        # look predates the writer's commits reports blobs it cannot find as corruption (docs/decisions.md D234).
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT rowid FROM memory_fts LIMIT 1").fetchall()
            found = integrity.run(conn, checks)
        finally:
            conn.execute("COMMIT")
        return integrity.report(found, skipped)

    def repair_fts(self, apply: bool) -> Repair:
        if not apply:
            return repair.preview(self._store.conn)
        backups = files.default_dir(self._store.data_dir, "backups")
        return repair.rebuild(self._store.conn, backups, self._store.limits.backups_keep)

    def backup(self, dest: str) -> BackupMade:
        return backup.backup(self._store.conn, dest)


def restore(store_path: str, source: str, keep: int, open_store: Callable[[str], Host]) -> dict[str, object]:
    """Swap in a validated backup under the store lock, then open it and run every check (D103)."""
    from hivemem.paths import ensure_dir

    old = os.umask(0o077)  # it runs in the CLI: what it creates (WAL, backups/) is private whatever the umask
    try:
        ensure_dir(os.path.dirname(store_path))
        with backup.store_locked(store_path):
            result = backup.restore(store_path, source, keep)
            store = open_store(store_path)
            try:
                return {**result, "check": integrity.report(integrity.run(store.conn))}
            finally:
                store.close()
    finally:
        os.umask(old)
