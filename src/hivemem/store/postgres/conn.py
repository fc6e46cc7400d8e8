"""A PostgreSQL connection behind the small connection surface the store's statement modules use.

The statement modules of `store/sqlite/` that hold only portable SQL (memories, sessions, clients, audit,
governance, listing, vectors: D150) run unchanged over this adapter. It binds every value as a server-side
parameter (`?` becomes `$n` through psycopg; memory text is never inlined), rewrites the few SQLite spellings
PostgreSQL does not share, routes the search index's statements to `postgres/search.py`, and maps database
errors onto the wire's error tree.

A verb's `BEGIN IMMEDIATE` is a plain READ COMMITTED transaction, so writers on several machines run at once
(docs/decisions.md D152, D208): the rows a verb reads and then writes are locked as it reads them (`LOCKING`),
a new memory's row is inserted `ON CONFLICT DO NOTHING` on the live (space, content hash) index, and only the
event chain's append is serialized, under a transaction-scoped advisory lock taken just before the verb's
first event and held to its commit. A race the database settles against a verb (a duplicate another machine
committed first, a deadlock) is `Retry`: the store runs the verb's change again (postgres/store.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store.sqlite import memories, sessions

WRITE_LOCK = 0x48564D4D  # "HVMM": the event chain's advisory lock, held from a verb's first event to its commit
KEYED_LOCK = 0x48564D4B  # "HVMK": advisory locks on one value a verb looks up before it inserts (two-key form)
NOTIFY_CHANNEL = "hivemem_events"
Row = tuple[Any, ...]
Special = Callable[["Connection", Sequence[Any]], list[Row]]

# Statements written for SQLite, as the statement modules spell them, and their PostgreSQL form.
EXACT: dict[str, str] = {
    "SELECT seq FROM sqlite_sequence WHERE name = 'events'": "SELECT COALESCE(max(id), 0) FROM events",
    "PRAGMA user_version": "SELECT 2",
    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0), "
    "coalesce((SELECT max(id) FROM memories), 0))": "SELECT GREATEST(COALESCE((SELECT max(id) FROM memories), 0), "
    "(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM memories_id_seq))",
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

# Inside a write transaction: reads whose rows the verb goes on to write (or relies on), locked as they are read,
# so two machines' verbs on one row take turns and compare-and-swap is decided on the row as committed.
LOCKING: dict[str, str] = {
    f"SELECT {memories.COLUMNS} FROM memories WHERE id = ?": " FOR UPDATE",
    "SELECT space, revision FROM memories WHERE id = ?": " FOR UPDATE",
    "SELECT status FROM memories WHERE id = ? AND deleted IS NULL": " FOR SHARE",
    f"SELECT {sessions.COLUMNS} FROM sessions WHERE id = ?": " FOR UPDATE",
    "SELECT principal FROM clients WHERE name = ?": " FOR UPDATE",
}
# Lookups of a value not yet in any row, then an insert: an advisory lock on the value (hashed with the
# statement's arguments at these places) makes two machines' lookups of one value take turns.
KEYED: dict[str, tuple[int, ...]] = {
    "SELECT id FROM sessions WHERE harness = ? AND harness_session = ?": (0, 1),
    "SELECT id FROM memories WHERE space = ? AND substr(capture_key, 1, 32) = ? AND capture_key = ? "
    "AND deleted IS NULL ORDER BY id LIMIT 1": (0, 2),
}
# A verb that keeps the store-wide lock (the chain's), taken at its first statement: a client's name and number
# (`meta`'s counter). An import plans duplicates and numbers its memories with the memories table held against
# other writers (reads go on), from its first statement on.
STORE_WIDE = {"SELECT 1 FROM clients WHERE name = ?"}
IMPORTING = {
    "SELECT ?1, ?2, (SELECT id FROM memories WHERE space = ?1 AND content_sha256 = ?2 AND deleted IS NULL)",
    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0), "
    "coalesce((SELECT max(id) FROM memories), 0))",
}
EXPORTING = "SELECT count(*) FROM memories"  # an export's first read: the document is one consistent state
CHAIN_END = "SELECT chain FROM events ORDER BY id DESC LIMIT 1"
EVENTS_SEQ = "SELECT seq FROM sqlite_sequence WHERE name = 'events'"
NEW_MEMORY = "INSERT INTO memories(space,"
NEW_TITLE, NEW_CONTENT, NEW_TAGS, NEW_STATUS = 2, 3, 6, 7  # in memories.insert's column list
# The search terms of a memory's title, content and tags (postgres/search.py's `document`, set there).
DOCUMENT: Callable[[str, str, str], str] | None = None
VECTOR_PUT = ("INSERT OR REPLACE INTO memory_vectors(memory, model, embedding) SELECT id, ?, ? FROM memories "
              "WHERE id = ? AND title = ? AND content_sha256 = ? AND deleted IS NULL")  # fmt: skip
LIVE_CONTENT = "memories_live_content"


class Retry(Unavailable):
    """A race the database settled against this verb's change, which was rolled back: another machine committed
    the same content first, or a deadlock chose it. Running the change again gives the answer SQLite's single
    writer would have (`changed: false`, `conflict.memory_duplicate`); if it escapes, it is `store_busy`."""

    def __init__(self, message: str) -> None:
        super().__init__("store_busy", message, fix="retry")


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
        self._writing = False  # the open transaction is a verb's (BEGIN IMMEDIATE)
        self._chained = False  # it holds the event chain's lock
        self._tables = ""  # the table lock it holds for an import or an export, if any
        self._event_id: int | None = None  # the chain's last id, read with its last link, for the next event
        self.indexed: int | None = None  # the memory the last statement inserted with its search terms (D211)
        self._release = False  # a savepoint's RELEASE not sent yet (a round trip, under the chain's lock)
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
            return self._end(sql)
        if sql == "RELEASE hivemem" and self._in_transaction:
            self._release = True  # sent before the next statement; a COMMIT or ROLLBACK next makes it moot
            return Cursor([])
        if self._writing:
            written = self._locked(sql, args)
            if written is not None:
                return written
        self.indexed = None
        text, args, searched = self._with_terms(sql, self._statement(sql, bool(args)), args)
        rows = self.run(text, args)
        if RETURNING.match(text):
            if not rows:
                raise Retry("another machine committed this content in this space first")
            self._last_id = int(rows[0][0])
            self.indexed = self._last_id if searched else None
        return Cursor(rows)

    def _with_terms(self, sql: str, text: str, args: Sequence[Any]) -> tuple[str, Sequence[Any], bool]:
        """A new live, active memory's INSERT with its search terms in the row (D211): the index's statement that
        follows it then has nothing left to read or write."""
        if DOCUMENT is None or not self._writing or not sql.startswith(NEW_MEMORY) or args[NEW_STATUS] != "active":
            return text, args, False
        text = text.replace(") VALUES (", ", search) VALUES (", 1)
        text = text.replace(") ON CONFLICT", ", %s::tsvector) ON CONFLICT", 1)
        return text, (*args, DOCUMENT(args[NEW_TITLE], args[NEW_CONTENT], args[NEW_TAGS])), True

    def _statement(self, sql: str, bound: bool) -> str:
        """The PostgreSQL text of a statement, with what a verb's transaction adds to it."""
        text = translate_sql(sql, bound)
        if RETURNING.match(text):
            if self._writing and sql.startswith(NEW_MEMORY):  # two machines adding one text: one row
                text += " ON CONFLICT (space, content_sha256) WHERE deleted IS NULL DO NOTHING"
            return text + " RETURNING id"
        if self._writing and sql in LOCKING:
            return text + LOCKING[sql]
        if self._writing and sql == VECTOR_PUT:  # a change to the text under way elsewhere is waited for
            return text.replace(" ON CONFLICT", " FOR SHARE ON CONFLICT", 1)
        return text

    def _end(self, how: str) -> Cursor:
        try:
            self.run(how)
        finally:
            self._in_transaction = self._writing = self._chained = self._release = False
            self._tables, self._event_id = "", None
        return Cursor([])

    def _locked(self, sql: str, args: Sequence[Any]) -> Cursor | None:
        """The locks a statement of a verb's transaction needs before it runs; a Cursor when the statement
        is answered here (the chain's end, read with the chain's lock held)."""
        if sql == CHAIN_END:
            self.chain_lock()
            rows = self.run("SELECT chain, id FROM events ORDER BY id DESC LIMIT 1")
            self._event_id = int(rows[0][1]) if rows else 0
            return Cursor([(rows[0][0],)] if rows else [])
        if sql == EVENTS_SEQ and self._event_id is not None:
            event_id, self._event_id = self._event_id, None
            return Cursor([(event_id,)])
        if sql.startswith("ROLLBACK TO"):  # locks taken since the savepoint may be released with it
            self._chained, self._tables, self._event_id = False, "", None
        elif sql in KEYED:
            self.run("SELECT pg_advisory_xact_lock(%s, %s)", (KEYED_LOCK, keyed(sql, [args[i] for i in KEYED[sql]])))
        elif sql in STORE_WIDE:
            self.chain_lock()
        elif sql in IMPORTING:
            self._lock_tables("memories", "EXCLUSIVE")  # no other machine writes or locks a row while ids are planned
        elif sql.startswith(EXPORTING):
            self._lock_tables("memories, memory_relations, sessions", "SHARE")
        return None

    def chain_lock(self) -> None:
        """Take the event chain's lock (once per transaction, held to its end), and announce the commit to
        every machine's followers: NOTIFY is delivered when the transaction commits, and only then."""
        if not self._chained:
            self.run("SELECT pg_advisory_xact_lock(%s), pg_notify(%s, '')", (WRITE_LOCK, NOTIFY_CHANNEL))
            self._chained = True

    def _lock_tables(self, tables: str, mode: str) -> None:
        if not self._tables:
            self.run(f"LOCK TABLE {tables} IN {mode} MODE")
            self._tables = tables

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Cursor:
        rows: list[Row] = []
        for args in seq:
            rows += self.execute(sql, args).fetchall()
        if sql.startswith("INSERT INTO memories(id,"):  # ids given: the sequence moves past them
            self.run("SELECT setval(pg_get_serial_sequence('memories', 'id'), (SELECT max(id) FROM memories))")
        return Cursor(rows)

    def run(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        """A PostgreSQL statement, its parameters bound by the server; errors as the wire's."""
        if self._release and sql not in ("COMMIT", "ROLLBACK"):
            self._release = False
            self.run("RELEASE hivemem")
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
        self.run("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._in_transaction, self._writing = True, write
        return Cursor([])

    def close(self) -> None:
        self.pg.close()


def keyed(sql: str, values: Sequence[Any]) -> int:
    """The second half of a KEYED lock's key: 32 bits of SHA-256 of the statement and the values it looks up
    (two values sharing a key only wait for each other)."""
    text = "\0".join([sql, *(v.hex() if isinstance(v, bytes) else str(v) for v in values)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big", signed=True)


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
    if isinstance(exc, pg_errors.SerializationFailure | pg_errors.DeadlockDetected):
        return Retry(f"another machine's change crossed this one ({type(exc).__name__}); nothing was written")
    if isinstance(exc, pg_errors.UniqueViolation) and exc.diag.constraint_name == LIVE_CONTENT:
        return Retry("another machine committed this content in this space first")
    if isinstance(exc, pg_errors.LockNotAvailable):
        return Unavailable("store_busy", "the store is busy; another writer holds it", fix="retry")
    if isinstance(exc, pg_errors.DiskFull):
        return Failed("disk_full", "the disk holding the store is full; this change was not written",
                      fix="free space on the database server")  # fmt: skip
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction | pg_errors.InsufficientPrivilege):
        return Unavailable("read_only", f"the store refused a write: {exc}",
                           fix="grant the role the rights docs/decisions.md lists (D157)")  # fmt: skip
    return Failed("store", f"store error: {str(exc).strip().splitlines()[0]}")
