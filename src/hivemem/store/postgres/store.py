"""The PostgreSQL Store: one connection per thread, the repositories of `store/base.py` over it (D150).

It is composed like the SQLite store (D366): the shared repositories of `store/repositories.py`, run over
`postgres/conn.py`'s adapter, each writing call run again after a lost race (`again`), and what PostgreSQL does
its own way: search (text search, postgres/search.py), operations (checks, backup deferred), status, readers
(another connection to the same database) and the erasure of copies (no WAL, no file backups).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ParamSpec, TypeVar

import psycopg

from hivemem.auth import Readable
from hivemem.records import Hit, MemoryRead, SpacePage, Status
from hivemem.store import repositories
from hivemem.store.connection import scalar
from hivemem.store.filters import Filter
from hivemem.store.keys import ensure_owner_key, new_secret, read_key
from hivemem.store.limits import Limits
from hivemem.store.postgres import roles, schema, search
from hivemem.store.postgres.conn import NOTIFY_CHANNEL, Connection, Retry
from hivemem.store.postgres.operations import PostgresOperations
from hivemem.store.sqlite import erasure, listing
from hivemem.store.sqlite import search as portable
from hivemem.store.sqlite.db import snapshot

P = ParamSpec("P")
R = TypeVar("R")
RETRIES = 5  # a verb's change run again after a race it lost (postgres/conn.py's Retry), at most this often
BACKOFF_S = 0.005  # the ceiling of the first pause before a run again; it doubles for each further one
BACKOFF_MAX_S = 0.05  # and stops growing here: at most 0.005 + 0.01 + 0.02 + 0.04 s of pauses in all


def pause(attempt: int) -> float:
    """Seconds to wait before running a change again after its `attempt`-th lost race (0 for the first): a random
    time up to a ceiling that doubles with each attempt, so two machines whose changes crossed do not run again in
    the same instant and cross again (D360)."""
    return random.uniform(0.0, min(BACKOFF_MAX_S, BACKOFF_S * 2**attempt))


def again(change: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """A repository's writing call (`repositories.Change`), run again when the database settled a race against it
    (D208), after a jittered pause. Its change is one atomic() block, rolled back (to its savepoint, inside a verb's
    transaction) before `Retry` leaves it, so the next run starts clean and sees what the other machine committed:
    the same answers as SQLite's single writer. A race lost RETRIES times in a row answers
    `unavailable.store_busy`."""
    for attempt in range(RETRIES - 1):
        try:
            return change(*args, **kwargs)
        except Retry:
            time.sleep(pause(attempt))
    return change(*args, **kwargs)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def shown_url(url: str) -> str:
    """The URL without a password, as status and logs show it."""
    from hivemem.libpq import without_password

    return without_password(url)


class PostgresStore:
    """A team store: `path` is the database URL (without its password); `data_dir` the local directory for
    exports. Tests and tools may reach `conn`; nothing above `store/` does."""

    def __init__(self, conn: Connection, url: str, data_dir: str, limits: Limits, *, readonly: bool = False) -> None:
        self.conn = conn
        self.path = shown_url(url)
        self.limits = limits
        self.readonly = readonly
        self.embeddings: Any = None  # hivemem.search.vector.Runtime when a provider is on (set by the daemon)
        self.url = url
        self._data_dir = data_dir
        self._transaction = repositories.Transaction(self)
        self._memories = repositories.Memories(self, again, self._erase_copies)
        self._sessions = repositories.Sessions(self, again)
        self._clients = repositories.Clients(self, again)
        self._events = repositories.Events(self, again)
        self._governance = repositories.Governance(self, again)
        self._vectors = repositories.Vectors(self)
        self._search = PostgresSearch(self)
        self._operations = PostgresOperations(self)

    @property
    def memories(self) -> repositories.Memories:
        return self._memories

    @property
    def sessions(self) -> repositories.Sessions:
        return self._sessions

    @property
    def clients(self) -> repositories.Clients:
        return self._clients

    @property
    def events(self) -> repositories.Events:
        return self._events

    @property
    def search(self) -> PostgresSearch:
        return self._search

    @property
    def operations(self) -> PostgresOperations:
        return self._operations

    @property
    def governance(self) -> repositories.Governance:
        return self._governance

    @property
    def vectors(self) -> repositories.Vectors:
        return self._vectors

    @property
    def embeddings_model(self) -> str | None:
        return None if self.embeddings is None else str(self.embeddings.model)

    @property
    def data_dir(self) -> str:
        return self._data_dir

    @property
    def sqlite_version(self) -> str:
        """The server's version where SQLite's would be (status's `sqlite_version`, D156)."""
        version = self.conn.pg.info.server_version
        return f"PostgreSQL {version // 10000}.{version % 10000}"

    def reader(self) -> PostgresStore:
        conn = Connection(self.url, readonly=True, timeout_ms=self.limits_timeout())
        reader = PostgresStore(conn, self.url, self._data_dir, self.limits, readonly=True)
        reader.embeddings = self.embeddings
        return reader

    def limits_timeout(self) -> int:
        return self.conn.timeout_ms

    def transaction(self) -> AbstractContextManager[None]:
        """One verb's change: a single transaction (the store functions it calls nest as savepoints)."""
        return self._transaction.verb()

    def after_commit(self, step: Callable[[], None]) -> None:
        self._transaction.after_commit(step)

    def _erase_copies(self, memory: int) -> None:
        """A purged memory's text out of this machine's exports; the database keeps no copy once the purge
        commits (backups taken with pg_dump are the operator's to rotate, D155)."""
        erasure.scrub_exports(os.path.join(self.data_dir, "exports"), self.store_id(), memory)

    def store_id(self) -> str:
        return str(scalar(self.conn, "SELECT value FROM meta WHERE key = 'store_id'"))

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
        found = self.conn.run("SELECT value FROM meta WHERE key = 'owner_key_sha256'")
        return str(found[0][0]) if found else None

    def init_owner(self, path: str) -> str | None:
        """Record the owner key's hash in the database, creating the key file (0600) if this machine has none;
        returns the key, or None when the store already has an owner key."""
        pg = self.conn
        key = ensure_owner_key(path)
        pg.run("INSERT INTO meta(key, value) VALUES ('owner_key_sha256', %s) ON CONFLICT DO NOTHING", (_digest(key),))
        return key if pg.changes() else None

    def grant_runtime(self, role: str) -> dict[str, object]:
        """`store init --runtime-role`: revoke everything from `role`, grant exactly what the verbs need, record it
        (postgres/roles.py); answers the role and what it still holds beyond that (nothing, unless the server
        gives it more: a superuser, a membership)."""
        pg = self.conn
        pg.execute("BEGIN IMMEDIATE")
        try:
            pg.run("SELECT pg_advisory_xact_lock(%s)", (schema.CREATE_LOCK,))
            roles.grant(pg, role)
            pg.execute("COMMIT")
        except BaseException:
            if not pg.getautocommit():
                pg.execute("ROLLBACK")
            raise
        return {"role": role, "excess": roles.excess(pg, role)}

    def spaces(self, flt: Filter, after: str | None, limit: int) -> SpacePage:
        return listing.spaces(self.conn, flt, after, limit)

    def status(self, readable: Readable, sessions: tuple[bool, frozenset[int], str | None],
               with_path: bool) -> Status:  # fmt: skip
        seen = listing.Sessions(*sessions)
        kind = "off" if self.embeddings is None else str(self.embeddings.kind)
        out = listing.status(self.conn, self.sqlite_version, readable, seen, None, kind)
        out["schema_version"] = schema.VERSION
        if with_path:
            size = int(self.conn.run("SELECT pg_database_size(current_database())")[0][0])
            out = {"path": self.path, **out, "bytes": size}
        return out

    def close(self, *, checkpoint: bool = False, moved: bool = False) -> None:
        self.conn.close()


class PostgresSearch:
    """The team store's search: PostgreSQL's text search (postgres/search.py) for the ranked lists and their
    evidence; the rows listed, shaped and newest through the portable statements of sqlite/search.py."""

    __slots__ = ("_store",)

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @property
    def conn(self) -> Connection:
        return self._store.conn

    def full_text(self, words: list[str], flt: Filter, limit: int) -> list[Hit]:
        return search.hits(self.conn, words, flt, limit)

    def matching(self, words: list[str], flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
        return search.matching(self.conn, words, flt, limit)

    def newest(self, flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
        return portable.newest(self.conn, flt, limit)

    def ranked(self, words: list[str], flt: Filter) -> list[int]:
        return search.ranked(self.conn, words, flt)

    def near(self, words: list[str], ids: list[int], window: int) -> set[int]:
        return search.near(self.conn, words, ids, window)

    def held(self, words: list[str], ids: list[int], window: int) -> dict[int, tuple[int, int, int]]:
        return search.held(self.conn, words, ids, window)

    def counts(self, words: list[str], flt: Filter) -> tuple[int, list[int]]:
        return search.counts(self.conn, words, flt)

    def listed(self, words: list[str], ids: list[int], marked: set[int], flt: Filter) -> list[Hit]:
        return portable.listed(self.conn, words, ids, marked, flt)

    def shaped(self, ids: list[int], flt: Filter) -> list[MemoryRead]:
        return portable.shaped(self.conn, ids, flt)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around several calls (nothing new when one is open)."""
        with snapshot(self.conn):
            yield

    def compact(self, resume: bool) -> bool:
        """Nothing to do: PostgreSQL keeps its own indexes (autovacuum)."""
        return False


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
