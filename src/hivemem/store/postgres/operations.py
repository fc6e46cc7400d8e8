"""The Operations repository of the PostgreSQL store: export and import through the portable statements
(sqlite/transfer.py, as on SQLite), the checks of docs/operations.md that mean something here, the search column
rebuilt on request, and backup deferred to pg_dump (D155)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from hivemem.auth import Principal
from hivemem.errors import Unsupported
from hivemem.records import BackupMade, CheckReport, Exported, Finding, Imported, Repair
from hivemem.store.base import Visible
from hivemem.store.limits import Limits
from hivemem.store.postgres import roles, search
from hivemem.store.postgres.conn import Connection
from hivemem.store.sqlite import integrity, transfer
from hivemem.store.sqlite.db import atomic, snapshot
from hivemem.store.sqlite.integrity import finding
from hivemem.store.transfer_check import Document


class Host(Protocol):
    """What these operations need of the team store (named here, not imported: the store imports this)."""

    @property
    def conn(self) -> Connection: ...
    @property
    def limits(self) -> Limits: ...


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


def role_rights(conn: Connection) -> list[Finding]:
    """The runtime role `store init --runtime-role` recorded holds no more than the verbs need (D250); a store
    with no recorded role has nothing to compare (doctor's `store.role_rights` says so)."""
    role = roles.recorded(conn)
    if role is None:
        return []
    return [finding("store.role_rights", detail) for detail in roles.excess(conn, role)]


def foreign_keys(conn: Connection) -> list[Finding]:
    return []  # PostgreSQL enforces them on every statement; there is nothing to find


CHECKS: dict[str, Callable[[Connection], list[Finding]]] = {
    "fts.missing": search_missing,
    "fts.orphaned": search_orphaned,
    "fts.mismatched": search_mismatched,
    "tags.invalid": integrity.tags_invalid,
    "vectors.length": integrity.vectors_length,
    "events.chain": integrity.events_chain,
    "store.role_rights": role_rights,
}
SEARCH = {name: CHECKS[name] for name in ("fts.missing", "fts.orphaned", "fts.mismatched")}


def run(conn: Connection, checks: dict[str, Callable[[Connection], list[Finding]]]) -> list[Finding]:
    """The shared check loop; any failure of a check here (the server's or the adapter's) is its finding."""
    return integrity.run(conn, checks, errors=(Exception,))


class PostgresOperations:
    """Export and import run the portable statements, as on SQLite; check, repair and backup are this backend's
    own."""

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
        conn = self._store.conn
        with snapshot(conn):
            return integrity.report(run(conn, CHECKS))

    def repair_fts(self, apply: bool) -> Repair:
        """The search column rebuilt from the rows (nothing to back up: the rows are not touched)."""
        conn = self._store.conn
        if not apply:
            return {"applied": False, "findings": run(conn, SEARCH)}
        with atomic(conn):
            # no other machine changes a memory while the column is rebuilt (reads go on), so no row it skips or
            # indexes is deleted, archived or edited under it (D208)
            conn.run("SELECT hivemem_lock_memories()")  # EXCLUSIVE, by the runtime role too (postgres/roles.py)
            before = run(conn, SEARCH)
            conn.run("UPDATE memories SET search = NULL WHERE search IS NOT NULL")
            ids = [int(r[0]) for r in conn.run("SELECT id FROM memories WHERE deleted IS NULL AND status = 'active'")]
            for memory in ids:
                search.index(conn, memory)
        return {"applied": True, "findings": before, "indexed": len(ids)}

    def backup(self, dest: str) -> BackupMade:
        raise backup_deferred()
