"""Connections with the settings of SPEC 5.1, and atomic() for one BEGIN IMMEDIATE per change."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import apsw

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store import fts5

BUSY_TIMEOUT_MS = 5000
REQUIRED = {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "secure_delete": 1, "busy_timeout": 5000}
Row = tuple[Any, ...]


def connect(path: str, *, readonly: bool = False, page_size: int | None = None) -> apsw.Connection:
    """Open `path` with WAL, synchronous=FULL, foreign keys, secure delete and a busy timeout."""
    flags = apsw.SQLITE_OPEN_NOFOLLOW
    flags |= apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    try:
        conn = apsw.Connection(path, flags=flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        fts5.prepare(conn)  # memory_fts cannot be read or written without the tokenizer
        if page_size is not None:  # only a new, empty file takes it; it must come before WAL
            conn.execute(f"PRAGMA page_size = {int(page_size)}")
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
        conn.execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON")
        _check_settings(conn)
    except apsw.Error as exc:
        raise translate(exc) from None
    return conn


def _check_settings(conn: apsw.Connection) -> None:
    for name, want in REQUIRED.items():
        got = conn.execute(f"PRAGMA {name}").fetchall()[0][0]
        if got != want:
            raise Failed("store", f"connection setting {name} is {got!r}, expected {want!r}", setting=name)


def translate(exc: BaseException) -> HivememError:
    """Map a SQLite error to the wire error tree."""
    if isinstance(exc, HivememError):
        return exc
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return Unavailable("store_busy", "the store is busy; another writer holds it", fix="retry")
    return Failed("store", f"store error: {exc}")


def all_rows(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> list[Row]:
    """Run a query to completion (so no read transaction is left open)."""
    return conn.execute(sql, args).fetchall()


def one(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> Row | None:
    """The first row of a query, run to completion."""
    rows = conn.execute(sql, args).fetchall()
    return rows[0] if rows else None


def scalar(conn: apsw.Connection, sql: str, args: Sequence[Any] = ()) -> Any:
    row = one(conn, sql, args)
    return row[0] if row else None


@contextmanager
def atomic(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """One BEGIN IMMEDIATE transaction: commit on success, roll back on any error."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except apsw.Error as exc:
        raise translate(exc) from None
    try:
        yield conn
    except BaseException as exc:
        conn.execute("ROLLBACK")
        if isinstance(exc, apsw.Error):
            raise translate(exc) from None
        raise
    try:
        conn.execute("COMMIT")
    except apsw.Error as exc:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise translate(exc) from None


@contextmanager
def snapshot(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """One read transaction around several statements (a no-op inside a transaction already open)."""
    if not conn.getautocommit():
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


def now() -> str:
    """RFC 3339 UTC with milliseconds: `2026-11-09T10:00:00.000Z`."""
    return format_time(datetime.now(UTC))


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
