"""Read-side listings: memory.list, memory.forget's selection, space.list and store.status."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hivemem.auth import Readable
from hivemem.records import MemoryPage, SpacePage, Status
from hivemem.store.connection import Connection, Value
from hivemem.store.filters import Filter
from hivemem.store.sqlite import vectors
from hivemem.store.sqlite.db import all_rows, one, scalar
from hivemem.store.sqlite.filters import condition
from hivemem.store.sqlite.memories import COLUMNS, item, mid
from hivemem.store.sqlite.schema import VERSION


def list_memories(conn: Connection, flt: Filter, after: int | None, limit: int) -> MemoryPage:
    """Newest first, paged by an exclusive `after` id."""
    where, args = condition(flt, "m")
    if after is not None:
        where += " AND m.id < ?"
        args.append(after)
    rows = all_rows(
        conn, f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY m.id DESC LIMIT ?", (*args, limit + 1)
    )
    page = rows[:limit]
    nxt = mid(page[-1][0]) if len(rows) > limit else None
    return {"memories": [item(r, deleted=flt.include_deleted) for r in page], "next": nxt}


def selection(conn: Connection, flt: Filter, after: int | None = None, limit: int = -1) -> list[tuple[int, int]]:
    """(id, revision) of the newest `limit` matching memories below `after` (all of them by default)."""
    where, args = condition(flt, "m")
    if after is not None:
        where += " AND m.id < ?"
        args.append(after)
    sql = f"SELECT id, revision FROM memories m WHERE {where} ORDER BY id DESC LIMIT ?"
    return [(int(a), int(b)) for a, b in all_rows(conn, sql, (*args, limit))]


def spaces(conn: Connection, flt: Filter, after: str | None, limit: int) -> SpacePage:
    """Readable spaces by name, counting live memories of any status; paged by an exclusive `after` name."""
    where, args = condition(flt, "m")
    if after is not None:
        where += " AND m.space > ?"
        args.append(after)
    rows = all_rows(
        conn,
        f"SELECT space, COUNT(*), MAX(updated) FROM memories m WHERE {where} GROUP BY space ORDER BY space LIMIT ?",
        (*args, limit + 1),
    )
    page = rows[:limit]
    nxt = page[-1][0] if len(rows) > limit else None
    return {"spaces": [{"space": s, "memories": n, "updated": u} for s, n, u in page], "next": nxt}


@dataclass(frozen=True)
class Sessions:
    """Which sessions a caller can read: all, these numbers, or those it reported (docs/security.md)."""

    every: bool
    numbers: frozenset[int]
    reporter: str | None

    def where(self) -> tuple[str, list[Value]]:
        if self.every:
            return "1", []
        clauses: list[str] = ["0"]
        args: list[Value] = []
        if self.reporter is not None:
            clauses.append("principal = ?")
            args.append(self.reporter)
        if self.numbers:
            clauses.append(f"id IN ({','.join('?' * len(self.numbers))})")
            args.extend(sorted(self.numbers))
        return " OR ".join(clauses), args


def status(conn: Connection, sqlite_version: str, readable: Readable, sessions: Sessions,
           path: str | None = None, embeddings: str = "off") -> Status:  # fmt: skip
    """Versions and counts of the rows `readable` and `sessions` cover; with `path`, also the path and size.
    `embeddings` is the provider in force; with one, `pending` counts the live active memories it has yet to
    embed (docs/schema.md)."""
    where, args = condition(Filter(readable=readable, status=None, include_deleted=True), "m")
    counts = one(
        conn,
        "SELECT COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'active'), "
        "COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'draft'), "
        "COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'archived'), "
        f"COUNT(*) FILTER (WHERE deleted IS NOT NULL) FROM memories m WHERE {where}",
        args,
    ) or (0, 0, 0, 0)
    seen, seen_args = sessions.where()
    out: Status = {
        "schema_version": VERSION,
        "sqlite_version": sqlite_version,
        "memories": counts[0],
        "drafts": counts[1],
        "archived": counts[2],
        "deleted": counts[3],
        "versions": _count_of_memories(conn, "memory_versions", where, args),
        "sessions": scalar(conn, f"SELECT COUNT(*) FROM sessions WHERE {seen}", seen_args),
        "vectors": _count_of_memories(conn, "memory_vectors", where, args),
        "pending": 0 if embeddings == "off" else vectors.pending_count(conn, where, args),
        "embeddings": embeddings,
    }
    if path is None:
        return out
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return {"path": path, "schema_version": VERSION, "sqlite_version": sqlite_version, "bytes": size, **out}


def _count_of_memories(conn: Connection, table: str, where: str, args: list[Value]) -> int:
    """Rows of `table` (keyed by `memory`) whose memory matches `where`; a plain count when that is every row."""
    if where == "1":
        return int(scalar(conn, f"SELECT COUNT(*) FROM {table}"))
    sql = f"SELECT COUNT(*) FROM {table} v JOIN memories m ON m.id = v.memory WHERE {where}"
    return int(scalar(conn, sql, args))
