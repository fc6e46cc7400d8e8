"""The SQLite Store: one connection to a store file, composed of the shared repositories (`store/repositories.py`)
and SQLite's own search and operations (docs/architecture.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import apsw

from hivemem.auth import Readable
from hivemem.records import Hit, MemoryRead, SpacePage, Status
from hivemem.store import repositories
from hivemem.store.filters import Filter
from hivemem.store.keys import ensure_owner_key
from hivemem.store.limits import Limits
from hivemem.store.sqlite import erasure, fts_index, listing, memories, search
from hivemem.store.sqlite.db import Connection, check_path, connect, keep_files_on_close, scalar, snapshot
from hivemem.store.sqlite.operations import SQLiteOperations


class SQLiteStore:
    """One connection to a store file, with the settings its verbs need. Tests and tools may reach `conn`;
    nothing above `store/` does."""

    def __init__(self, conn: Connection, path: str, limits: Limits, *, readonly: bool = False) -> None:
        self.conn = conn
        self.path = path
        self.limits = limits
        self.readonly = readonly
        self.embeddings: Any = None  # hivemem.search.vector.Runtime when a provider is on (set by the daemon)
        self._identity: tuple[int, int] | None = getattr(conn, "identity", None)
        self._transaction = repositories.Transaction(self)
        self._memories = repositories.Memories(self, repositories.once, self._erase_copies)
        self._sessions = repositories.Sessions(self)
        self._clients = repositories.Clients(self)
        self._events = repositories.Events(self)
        self._search = SQLiteSearch(self)
        self._operations = SQLiteOperations(self)
        self._governance = repositories.Governance(self)
        self._vectors = repositories.Vectors(self)

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
    def search(self) -> SQLiteSearch:
        return self._search

    @property
    def operations(self) -> SQLiteOperations:
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
        return os.path.dirname(self.path)

    @property
    def sqlite_version(self) -> str:
        return str(apsw.sqlite_lib_version())

    def reader(self) -> SQLiteStore:
        """Another, read-only connection to the same file (the daemon's reader threads each hold one), with
        this store's embeddings; `failed.store_moved` when the path no longer names the file this store opened
        for writing."""
        check_path(self.path, self._identity)  # read here: the writer's connection belongs to its thread
        reader = SQLiteStore(connect(self.path, readonly=True), self.path, self.limits, readonly=True)
        reader.embeddings = self.embeddings
        return reader

    def transaction(self) -> AbstractContextManager[None]:
        """One verb's change: a single transaction (the store functions it calls nest as savepoints).

        Steps registered with `after_commit` run once it has committed, and are dropped when it rolls back.
        """
        return self._transaction.verb()

    def after_commit(self, step: Callable[[], None]) -> None:
        """Run `step` once the open transaction commits (at once when none is open): work outside the store
        file, such as scrubbing backups, or a checkpoint, which cannot run inside a transaction."""
        self._transaction.after_commit(step)

    def _erase_copies(self, memory: int) -> None:
        """A purged memory's text out of every backup and export, then out of the WAL (after the commit)."""
        directory = self.data_dir
        failures = erasure.scrub_backups(os.path.join(directory, "backups"), memory)
        erasure.scrub_exports(os.path.join(directory, "exports"), self.store_id(), memory)
        try:
            erasure.checkpoint(self.conn)
        finally:  # a backup that still holds the text outranks a checkpoint that will run at next start
            if failures:
                raise erasure.unscrubbed(memories.mid(memory), failures)

    def store_id(self) -> str:
        return str(scalar(self.conn, "SELECT value FROM meta WHERE key = 'store_id'"))

    def spaces(self, flt: Filter, after: str | None, limit: int) -> SpacePage:
        return listing.spaces(self.conn, flt, after, limit)

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Only this daemon writes a SQLite store: its own commits wake its followers; nothing to watch."""
        return lambda: None

    def owner_key(self, path: str) -> str:
        """The key file at `path`, created (0600) at first start (docs/security.md)."""
        return ensure_owner_key(path)

    def status(self, readable: Readable, sessions: tuple[bool, frozenset[int], str | None],
               with_path: bool) -> Status:  # fmt: skip
        seen = listing.Sessions(*sessions)
        path = self.path if with_path else None
        kind = "off" if self.embeddings is None else str(self.embeddings.kind)
        return listing.status(self.conn, self.sqlite_version, readable, seen, path, kind)

    def close(self, *, checkpoint: bool = False, moved: bool = False) -> None:
        """Close the connection; with `checkpoint`, empty the WAL first (keeping the -wal and -shm names, which
        may belong to the file now at the path, when the store file `moved`)."""
        if checkpoint:
            try:
                if moved:
                    keep_files_on_close(self.conn)
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.Error:
                pass  # the checkpoint runs again at the next start
        self.conn.close()


class SQLiteSearch:
    """SQLite's search: FTS5's ranking, snippets and index upkeep (sqlite/search.py, fts5.py, fts_index.py)."""

    __slots__ = ("_store",)

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    @property
    def conn(self) -> Connection:
        return self._store.conn

    def full_text(self, words: list[str], flt: Filter, limit: int) -> list[Hit]:
        """The best `limit` memories, best first, as list items whose snippet marks the matched terms."""
        return search.hits(self.conn, words, flt, limit)

    def matching(self, words: list[str], flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
        return search.matching(self.conn, words, flt, limit)

    def newest(self, flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
        return search.newest(self.conn, flt, limit)

    def ranked(self, words: list[str], flt: Filter) -> list[int]:
        """The full-text list: at most LIST_MAX memory ids, best first."""
        return search.ranked(self.conn, words, flt)

    def near(self, words: list[str], ids: list[int], window: int) -> set[int]:
        """Those of the memories holding two of the terms close together (recall's relevance floor)."""
        return search.near(self.conn, words, ids, window)

    def held(self, words: list[str], ids: list[int], window: int) -> dict[int, tuple[int, int, int]]:
        """Which terms each memory holds, and which lie close to another (recall's evidence)."""
        return search.held(self.conn, words, ids, window)

    def counts(self, words: list[str], flt: Filter) -> tuple[int, list[int]]:
        """Memories the filter admits, and how many of them hold each term."""
        return search.counts(self.conn, words, flt)

    def listed(self, words: list[str], ids: list[int], marked: set[int], flt: Filter) -> list[Hit]:
        return search.listed(self.conn, words, ids, marked, flt)

    def shaped(self, ids: list[int], flt: Filter) -> list[MemoryRead]:
        return search.shaped(self.conn, ids, flt)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around several calls (nothing new when one is open)."""
        with snapshot(self.conn):
            yield

    def compact(self, resume: bool) -> bool:
        """One bounded step of keeping the full-text index in few segments (the writer, when idle); True while
        work remains."""
        return fts_index.merge_step(self.conn, resume)
