"""Read-side listings: memory.list, memory.forget's selection, space.list and store.status."""

from __future__ import annotations

import os
from typing import Any

import apsw

from hivemem.store.db import Row, all_rows, one, scalar
from hivemem.store.filters import Filter
from hivemem.store.memories import COLUMNS, cut, mid, shape
from hivemem.store.schema import VERSION


def item(row: Row, *, deleted: bool = False) -> dict[str, Any]:
    """A list item: the memory without content, plus a 240-byte snippet."""
    out = shape(row, content=False, deleted=deleted)
    out["snippet"] = cut(row[4])
    return out


def rows_by_id(conn: apsw.Connection, ids: list[int]) -> dict[int, Row]:
    if not ids:
        return {}
    rows = all_rows(conn, f"SELECT {COLUMNS} FROM memories WHERE id IN ({','.join('?' * len(ids))})", ids)
    return {int(r[0]): r for r in rows}


def list_memories(conn: apsw.Connection, flt: Filter, after: int | None, limit: int) -> dict[str, Any]:
    """Newest first, paged by an exclusive `after` id."""
    where, args = flt.where("m")
    if after is not None:
        where += " AND m.id < ?"
        args.append(after)
    rows = all_rows(
        conn, f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY m.id DESC LIMIT ?", (*args, limit + 1)
    )
    page = rows[:limit]
    nxt = mid(page[-1][0]) if len(rows) > limit else None
    return {"memories": [item(r, deleted=flt.include_deleted) for r in page], "next": nxt}


def selection(conn: apsw.Connection, flt: Filter) -> list[tuple[int, int]]:
    """(id, revision) of every matching memory, newest first."""
    where, args = flt.where("m")
    return [
        (int(a), int(b))
        for a, b in all_rows(conn, f"SELECT id, revision FROM memories m WHERE {where} ORDER BY id DESC", args)
    ]


def spaces(conn: apsw.Connection, flt: Filter) -> dict[str, Any]:
    """Readable spaces by name, counting live memories of any status."""
    where, args = flt.where("m")
    rows = all_rows(
        conn, f"SELECT space, COUNT(*), MAX(updated) FROM memories m WHERE {where} GROUP BY space ORDER BY space", args
    )
    return {"spaces": [{"space": s, "memories": n, "updated": u} for s, n, u in rows]}


def status(conn: apsw.Connection, path: str, sqlite_version: str) -> dict[str, Any]:
    """Path, versions, size and counts of the store."""
    counts = one(
        conn,
        "SELECT COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'active'), "
        "COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'draft'), "
        "COUNT(*) FILTER (WHERE deleted IS NULL AND status = 'archived'), "
        "COUNT(*) FILTER (WHERE deleted IS NOT NULL) FROM memories",
    ) or (0, 0, 0, 0)
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    return {
        "path": path,
        "schema_version": VERSION,
        "sqlite_version": sqlite_version,
        "bytes": size,
        "memories": counts[0],
        "drafts": counts[1],
        "archived": counts[2],
        "deleted": counts[3],
        "versions": scalar(conn, "SELECT COUNT(*) FROM memory_versions"),
        "sessions": scalar(conn, "SELECT COUNT(*) FROM sessions"),
        "vectors": scalar(conn, "SELECT COUNT(*) FROM memory_vectors"),
        "pending": 0,
        "embeddings": "off",
    }
