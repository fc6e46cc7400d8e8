"""The Operations repository of the PostgreSQL store: export and import as on SQLite, the checks of SPEC 12.2
that mean something here, the search column rebuilt on request, and backup deferred to pg_dump (D155)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from hivemem.auth import Principal
from hivemem.errors import Unsupported
from hivemem.records import BackupMade, CheckReport, Exported, Imported, Repair
from hivemem.store.limits import Limits
from hivemem.store.postgres import search
from hivemem.store.postgres.conn import Connection
from hivemem.store.sqlite import integrity, transfer
from hivemem.store.sqlite.db import atomic, snapshot
from hivemem.store.sqlite.integrity import Finding, finding
from hivemem.store.transfer_check import Document


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
    found: list[Finding] = []
    for name, check in checks.items():
        try:
            found += check(conn)
        except Exception as exc:
            found.append(finding(name, f"could not run: {exc}"))
    return found


class PostgresOperations:
    __slots__ = ("_store",)

    def __init__(self, store: Host) -> None:
        self._store = store

    def export(self, actor: Principal, dest: str, keep: Callable[[str, int], bool], spaces: list[str] | None,
               include_deleted: bool, every_session: bool) -> Exported:  # fmt: skip
        result = transfer.export(self._store.conn, actor, dest, keep, spaces, include_deleted, every_session)
        return cast(Exported, result)

    def import_document(self, actor: Principal, doc: Document, dry_run: bool) -> Imported:
        if dry_run:
            return cast(Imported, transfer.dry_run(self._store.conn, doc))
        return cast(Imported, transfer.apply(self._store.conn, self._store.limits, actor, doc))

    def check(self) -> CheckReport:
        with snapshot(self._store.conn):
            return cast(CheckReport, integrity.report(run(self._store.conn, CHECKS)))

    def repair_fts(self, apply: bool) -> Repair:
        """The search column rebuilt from the rows (nothing to back up: the rows are not touched)."""
        conn: Connection = self._store.conn
        if not apply:
            return cast(Repair, {"applied": False, "findings": run(conn, SEARCH)})
        with atomic(conn):  # type: ignore[arg-type]
            before = run(conn, SEARCH)
            conn.run("UPDATE memories SET search = NULL WHERE search IS NOT NULL")
            ids = [int(r[0]) for r in conn.run("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active'")]
            for memory in ids:
                search.index(conn, memory)
        return cast(Repair, {"applied": True, "findings": before, "indexed": len(ids)})

    def backup(self, dest: str) -> BackupMade:
        raise backup_deferred()
