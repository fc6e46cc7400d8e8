"""A PostgreSQL connection behind the small connection surface the store's statement modules use.

The statement modules of `store/sqlite/` that hold only portable SQL (memories, sessions, clients, audit,
governance, listing, vectors: D150) run over this connection, typed against `store/connection.py`'s Protocol
(D355). It binds every value as a server-side parameter (`?` becomes `$n` through psycopg; memory text is never
inlined), answers the statements the backends spell differently by name (`DIALECT`, D358), still rewrites the
few SQLite spellings left inside shared statements (`PIECES`, `SUFFIXES`, booleans), routes the search index's
statements to `postgres/search.py`, and maps database errors onto the wire's error tree.

A verb's `BEGIN IMMEDIATE` is a plain READ COMMITTED transaction, so writers on several machines run at once
(docs/decisions.md D152, D208): a read whose rows the verb then writes declares its lock where it is written
(`store/connection.py`'s Lock and Key, D356), and this connection takes it by that name (`locked`); a new
memory's row is inserted `ON CONFLICT DO NOTHING` on the live (space, content hash) index, and only the event
chain's append is serialized, under a transaction-scoped advisory lock taken just before the verb's first event
and held to its commit. A race the database settles against a verb (a duplicate another machine committed first,
a deadlock) is `Retry`: the store runs the verb's change again (postgres/store.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store.connection import Args, Dialect, Key, Lock, Locking, Row

WRITE_LOCK = 0x48564D4D  # "HVMM": the event chain's advisory lock, held from a verb's first event to its commit
KEYED_LOCK = 0x48564D4B  # "HVMK": advisory locks on one value a verb looks up before it inserts (two-key form)
NOTIFY_CHANNEL = "hivemem_events"
Special = Callable[["Connection", Args], list[Row]]

# The statements PostgreSQL spells differently, by name (D358).
DIALECT = Dialect(
    chain_end="SELECT chain, id FROM events ORDER BY id DESC LIMIT 1",
    last_event="SELECT COALESCE(max(id), 0) FROM events",
    last_memory="SELECT GREATEST(COALESCE((SELECT max(id) FROM memories), 0), "
    "(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM memories_id_seq))",
    add_relation="INSERT INTO memory_relations(source_memory, target_memory, relation, reason, principal, label, "
    "created) VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
    version_bytes="octet_length(CASE WHEN v.content = '' THEN m.content ELSE v.content END)",
)
# SQLite spellings inside statements the modules share, and their PostgreSQL form.
PIECES: tuple[tuple[str, str], ...] = (
    ("INSERT OR REPLACE INTO memory_vectors", "INSERT INTO memory_vectors"),
)  # fmt: skip
SUFFIXES: tuple[tuple[str, str], ...] = (
    ("INSERT OR REPLACE INTO memory_vectors",
     " ON CONFLICT (memory) DO UPDATE SET model = EXCLUDED.model, embedding = EXCLUDED.embedding"),
)  # fmt: skip
# What the runtime role may not do itself, done by the schema owner's functions (postgres/roles.py, D250): the
# statement as the modules spell it, and the call that replaces it. Each answers the rows it changed (`changes()`).
DEFINED: dict[str, str] = {
    "UPDATE memory_versions SET content = ? WHERE memory = ? AND content = ''": "SELECT hivemem_keep_version(%s, %s)",
    "DELETE FROM memory_versions WHERE memory = ? AND revision <= ?": "SELECT hivemem_trim_versions(%s, %s)",
    "DELETE FROM memories WHERE id = ?": "SELECT hivemem_purge_memory(%s)",
    "DELETE FROM memories WHERE deleted IS NOT NULL AND deleted < ?": "SELECT hivemem_remove_tombstones(%s)",
    "DELETE FROM sessions WHERE id = ?": "SELECT hivemem_purge_session(%s)",
    "UPDATE meta SET value = ? WHERE key = 'next_principal'": "SELECT hivemem_next_principal(CAST(%s AS BIGINT))",
}
# The table locks of Lock.IMPORT (EXCLUSIVE: reads go on) and Lock.EXPORT (SHARE), by the schema owner's functions
# (the runtime role may not LOCK a table itself).
TABLES = {Lock.IMPORT: "SELECT hivemem_lock_memories()", Lock.EXPORT: "SELECT hivemem_lock_snapshot()"}
ROWS = {Lock.ROW: " FOR UPDATE", Lock.SHARE: " FOR SHARE"}  # the clause of a row lock
RETURNING = re.compile(r"^\s*INSERT INTO (memories|sessions)\(")
# A bare 1 or 0 standing for true or false (SQLite's booleans), as a whole condition.
BOOLEAN = re.compile(r"(\bWHERE |\bAND |\bOR |\()([01])(?=\s*(?:$|\)|AND\b|OR\b|ORDER\b|GROUP\b|LIMIT\b))")
SPECIALS: dict[str, Special] = {}  # statements answered in Python (the search index), filled by postgres/search

NEW_MEMORY = "INSERT INTO memories(space,"
NEW_TITLE, NEW_CONTENT, NEW_TAGS, NEW_STATUS = 2, 3, 6, 7  # in memories.insert's column list
# The search terms of a memory's title, content and tags (postgres/search.py's `document`, set there).
DOCUMENT: Callable[[str, str, str], str] | None = None
LIVE_CONTENT = "memories_live_content"


class Retry(Unavailable):
    """A race the database settled against this verb's change, which was rolled back: another machine committed
    the same content first, or a deadlock chose it. Running the change again gives the answer SQLite's single
    writer would have (`changed: false`, `conflict.memory_duplicate`); if it escapes, it is `store_busy`."""

    def __init__(self, message: str) -> None:
        super().__init__("store_busy", message, fix="retry")


def translate_sql(sql: str, bound: bool = True, clause: str = "") -> str:
    """The PostgreSQL spelling of a statement written for SQLite, with `?` as psycopg's `%s`, and a row lock's
    `clause` after its query (before an INSERT's conflict clause)."""
    suffix = "".join(tail for marker, tail in SUFFIXES if marker in sql)
    for old, new in PIECES:
        if old in sql:
            sql = sql.replace(old, new)
    if sql.startswith("SELECT count(*) FROM (SELECT") and sql.endswith(")"):
        sql += " AS counted"  # PostgreSQL before 16 names every subquery in FROM
    sql = BOOLEAN.sub(lambda m: m.group(1) + ("true" if m.group(2) == "1" else "false"), sql)
    return (_placeholders(sql) if bound else sql) + clause + suffix


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
    dialect = DIALECT
    # Called with each statement before it is sent: a mounted team store's deadline refuses what comes after it
    # (a COMMIT included), so a call its caller gave up on never commits later (docs/team.md, D391).
    guard: Callable[[str], None] | None = None

    def __init__(self, url: str, *, readonly: bool = False, timeout_ms: int = 0) -> None:
        self.url = url
        self.readonly = readonly
        self.timeout_ms = timeout_ms
        self._last_id = 0
        self._changes = 0
        self._in_transaction = False  # between this adapter's BEGIN and its COMMIT or ROLLBACK
        self._writing = False  # the open transaction is a verb's (BEGIN IMMEDIATE)
        self._chained = False  # it holds the event chain's lock
        self._tables = False  # it holds a table lock (an import's or an export's)
        self.indexed: int | None = None  # the memory the last statement inserted with its search terms (D211)
        self._release = False  # a savepoint's RELEASE not sent yet (a round trip, under the chain's lock)
        self.pg = self._open()

    def _open(self) -> psycopg.Connection[Row]:
        try:
            given = "connect_timeout" in conninfo_to_dict(self.url)  # the URL's own (a mounted team store's) is kept
            url = self.url if given else make_conninfo(self.url, connect_timeout=10)
            conn = psycopg.connect(url, autocommit=True, application_name="hivemem")
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

    def execute(self, sql: str, args: Args = ()) -> Cursor:
        return self._execute(sql, args, "")

    def locked(self, lock: Locking, sql: str, args: Args = ()) -> list[Row]:
        """A statement under the lock it declares (D356), inside a verb's transaction: a row lock is its clause,
        the others are taken before it and held to the transaction's end. Elsewhere (a reader's snapshot, no
        transaction) there is nothing to hold it for."""
        clause = ""
        if self._writing:
            clause = self._take(lock)
        return self._execute(sql, args, clause).fetchall()

    def _take(self, lock: Locking) -> str:
        """Take `lock` now unless it is a row lock; the row lock's clause, or ""."""
        if isinstance(lock, Key):
            self.run("SELECT pg_advisory_xact_lock(%s, %s)", (KEYED_LOCK, keyed(lock)))
        elif lock is Lock.STORE:
            self.chain_lock()
        elif lock in TABLES:
            self._lock_tables(TABLES[lock])
        return ROWS.get(lock, "") if isinstance(lock, Lock) else ""

    def _execute(self, sql: str, args: Args, clause: str) -> Cursor:
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
        if sql.startswith("ROLLBACK TO"):  # locks taken since the savepoint may be released with it
            self._chained = self._tables = False
        self.indexed = None
        text, args, searched = self._with_terms(sql, self._statement(sql, bool(args), clause), args)
        rows = self.run(text, args)
        if RETURNING.match(text):
            if not rows:
                raise Retry("another machine committed this content in this space first")
            self._last_id = int(rows[0][0])
            self.indexed = self._last_id if searched else None
        return Cursor(rows)

    def defined(self, call: str, args: Sequence[object]) -> list[Row]:
        """A statement the schema owner's function runs (DEFINED); its count of rows is `changes()`."""
        rows = self.run(call, args)
        self._changes = int(rows[0][0] or 0)
        return []

    def _with_terms(self, sql: str, text: str, args: Args) -> tuple[str, Args, bool]:
        """A new live, active memory's INSERT with its search terms in the row (D211): the index's statement that
        follows it then has nothing left to read or write."""
        if DOCUMENT is None or not self._writing or not sql.startswith(NEW_MEMORY) or args[NEW_STATUS] != "active":
            return text, args, False
        text = text.replace(") VALUES (", ", search) VALUES (", 1)
        text = text.replace(") ON CONFLICT", ", %s::tsvector) ON CONFLICT", 1)
        return text, (*args, DOCUMENT(str(args[NEW_TITLE]), str(args[NEW_CONTENT]), str(args[NEW_TAGS]))), True

    def _statement(self, sql: str, bound: bool, clause: str) -> str:
        """The PostgreSQL text of a statement, with what a verb's transaction adds to it."""
        text = translate_sql(sql, bound, clause)
        if RETURNING.match(text):
            if self._writing and sql.startswith(NEW_MEMORY):  # two machines adding one text: one row
                text += " ON CONFLICT (space, content_sha256) WHERE deleted IS NULL DO NOTHING"
            return text + " RETURNING id"
        return text

    def _end(self, how: str) -> Cursor:
        try:
            self.run(how)
        finally:
            self._in_transaction = self._writing = self._chained = self._release = False
            self._tables = False
        return Cursor([])

    def chain_lock(self) -> None:
        """Take the event chain's lock (once per transaction, held to its end), and announce the commit to
        every machine's followers: NOTIFY is delivered when the transaction commits, and only then."""
        if not self._chained:
            self.run("SELECT pg_advisory_xact_lock(%s), pg_notify(%s, '')", (WRITE_LOCK, NOTIFY_CHANNEL))
            self._chained = True

    def _lock_tables(self, call: str) -> None:
        if not self._tables:
            self.run(call)
            self._tables = True

    def executemany(self, sql: str, seq: Sequence[Args]) -> Cursor:
        rows: list[Row] = []
        for args in seq:
            rows += self.execute(sql, args).fetchall()
        if sql.startswith("INSERT INTO memories(id,"):  # ids given: the sequence moves past them
            self.run("SELECT hivemem_memories_past_ids()")
        return Cursor(rows)

    def run(self, sql: str, args: Sequence[object] = ()) -> list[Row]:
        """A PostgreSQL statement, its parameters bound by the server (arrays too); errors as the wire's."""
        if self.guard is not None:
            self.guard(sql)
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

    def interrupt(self) -> None:
        """Shut the socket down from another thread: a statement waiting on a server that no longer answers fails
        at once (its transaction is then lost, never committed), and the next statement reconnects."""
        with contextlib.suppress(OSError, psycopg.Error):
            sock = socket.socket(fileno=os.dup(self.pg.pgconn.socket))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    def close(self) -> None:
        self.pg.close()


def _defined(call: str) -> Special:
    return lambda conn, args: conn.defined(call, args)


SPECIALS.update({sql: _defined(call) for sql, call in DEFINED.items()})


def keyed(key: Key) -> int:
    """The second half of a Key's advisory lock: 32 bits of SHA-256 of its kind and values (two values sharing
    a lock only wait for each other)."""
    text = "\0".join([key.kind, *(v.hex() if isinstance(v, bytes) else str(v) for v in key.values)])
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
