"""The Operations repository of the PostgreSQL store: export and import as on SQLite, the checks of SPEC 12.2
that mean something here, the search column rebuilt on request, and backup deferred to pg_dump (D155)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from hivemem.errors import Unsupported
from hivemem.records import BackupMade, CheckReport, Repair
from hivemem.store.limits import Limits
from hivemem.store.postgres import search
from hivemem.store.postgres.conn import Connection
from hivemem.store.sqlite import integrity
from hivemem.store.sqlite.db import atomic, snapshot
from hivemem.store.sqlite.integrity import Finding, finding
from hivemem.store.sqlite.operations import SQLiteOperations


class Host(Protocol):
    conn: Any
    limits: Limits


def backup_deferred() -> Unsupported:
    return Unsupported("store_backup", "a team store on PostgreSQL is backed up and restored with PostgreSQL's "
                       "own tools, not by hivemem",
                       fix="pg_dump --format=custom --file=FILE URL; restore with pg_restore --dbname=URL FILE "
                           "(docs/decisions.md D155)")  # fmt: skip


def search_missing(conn: Connection) -> list[Finding]:
    rows = conn.run("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active' AND search IS NULL "
                    "ORDER BY id")  # fmt: skip
    return [finding("fts.missing", "live, active memory has no search index row", memory=r[0]) for r in rows]


def search_orphaned(conn: Connection) -> list[Finding]:
    rows = conn.run("SELECT id FROM memories WHERE search IS NOT NULL AND (deleted IS NOT NULL "
                    "OR status != 'active') ORDER BY id")  # fmt: skip
    return [finding("fts.orphaned", "search index row for a memory that is absent, deleted, draft or archived",
                    memory=r[0]) for r in rows]  # fmt: skip


def search_mismatched(conn: Connection) -> list[Finding]:
    """Every indexed row's terms against its text, re-tokenized."""
    found = []
    rows = conn.run("SELECT id, title, content, tags, search::text FROM memories WHERE search IS NOT NULL "
                    "AND deleted IS NULL AND status = 'active' ORDER BY id")  # fmt: skip
    for memory, title, content, tags, stored in rows:
        expected = conn.run("SELECT %s::tsvector::text", (search.document(title, content, tags),))[0][0]
        if expected != stored:
            found.append(finding("fts.mismatched", "the search terms differ from the memory's text", memory=memory))
    return found


def foreign_keys(conn: Connection) -> list[Finding]:
    return []  # PostgreSQL enforces them on every statement; there is nothing to find


def _pg(check: Callable[[Connection], list[Finding]]) -> Callable[[Any], list[Finding]]:
    return lambda conn: check(cast(Connection, conn))


CHECKS: dict[str, Callable[[Any], list[Finding]]] = {
    "fts.missing": _pg(search_missing),
    "fts.orphaned": _pg(search_orphaned),
    "fts.mismatched": _pg(search_mismatched),
    "tags.invalid": integrity.tags_invalid,
    "vectors.length": integrity.vectors_length,
    "events.chain": integrity.events_chain,
}
SEARCH = {name: CHECKS[name] for name in ("fts.missing", "fts.orphaned", "fts.mismatched")}


def run(conn: Connection, checks: dict[str, Callable[[Any], list[Finding]]]) -> list[Finding]:
    """The shared check loop; any failure of a check here (the server's or the adapter's) is its finding."""
    return integrity.run(cast(Any, conn), checks, errors=(Exception,))


class PostgresOperations(SQLiteOperations):
    """Export and import are SQLite's (the same statements, through the adapter); check, repair and backup
    are this backend's own."""

    __slots__ = ()

    def __init__(self, store: Host) -> None:
        self._store = store  # type: ignore[assignment]  # the team store's adapter stands in for APSW's

    @property
    def _conn(self) -> Connection:
        return cast(Connection, self._store.conn)

    def check(self) -> CheckReport:
        with snapshot(self._store.conn):
            return cast(CheckReport, integrity.report(run(self._conn, CHECKS)))

    def repair_fts(self, apply: bool) -> Repair:
        """The search column rebuilt from the rows (nothing to back up: the rows are not touched)."""
        conn = self._conn
        if not apply:
            return cast(Repair, {"applied": False, "findings": run(conn, SEARCH)})
        with atomic(conn):  # type: ignore[arg-type]
            # no other machine changes a memory while the column is rebuilt (reads go on), so no row it skips or
            # indexes is deleted, archived or edited under it (D208)
            conn.run("LOCK TABLE memories IN EXCLUSIVE MODE")
            before = run(conn, SEARCH)
            conn.run("UPDATE memories SET search = NULL WHERE search IS NOT NULL")
            ids = [int(r[0]) for r in conn.run("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active'")]
            for memory in ids:
                search.index(conn, memory)
        return cast(Repair, {"applied": True, "findings": before, "indexed": len(ids)})

    def backup(self, dest: str) -> BackupMade:
        raise backup_deferred()
