"""`memory_vectors` (docs/schema.md, docs/embeddings.md): pending memories, storing, dropping and reading vectors.

Vectors are derived: little-endian f32, unit length, with the model that made them. A vector is stored only
if the memory still has the title and content it was made from, so a change racing the worker never keeps
a stale vector.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from hivemem.store.connection import Args, Connection, Lock, Value
from hivemem.store.filters import Filter
from hivemem.store.sqlite.db import all_rows, atomic, scalar
from hivemem.store.sqlite.filters import condition

LIVE = "m.deleted IS NULL AND m.status = 'active'"


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


def pending(conn: Connection, limit: int, skip: Iterable[int] = ()) -> list[tuple[int, str, str, bytes]]:
    """Up to `limit` live, active memories without a vector, oldest first: (id, title, content, content_sha256)."""
    skipped = sorted(skip)
    clause = f" AND m.id NOT IN ({','.join('?' * len(skipped))})" if skipped else ""
    rows = all_rows(
        conn,
        f"SELECT m.id, m.title, m.content, m.content_sha256 FROM memories m WHERE {LIVE}{clause} "
        "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory = m.id) ORDER BY m.id LIMIT ?",
        (*skipped, limit),
    )
    return [(int(r[0]), str(r[1]), str(r[2]), bytes(r[3])) for r in rows]


def put(conn: Connection, model: str, items: Sequence[tuple[int, str, bytes, Sequence[float]]]) -> list[int]:
    """Store (memory, title, content_sha256, unit vector) rows in one transaction; returns the ids stored
    (a memory deleted, archived or changed since it was read is skipped)."""
    stored = []
    with atomic(conn):
        for memory, title, digest, vector in items:
            conn.locked(  # an edit of the memory under way is waited for: its stale vector is then skipped
                Lock.SHARE,
                "INSERT OR REPLACE INTO memory_vectors(memory, model, embedding) SELECT id, ?, ? FROM memories "
                "WHERE id = ? AND title = ? AND content_sha256 = ? AND deleted IS NULL",
                (model, pack(vector), memory, title, digest),
            )
            if conn.changes():
                stored.append(memory)
    return stored


def has(conn: Connection, memory: int, model: str) -> bool:
    return scalar(conn, "SELECT 1 FROM memory_vectors WHERE memory = ? AND model = ?", (memory, model)) is not None


def drop(conn: Connection, memory: int) -> None:
    """Forget a memory's vector (its title or content changed); the caller holds the transaction."""
    conn.execute("DELETE FROM memory_vectors WHERE memory = ?", (memory,))


def drop_other_models(conn: Connection, model: str) -> int:
    """Delete vectors of any model but `model` (their memories become pending); returns how many."""
    with atomic(conn):
        conn.execute("DELETE FROM memory_vectors WHERE model != ?", (model,))
        return conn.changes()


def drop_all(conn: Connection) -> int:
    with atomic(conn):
        conn.execute("DELETE FROM memory_vectors")
        return conn.changes()


def width(conn: Connection, model: str) -> int:
    """The length of `model`'s stored vectors (0 when it has none)."""
    return int(scalar(conn, "SELECT length(embedding) / 4 FROM memory_vectors WHERE model = ? LIMIT 1", (model,)) or 0)


def load(conn: Connection, model: str, memories: Sequence[int] | None = None) -> list[tuple[int, str, bytes]]:
    """(memory, space, embedding) of `model`'s vectors of live memories, all or only `memories`."""
    sql = (
        "SELECT v.memory, m.space, v.embedding FROM memory_vectors v JOIN memories m ON m.id = v.memory "
        "WHERE v.model = ?"
    )
    args: list[Value] = [model]
    if memories is not None:
        if not memories:
            return []
        sql += f" AND v.memory IN ({','.join('?' * len(memories))})"
        args.extend(memories)
    return [(int(r[0]), str(r[1]), bytes(r[2])) for r in all_rows(conn, sql, args)]


def page(conn: Connection, model: str, after: int, limit: int) -> list[tuple[int, str, bytes]]:
    """Up to `limit` (memory, space, embedding) of `model`'s vectors, of memories above `after`, by memory: the
    index loads a large store a page at a time, never holding every blob at once."""
    sql = (
        "SELECT v.memory, m.space, v.embedding FROM memory_vectors v JOIN memories m ON m.id = v.memory "
        "WHERE v.model = ? AND v.memory > ? ORDER BY v.memory LIMIT ?"
    )
    return [(int(r[0]), str(r[1]), bytes(r[2])) for r in all_rows(conn, sql, (model, after, limit))]


def model_count(conn: Connection, model: str) -> int:
    return int(scalar(conn, "SELECT COUNT(*) FROM memory_vectors WHERE model = ?", (model,)) or 0)


def admitted(conn: Connection, model: str, ids: Sequence[int], flt: Filter) -> dict[int, bytes]:
    """Of `ids`, those the filter admits that still hold a vector of `model`, with that vector (the vector
    list rescores its candidates with it exactly)."""
    if not ids:
        return {}
    where, args = condition(flt, "m")
    marks = ",".join("?" * len(ids))
    rows = all_rows(
        conn,
        f"SELECT m.id, v.embedding FROM memories m JOIN memory_vectors v ON v.memory = m.id "
        f"WHERE m.id IN ({marks}) AND {where} AND v.model = ?",
        (*ids, *args, model),
    )
    return {int(r[0]): bytes(r[1]) for r in rows}


def pending_count(conn: Connection, where: str = "1", args: Args = ()) -> int:
    """Live, active memories without a vector among those `where` (over alias `m`) admits."""
    sql = (
        f"SELECT COUNT(*) FROM memories m WHERE {LIVE} AND ({where}) "
        "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory = m.id)"
    )
    return int(scalar(conn, sql, args) or 0)


def count(conn: Connection) -> int:
    return int(scalar(conn, "SELECT COUNT(*) FROM memory_vectors") or 0)


def oldest_pending(conn: Connection) -> str | None:
    """The `updated` stamp of the longest-waiting pending memory, if any."""
    value = scalar(
        conn,
        f"SELECT MIN(m.updated) FROM memories m WHERE {LIVE} "
        "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory = m.id)",
    )
    return None if value is None else str(value)
