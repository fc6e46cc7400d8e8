"""A PostgreSQL connection behind the small connection surface the store's statement modules use.

The statement modules of `store/sqlite/` that hold only portable SQL (memories, sessions, clients, audit,
governance, listing, vectors: D150) run unchanged over this adapter. It binds every value as a server-side
parameter (`?` becomes `$n` through psycopg; memory text is never inlined), rewrites the few SQLite spellings
PostgreSQL does not share, routes the search index's statements to `postgres/search.py`, turns a verb's
`BEGIN IMMEDIATE` into a transaction that first takes the store's advisory write lock, and maps database
errors onto the wire's error tree.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from hivemem.errors import Failed, HivememError, Unavailable

WRITE_LOCK = 0x48564D4D  # "HVMM": the store-wide advisory lock every writing verb holds until it commits
NOTIFY_CHANNEL = "hivemem_events"
Row = tuple[Any, ...]
Special = Callable[["Connection", Sequence[Any]], list[Row]]

# Statements written for SQLite, as the statement modules spell them, and their PostgreSQL form.
EXACT: dict[str, str] = {
    "SELECT seq FROM sqlite_sequence WHERE name = 'events'": "SELECT COALESCE(max(id), 0) FROM events",
    "PRAGMA user_version": "SELECT 2",
}
PIECES: tuple[tuple[str, str], ...] = (
    ("length(CAST(CASE WHEN v.content = '' THEN m.content ELSE v.content END AS BLOB))",
     "octet_length(CASE WHEN v.content = '' THEN m.content ELSE v.content END)"),
    ("INSERT OR IGNORE INTO", "INSERT INTO"),
    ("INSERT OR REPLACE INTO memory_vectors", "INSERT INTO memory_vectors"),
)  # fmt: skip
SUFFIXES: tuple[tuple[str, str], ...] = (
    ("INSERT OR IGNORE INTO", " ON CONFLICT DO NOTHING"),
    ("INSERT OR REPLACE INTO memory_vectors",
     " ON CONFLICT (memory) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding"),
)  # fmt: skip
RETURNING = re.compile(r"^\s*INSERT INTO (memories|sessions)\(")
# A bare 1 or 0 standing for true or false (SQLite's booleans), as a whole condition.
BOOLEAN = re.compile(r"(\bWHERE |\bAND |\bOR |\()([01])(?=\s*(?:$|\)|AND\b|OR\b|ORDER\b|GROUP\b|LIMIT\b))")
SPECIALS: dict[str, Special] = {}  # statements answered in Python (the search index), filled by postgres/search


def translate_sql(sql: str, bound: bool = True) -> str:
    """The PostgreSQL spelling of a statement written for SQLite, with `?` as psycopg's `%s`."""
    if sql in EXACT:
        return EXACT[sql]
    suffix = "".join(tail for marker, tail in SUFFIXES if marker in sql)
    for old, new in PIECES:
        if old in sql:
            sql = sql.replace(old, new)
    if sql.startswith("SELECT count(*) FROM (SELECT") and sql.endswith(")"):
        sql += " AS counted"  # PostgreSQL before 16 names every subquery in FROM
    sql = BOOLEAN.sub(lambda m: m.group(1) + ("true" if m.group(2) == "1" else "false"), sql)
    return (_placeholders(sql) if bound else sql) + suffix


def _placeholders(sql: str) -> str:
    """`?` outside quoted literals becomes `%s`; a literal `%` is doubled."""
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            out.append(ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


class Cursor:
    """The rows of one statement, fetched whole (as the statement modules read them)."""

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    def fetchall(self) -> list[Row]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Row]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._rows = []


class Connection:
    """One psycopg connection in autocommit mode; transactions are the statements the callers send."""

    identity: tuple[int, int] | None = None
    filename = ""

    def __init__(self, url: str, *, readonly: bool = False, timeout_ms: int = 0) -> None:
        self.url = url
        self.readonly = readonly
        self.timeout_ms = timeout_ms
        self._last_id = 0
        self._changes = 0
        self._in_transaction = False  # between this adapter's BEGIN and its COMMIT or ROLLBACK
        self.pg = self._open()

    def _open(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10, application_name="hivemem")
        except psycopg.Error as exc:
            raise unreachable(exc) from None
        if self.timeout_ms:
            conn.execute(f"SET statement_timeout = {int(self.timeout_ms)}")
        return conn

    def _ready(self) -> None:
        """Reconnect a connection the server dropped, between transactions only: a transaction whose
        connection was lost is over, and its remaining statements must fail rather than run alone."""
        if not self._in_transaction and (self.pg.closed or self.pg.info.status != psycopg.pq.ConnStatus.OK):
            with contextlib.suppress(psycopg.Error):
                self.pg.close()
            self.pg = self._open()

    def _lost(self) -> bool:
        return bool(self.pg.closed) or self.pg.info.status != psycopg.pq.ConnStatus.OK

    def getautocommit(self) -> bool:
        return not self._in_transaction

    def last_insert_rowid(self) -> int:
        return self._last_id

    def changes(self) -> int:
        return self._changes

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Cursor:
        special = SPECIALS.get(sql)
        if special is not None:
            return Cursor(special(self, args))
        if sql == "BEGIN IMMEDIATE":
            return self._begin(write=True)
        if sql == "BEGIN":
            return self._begin(write=False)
        if sql in ("COMMIT", "ROLLBACK"):
            try:
                self.run(sql)
            finally:
                self._in_transaction = False
            return Cursor([])
        text = translate_sql(sql, bool(args))
        if RETURNING.match(text):
            text += " RETURNING id"
        rows = self.run(text, args)
        if RETURNING.match(text) and rows:
            self._last_id = int(rows[0][0])
        return Cursor(rows)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        for args in seq:
            self.execute(sql, args)

    def run(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """A PostgreSQL statement, its parameters bound by the server; errors as the wire's."""
        self._ready()
        try:
            try:
                cur = self.pg.execute(sql, tuple(args) if args else None)
            except psycopg.OperationalError:
                if self._in_transaction or not self._lost():
                    raise
                self._ready()  # the server dropped an idle connection: once more on a new one
                cur = self.pg.execute(sql, tuple(args) if args else None)
        except psycopg.Error as exc:
            raise failure(exc, self) from None
        self._changes = max(cur.rowcount, 0)
        return cur.fetchall() if cur.description is not None else []

    def _begin(self, *, write: bool) -> Cursor:
        self._ready()
        self.run("BEGIN")
        self._in_transaction = True
        if write:
            self.run("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            self.run(f"NOTIFY {NOTIFY_CHANNEL}")  # delivered at commit only: followers on every machine wake
        else:
            self.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        return Cursor([])

    def close(self) -> None:
        self.pg.close()


def unreachable(exc: BaseException) -> Unavailable:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return Unavailable("store_busy", f"the PostgreSQL store cannot be reached: {first}",
                       fix="check that the server at store.url answers, then retry")  # fmt: skip


def failure(exc: psycopg.Error, conn: Connection) -> HivememError:
    """A database error as the wire's: a lost server or a lock wait is `unavailable.store_busy` (retry), a
    statement timeout says so, anything else is `failed.store`."""
    lost = conn.pg.closed or conn.pg.info.status != psycopg.pq.ConnStatus.OK
    if lost or isinstance(exc, pg_errors.AdminShutdown | pg_errors.CannotConnectNow | pg_errors.ConnectionFailure):
        return unreachable(exc)
    if isinstance(exc, pg_errors.QueryCanceled):
        return Unavailable("store_busy", "a statement ran past the store's statement timeout; nothing was written",
                           fix="retry; a query that always times out needs a narrower filter")  # fmt: skip
    if isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected | pg_errors.LockNotAvailable):
        return Unavailable("store_busy", "the store is busy; another writer holds it", fix="retry")
    if isinstance(exc, pg_errors.DiskFull):
        return Failed("disk_full", "the disk holding the store is full; this change was not written",
                      fix="free space on the database server")  # fmt: skip
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction | pg_errors.InsufficientPrivilege):
        return Unavailable("read_only", f"the store refused a write: {exc}",
                           fix="grant the role the rights docs/decisions.md lists (D157)")  # fmt: skip
    return Failed("store", f"store error: {str(exc).strip().splitlines()[0]}")
