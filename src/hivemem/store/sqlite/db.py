"""Connections with the settings of docs/schema.md (and defensive, with an untrusted schema), and atomic(): one
BEGIN IMMEDIATE per verb, savepoints inside it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store import connection
from hivemem.store.clock import format_time as format_time
from hivemem.store.clock import now as now
from hivemem.store.connection import Row as Row
from hivemem.store.connection import all_rows as all_rows
from hivemem.store.connection import one as one
from hivemem.store.connection import scalar as scalar
from hivemem.store.sqlite import fts5

BUSY_TIMEOUT_MS = 5000
REQUIRED = {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "secure_delete": 1, "busy_timeout": 5000}


DIALECT = connection.Dialect(
    chain_end="SELECT chain, (SELECT seq FROM sqlite_sequence WHERE name = 'events') FROM events ORDER BY id DESC "
    "LIMIT 1",
    last_event="SELECT seq FROM sqlite_sequence WHERE name = 'events'",
    last_memory="SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0), "
    "coalesce((SELECT max(id) FROM memories), 0))",
    add_relation="INSERT OR IGNORE INTO memory_relations(source_memory, target_memory, relation, reason, principal, "
    "label, created) VALUES (?,?,?,?,?,?,?)",
    version_bytes="length(CAST(CASE WHEN v.content = '' THEN m.content ELSE v.content END AS BLOB))",
)


class Connection(apsw.Connection):
    """A connection that remembers which file (device, inode) it opened for writing, and the connection's
    change count when its open write transaction began (None when atomic() did not begin one)."""

    identity: tuple[int, int] | None = None
    begun: int | None = None
    dialect = DIALECT

    def locked(self, lock: connection.Locking, sql: str, args: connection.Args = ()) -> list[Row]:
        """Nothing to take: the writer's `BEGIN IMMEDIATE` holds the whole file to the end of the transaction, and
        a reader sees one snapshot (docs/decisions.md D356)."""
        return self.execute(sql, args).fetchall()


def open_file(path: str, flags: int) -> Connection:
    """Every SQLite connection hivemem opens: SQLite's defensive mode on and the schema untrusted, set before
    the schema is first read, so no object in a file (a view, a trigger, a default) can call a function that
    is not innocuous or write the schema or an index's shadow tables (docs/security.md)."""
    conn = Connection(path, flags=flags)
    harden(conn)
    return conn


def harden(conn: apsw.Connection) -> None:
    conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, 1)
    conn.config(apsw.SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)


def connect(path: str, *, readonly: bool = False, page_size: int | None = None) -> Connection:
    """Open `path` with WAL, synchronous=FULL, foreign keys, secure delete and a busy timeout."""
    flags = apsw.SQLITE_OPEN_NOFOLLOW
    flags |= apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    frozen = readonly and _frozen(path)
    if frozen:
        flags |= apsw.SQLITE_OPEN_URI
    try:
        conn = open_file(_immutable_uri(path) if frozen else path, flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        try:
            fts5.prepare(conn)  # memory_fts cannot be read or written without the tokenizer
        except apsw.Error:
            # Registering only says the FTS5 API could not be had; on a corrupt file, reading the schema
            # raises the CorruptError that names the real cause.
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            raise
        if page_size is not None:  # only a new, empty file takes it; it must come before WAL
            conn.execute(f"PRAGMA page_size = {int(page_size)}")
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            conn.identity = identity(path)
        conn.execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON")
        _check_settings(conn, skip=("journal_mode",) if frozen else ())
    except apsw.Error as exc:
        raise translate(exc) from None
    return conn


def _frozen(path: str) -> bool:
    """A store on a read-only file system with no WAL: nothing can change it, and SQLite cannot make a -shm."""
    directory = os.path.dirname(path) or "."
    return bool(os.statvfs(directory).f_flag & os.ST_RDONLY) and not os.path.exists(path + "-wal")


def _immutable_uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(path)}?immutable=1"


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, None if nothing is there."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def check_identity(conn: connection.Connection) -> None:
    """Refuse to write when the store path no longer names the file this connection opened (docs/protocol.md)."""
    check_path(conn.filename, getattr(conn, "identity", None))


def check_path(path: str, opened: tuple[int, int] | None) -> None:
    """failed.store_moved when `path` no longer names the file whose (device, inode) is `opened`."""
    if opened is None or identity(path) == opened:
        return
    message = f"{path} was deleted or replaced while the daemon ran; nothing was written"
    fix = "the daemon stops; the next call starts one on the file now at that path"
    raise Failed("store_moved", message, path=path, fix=fix)


def keep_files_on_close(conn: apsw.Connection) -> None:
    """Close without unlinking the -wal and -shm names, which may belong to the file now at the path."""
    import ctypes

    persist = ctypes.c_int(1)
    conn.file_control("main", apsw.SQLITE_FCNTL_PERSIST_WAL, ctypes.addressof(persist))
    conn.execute("PRAGMA journal_size_limit = 0").fetchall()  # so the WAL this connection holds is emptied


def _check_settings(conn: apsw.Connection, skip: tuple[str, ...] = ()) -> None:
    for name, want in REQUIRED.items():
        if name in skip:
            continue
        got = conn.execute(f"PRAGMA {name}").fetchall()[0][0]
        if got != want:
            raise Failed("store", f"connection setting {name} is {got!r}, expected {want!r}", setting=name)


def translate(exc: BaseException) -> HivememError:
    """Map a SQLite error to the wire error tree."""
    if isinstance(exc, HivememError):
        return exc
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return Unavailable("store_busy", "the store is busy; another writer holds it", fix="retry")
    if isinstance(exc, apsw.FullError):
        return Failed("disk_full", "the disk holding the store is full; this change was not written",
                      fix="free space on the file system that holds the store")  # fmt: skip
    if isinstance(exc, apsw.ReadOnlyError):
        return read_only()
    return Failed("store", f"store error: {exc}")


def read_only() -> Unavailable:
    return Unavailable("read_only", "the store is read-only: reads work, writes do not",
                       fix="make the store file and its file system writable, then `hivemem stop`")  # fmt: skip


@contextmanager
def atomic(conn: connection.Connection, *, verb: bool = False) -> Iterator[connection.Connection]:
    """One logical change: the outermost call is one BEGIN IMMEDIATE transaction on the file the store path
    names (commit on success, else roll back); a call inside it is undone alone when it fails: a SAVEPOINT, or,
    when the transaction is a verb's (`verb`: only row changes, which SQLite counts) and has changed nothing yet,
    the transaction itself, begun again after the failure (D132)."""
    if not conn.getautocommit():
        if isinstance(conn, Connection) and conn.begun is not None and conn.total_changes() == conn.begun:
            with _first_change(conn):
                yield conn
        else:
            with _savepoint(conn):
                yield conn
        return
    check_identity(conn)
    try:
        _begin(conn, verb)
    except apsw.Error as exc:
        raise translate(exc) from None
    try:
        yield conn
    except BaseException as exc:
        _end(conn, "ROLLBACK")
        if isinstance(exc, apsw.Error):
            raise translate(exc) from None
        raise
    try:
        _end(conn, "COMMIT")
    except apsw.Error as exc:
        _end(conn, "ROLLBACK")
        raise translate(exc) from None


def _begin(conn: connection.Connection, verb: bool) -> None:
    conn.execute("BEGIN IMMEDIATE")
    if isinstance(conn, Connection):
        conn.begun = conn.total_changes() if verb else None


def _end(conn: connection.Connection, how: str) -> None:
    """COMMIT or ROLLBACK the open transaction (SQLite may already have rolled back: a full disk, for one)."""
    if isinstance(conn, Connection):
        conn.begun = None
    if not conn.getautocommit():
        conn.execute(how)


@contextmanager
def _first_change(conn: connection.Connection) -> Iterator[None]:
    """A nested change that is the transaction's first: everything the transaction holds on failure is its own,
    so rolling the transaction back undoes it alone, and a new one is begun for the caller. No SAVEPOINT: inside
    one, SQLite copies every page the change touches to a sub-journal first, the larger part of a small write."""
    try:
        yield
    except BaseException:
        if conn.getautocommit():  # SQLite already rolled the whole transaction back: nothing is open to go on with
            _end(conn, "ROLLBACK")
        else:
            conn.execute("ROLLBACK")
            try:
                _begin(conn, verb=True)
            except apsw.Error:  # busy: the caller's own error still says what failed; nothing is left open
                _end(conn, "ROLLBACK")
        raise


@contextmanager
def _savepoint(conn: connection.Connection) -> Iterator[None]:
    """A nested change inside the caller's transaction: released on success, rolled back to on failure.

    Every level has the same name: SQLite's RELEASE and ROLLBACK TO act on the innermost savepoint of a name.
    """
    conn.execute("SAVEPOINT hivemem")
    try:
        yield
    except BaseException as exc:
        if not conn.getautocommit():  # a failure SQLite rolled the whole transaction back for leaves nothing to undo
            conn.execute("ROLLBACK TO hivemem; RELEASE hivemem")
        if isinstance(exc, apsw.Error):
            raise translate(exc) from None
        raise
    conn.execute("RELEASE hivemem")


@contextmanager
def snapshot(conn: connection.Connection) -> Iterator[connection.Connection]:
    """One read transaction around several statements (a no-op inside a transaction already open)."""
    if not conn.getautocommit():
        yield conn
        return
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


START_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (apsw.FullError, "disk_full"),
    (apsw.ReadOnlyError, "read_only"),
    (apsw.CorruptError, "corrupt"),
    (apsw.NotADBError, "corrupt"),
    (apsw.PermissionsError, "permission"),
    (apsw.BusyError, "store_locked"),
)


def start_cause(exc: BaseException, store: str) -> str:
    """Why opening the store failed, for a SQLite error (docs/protocol.md causes); `other` for anything else."""
    for kind, cause in START_CAUSES:
        if isinstance(exc, kind):
            return cause
    if isinstance(exc, apsw.CantOpenError | apsw.IOError) and store:
        return _file_system_cause(store)
    return "other"


def _file_system_cause(store: str) -> str:
    """Why SQLite could not open or write the store: look at the file system it is on."""
    directory = os.path.dirname(store)
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "read_only"
    except OSError:
        return "other"
    target = store if os.path.exists(store) else directory
    return "other" if os.access(target, os.R_OK | os.W_OK) else "permission"
