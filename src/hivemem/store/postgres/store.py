"""The PostgreSQL Store: one connection per thread, the repositories of `store/base.py` over it (D150).

The repositories are the SQLite store's, run over `postgres/conn.py`'s adapter, except where PostgreSQL
differs: search (text search, postgres/search.py), operations (checks, backup deferred), status, readers
(another connection to the same database) and the erasure of copies (no WAL, no file backups).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import psycopg

from hivemem.auth import Readable
from hivemem.records import Hit, SpacePage, Status
from hivemem.store.filters import Filter
from hivemem.store.keys import ensure_owner_key, new_secret, read_key
from hivemem.store.limits import Limits
from hivemem.store.postgres import schema, search
from hivemem.store.postgres.conn import NOTIFY_CHANNEL, Connection, Retry
from hivemem.store.postgres.operations import PostgresOperations
from hivemem.store.sqlite import erasure, listing
from hivemem.store.sqlite.store import (
    SQLiteClients,
    SQLiteEvents,
    SQLiteGovernance,
    SQLiteMemories,
    SQLiteSearch,
    SQLiteSessions,
    SQLiteStore,
)

P = ParamSpec("P")
R = TypeVar("R")
RETRIES = 5  # a verb's change run again after a race it lost (postgres/conn.py's Retry), at most this often


def retrying(method: Callable[P, R]) -> Callable[P, R]:
    """A writing method run again when the database settled a race against it (D208). Its change is one
    atomic() block, rolled back (to its savepoint, inside a verb's transaction) before `Retry` leaves it, so the
    next run starts clean and sees what the other machine committed: the same answers as SQLite's single
    writer. A race lost RETRIES times in a row answers `unavailable.store_busy`."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        for _ in range(RETRIES - 1):
            try:
                return method(*args, **kwargs)
            except Retry:
                continue
        return method(*args, **kwargs)

    return run


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def shown_url(url: str) -> str:
    """The URL without a password, as status and logs show it."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(SQLiteStore):
    """A team store: `path` is the database URL (without its password); `data_dir` the local directory for
    exports. Tests and tools may reach `conn`; nothing above `store/` does."""

    def __init__(self, conn: Connection, url: str, data_dir: str, limits: Limits, *, readonly: bool = False) -> None:
        super().__init__(conn, shown_url(url), limits, readonly=readonly)  # type: ignore[arg-type]
        self.url = url
        self._data_dir = data_dir
        self._identity = None
        self._memories = PostgresMemories(self)
        self._sessions = PostgresSessions(self)
        self._clients = PostgresClients(self)
        self._events = PostgresEvents(self)
        self._governance = PostgresGovernance(self)
        self._search = PostgresSearch(self)
        self._operations = PostgresOperations(self)

    @property
    def operations(self) -> PostgresOperations:
        return cast(PostgresOperations, self._operations)

    @property
    def data_dir(self) -> str:
        return self._data_dir

    @property
    def sqlite_version(self) -> str:
        """The server's version where SQLite's would be (status's `sqlite_version`, D156)."""
        pg: Connection = self.conn  # type: ignore[assignment]
        return f"PostgreSQL {pg.pg.info.server_version // 10000}.{pg.pg.info.server_version % 10000}"

    def reader(self) -> PostgresStore:
        conn = Connection(self.url, readonly=True, timeout_ms=self.limits_timeout())
        reader = PostgresStore(conn, self.url, self._data_dir, self.limits, readonly=True)
        reader.embeddings = self.embeddings
        return reader

    def limits_timeout(self) -> int:
        pg: Connection = self.conn  # type: ignore[assignment]
        return pg.timeout_ms

    def after_commit(self, step: Callable[[], None]) -> None:
        if self.conn.getautocommit():
            step()
        else:
            self._after_commit.append(step)

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """LISTEN for the commits of every machine's daemon (each writing verb NOTIFYs at commit) on a
        connection of its own, calling `wake` for each; reconnects after a lost server."""
        stopped = threading.Event()

        def listen() -> None:
            while not stopped.is_set():
                try:
                    with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                        wake()  # whatever committed while no one listened
                        while not stopped.is_set():
                            for _ in conn.notifies(timeout=0.5, stop_after=1):
                                wake()
                except psycopg.Error:
                    stopped.wait(1.0)

        thread = threading.Thread(target=listen, name="hivemem-listen", daemon=True)
        thread.start()

        def stop() -> None:
            stopped.set()
            thread.join(2.0)

        return stop

    def owner_key(self, path: str) -> str:
        """The team's owner key (D154): the key file at `path` when its hash is the one `store init` recorded
        in the database; the first daemon of a store nobody initialized records its own. A machine without
        the right file has no owner (an unguessable key): copy owner.key from the machine that ran init."""
        recorded = self._recorded_owner()
        if recorded is None:
            return self.init_owner(path) or ensure_owner_key(path)
        try:
            key = read_key(path)
        except OSError:
            return f"hm1.owner.{new_secret()}"
        return key if hmac.compare_digest(_digest(key), recorded) else f"hm1.owner.{new_secret()}"

    def _recorded_owner(self) -> str | None:
        pg: Connection = self.conn  # type: ignore[assignment]
        rows = pg.run("SELECT value FROM meta WHERE key = 'owner_key_sha256'")
        return str(rows[0][0]) if rows else None

    def init_owner(self, path: str) -> str | None:
        """Record the owner key's hash in the database, creating the key file (0600) if this machine has none;
        returns the key, or None when the store already has an owner key."""
        pg: Connection = self.conn  # type: ignore[assignment]
        key = ensure_owner_key(path)
        pg.run("INSERT INTO meta(key, value) VALUES ('owner_key_sha256', %s) ON CONFLICT DO NOTHING", (_digest(key),))
        return key if pg.changes() else None

    def spaces(self, flt: Filter, after: str | None, limit: int) -> SpacePage:
        return cast(SpacePage, listing.spaces(self.conn, flt, after, limit))

    def status(self, readable: Readable, sessions: tuple[bool, frozenset[int], str | None],
               with_path: bool) -> Status:  # fmt: skip
        seen = listing.Sessions(*sessions)
        kind = "off" if self.embeddings is None else str(self.embeddings.kind)
        out = listing.status(self.conn, self.sqlite_version, readable, seen, None, kind)
        out["schema_version"] = schema.VERSION
        if with_path:
            pg: Connection = self.conn  # type: ignore[assignment]
            size = int(pg.run("SELECT pg_database_size(current_database())")[0][0])
            out = {"path": self.path, **out, "bytes": size}
        return cast(Status, out)

    def close(self, *, checkpoint: bool = False, moved: bool = False) -> None:
        self.conn.close()


class PostgresMemories(SQLiteMemories):
    __slots__ = ()
    add = retrying(SQLiteMemories.add)
    update = retrying(SQLiteMemories.update)
    delete = retrying(SQLiteMemories.delete)
    restore = retrying(SQLiteMemories.restore)
    purge = retrying(SQLiteMemories.purge)

    def erase_copies(self, memory: int) -> None:
        """The purged memory's text out of this machine's exports; the database keeps no copy once the purge
        commits (backups taken with pg_dump are the operator's to rotate, D155)."""
        erasure.scrub_exports(os.path.join(self._store.data_dir, "exports"), self._store.store_id(), memory)


class PostgresSessions(SQLiteSessions):
    __slots__ = ()
    start = retrying(SQLiteSessions.start)
    end = retrying(SQLiteSessions.end)
    purge = retrying(SQLiteSessions.purge)


class PostgresClients(SQLiteClients):
    __slots__ = ()
    add = retrying(SQLiteClients.add)
    remove = retrying(SQLiteClients.remove)


class PostgresEvents(SQLiteEvents):
    __slots__ = ()
    recalled = retrying(SQLiteEvents.recalled)


class PostgresGovernance(SQLiteGovernance):
    __slots__ = ()
    capture = retrying(SQLiteGovernance.capture)
    confirm = retrying(SQLiteGovernance.confirm)
    challenge = retrying(SQLiteGovernance.challenge)
    archive = retrying(SQLiteGovernance.archive)
    relate = retrying(SQLiteGovernance.relate)
    unrelate = retrying(SQLiteGovernance.unrelate)
    move = retrying(SQLiteGovernance.move)


class PostgresSearch(SQLiteSearch):
    __slots__ = ()

    def compact(self, resume: bool) -> bool:
        """Nothing to do: PostgreSQL keeps its own indexes (autovacuum)."""
        return False

    def full_text(self, words: list[str], flt: Filter, limit: int) -> list[Hit]:
        return cast(list[Hit], search.hits(self.conn, words, flt, limit))  # type: ignore[arg-type]

    def matching(self, words: list[str], flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
        return search.matching(self.conn, words, flt, limit)  # type: ignore[arg-type]

    def ranked(self, words: list[str], flt: Filter) -> list[int]:
        return search.ranked(self.conn, words, flt)  # type: ignore[arg-type]

    def near(self, words: list[str], ids: list[int], window: int) -> set[int]:
        return search.near(self.conn, words, ids, window)  # type: ignore[arg-type]


def open_postgres(url: str, data_dir: str, limits: Limits, progress: Callable[[str], None] | None = None,
                  *, timeout_ms: int = 0) -> PostgresStore:  # fmt: skip
    """Connect, create or migrate the schema (refusing another version or application), and open the store."""
    conn = Connection(url, timeout_ms=timeout_ms)
    try:
        schema.migrate(conn, progress or (lambda _: None))
    except BaseException:
        conn.close()
        raise
    return PostgresStore(conn, url, data_dir, limits)


__all__ = ["NOTIFY_CHANNEL", "PostgresStore", "open_postgres", "shown_url"]
