"""The SQLite Store: one connection, and the repositories of `store/base.py` over it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import apsw

from hivemem.auth import Principal, Readable
from hivemem.records import (
    Captured,
    Challenged,
    ClientAdded,
    ClientPage,
    ClientRemoved,
    Deleted,
    Event,
    EventPage,
    History,
    Hit,
    MemoryPage,
    MemoryRead,
    Moved,
    Relating,
    Restored,
    Session,
    SessionEnded,
    SessionPage,
    SessionPurged,
    SessionStarted,
    SpacePage,
    Status,
    Written,
)
from hivemem.store.base import Keep, Visible
from hivemem.store.filters import Filter
from hivemem.store.hygiene import Scan
from hivemem.store.keys import ensure_owner_key
from hivemem.store.limits import Limits
from hivemem.store.sqlite import (
    audit,
    clients,
    erasure,
    fts_index,
    governance,
    hygiene,
    listing,
    memories,
    search,
    sessions,
    vectors,
)
from hivemem.store.sqlite.db import atomic, check_path, connect, keep_files_on_close, scalar, snapshot
from hivemem.store.sqlite.operations import SQLiteOperations


class SQLiteStore:
    """One connection to a store file, with the settings its verbs need. Tests and tools may reach `conn`;
    nothing above `store/` does."""

    def __init__(self, conn: apsw.Connection, path: str, limits: Limits, *, readonly: bool = False) -> None:
        self.conn = conn
        self.path = path
        self.limits = limits
        self.readonly = readonly
        self.embeddings: Any = None  # hivemem.search.vector.Runtime when a provider is on (set by the daemon)
        self._after_commit: list[Callable[[], None]] = []
        self._identity: tuple[int, int] | None = getattr(conn, "identity", None)
        self._memories = SQLiteMemories(self)
        self._sessions = SQLiteSessions(self)
        self._clients = SQLiteClients(self)
        self._events = SQLiteEvents(self)
        self._search = SQLiteSearch(self)
        self._operations = SQLiteOperations(self)
        self._governance = SQLiteGovernance(self)
        self._vectors = SQLiteVectors(self)

    @property
    def memories(self) -> SQLiteMemories:
        return self._memories

    @property
    def sessions(self) -> SQLiteSessions:
        return self._sessions

    @property
    def clients(self) -> SQLiteClients:
        return self._clients

    @property
    def events(self) -> SQLiteEvents:
        return self._events

    @property
    def search(self) -> SQLiteSearch:
        return self._search

    @property
    def operations(self) -> SQLiteOperations:
        return self._operations

    @property
    def governance(self) -> SQLiteGovernance:
        return self._governance

    @property
    def vectors(self) -> SQLiteVectors:
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

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One verb's change: a single transaction (the store functions it calls nest as savepoints).

        Steps registered with `after_commit` run once it has committed, and are dropped when it rolls back.
        """
        self._after_commit = []
        try:
            with atomic(self.conn, verb=True):
                yield
        except BaseException:
            self._after_commit = []
            raise
        steps, self._after_commit = self._after_commit, []
        for step in steps:
            step()

    def after_commit(self, step: Callable[[], None]) -> None:
        """Run `step` once the open transaction commits (at once when none is open): work outside the store
        file, such as scrubbing backups, or a checkpoint, which cannot run inside a transaction."""
        if self.conn.getautocommit():
            step()
        else:
            self._after_commit.append(step)

    def store_id(self) -> str:
        return str(scalar(self.conn, "SELECT value FROM meta WHERE key = 'store_id'"))

    def spaces(self, flt: Filter, after: str | None, limit: int) -> SpacePage:
        return cast(SpacePage, listing.spaces(self.conn, flt, after, limit))

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Only this daemon writes a SQLite store: its own commits wake its followers; nothing to watch."""
        return lambda: None

    def owner_key(self, path: str) -> str:
        """The key file at `path`, created (0600) at first start (SPEC 4.1)."""
        return ensure_owner_key(path)

    def status(self, readable: Readable, sessions: tuple[bool, frozenset[int], str | None],
               with_path: bool) -> Status:  # fmt: skip
        seen = listing.Sessions(*sessions)
        path = self.path if with_path else None
        kind = "off" if self.embeddings is None else str(self.embeddings.kind)
        return cast(Status, listing.status(self.conn, self.sqlite_version, readable, seen, path, kind))

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


class _Repository:
    __slots__ = ("_store",)

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    @property
    def conn(self) -> apsw.Connection:
        return self._store.conn


class SQLiteMemories(_Repository):
    __slots__ = ()

    def add(self, actor: Principal, p: dict[str, Any], session: int | None) -> Written:
        return cast(Written, memories.add(self.conn, self._store.limits, actor, p, session))

    def get(self, memory: int, include_deleted: bool) -> MemoryRead:
        return cast(MemoryRead, memories.get(self.conn, memory, include_deleted, self._store.embeddings_model))

    def version(self, memory: int, revision: int, include_deleted: bool) -> MemoryRead:
        return cast(MemoryRead, memories.get_version(self.conn, memory, revision, include_deleted))

    def update(self, actor: Principal, memory: int, p: dict[str, Any]) -> Written:
        return cast(Written, memories.update(self.conn, self._store.limits, actor, memory, p))

    def delete(self, actor: Principal, memory: int, revision: int) -> Deleted:
        return cast(Deleted, memories.delete(self.conn, self._store.limits, actor, memory, revision))

    def restore(self, actor: Principal, memory: int) -> Restored:
        return cast(Restored, memories.restore(self.conn, self._store.limits, actor, memory))

    def history(self, memory: int) -> History:
        return cast(History, memories.history(self.conn, memory))

    def purge(self, actor: Principal, memory: int) -> str:
        return memories.purge(self.conn, actor, memory)

    def erase_copies(self, memory: int) -> None:
        """The purged memory's text out of every backup and export, then out of the WAL (after the commit)."""
        directory = self._store.data_dir
        failures = erasure.scrub_backups(os.path.join(directory, "backups"), memory)
        erasure.scrub_exports(os.path.join(directory, "exports"), self._store.store_id(), memory)
        try:
            erasure.checkpoint(self.conn)
        finally:  # a backup that still holds the text outranks a checkpoint that will run at next start
            if failures:
                raise erasure.unscrubbed(memories.mid(memory), failures)

    def space_of(self, memory: int) -> str | None:
        return memories.space_of(self.conn, memory)

    def page(self, flt: Filter, after: int | None, limit: int) -> MemoryPage:
        return cast(MemoryPage, listing.list_memories(self.conn, flt, after, limit))

    def selection(self, flt: Filter, after: int | None, limit: int) -> list[tuple[int, int]]:
        return listing.selection(self.conn, flt, after, limit)

    def remove_tombstones(self, days: int) -> int:
        return memories.remove_tombstones(self.conn, days)


class SQLiteSessions(_Repository):
    __slots__ = ()

    def find(self, session: str, visible: Visible) -> tuple[int, str]:
        found = sessions.require(self.conn, session, visible)
        return int(found[0]), str(found[6])

    def get(self, session: str, visible: Visible) -> Session:
        return cast(Session, sessions.shape(sessions.require(self.conn, session, visible), self.conn, visible))

    def existing(self, harness: str, harness_session: str | None) -> int | None:
        return sessions.existing(self.conn, harness, harness_session)

    def lineage(self, n: int, visible: Visible) -> list[int]:
        return sessions.lineage(self.conn, n, visible)

    def start(self, actor: Principal, p: dict[str, Any]) -> SessionStarted:
        return cast(SessionStarted, sessions.start(self.conn, actor, p))

    def end(self, actor: Principal, n: int) -> SessionEnded:
        return cast(SessionEnded, sessions.end(self.conn, actor, n))

    def page(self, p: dict[str, Any], visible: Visible, after: int | None, limit: int) -> SessionPage:
        return cast(SessionPage, sessions.list_sessions(self.conn, p, visible, after, limit))

    def chain(self, n: int, visible: Visible) -> dict[str, Any]:
        return sessions.chain(self.conn, n, visible)

    def purge(self, actor: Principal, n: int) -> SessionPurged:
        return cast(SessionPurged, sessions.purge(self.conn, actor, n))


class SQLiteClients(_Repository):
    __slots__ = ()

    def authenticate(self, token: str, owner_key: str, unknown_grants: list[dict[str, str]]) -> Principal:
        return clients.authenticate(self.conn, token, owner_key, unknown_grants)

    def recheck(self, principal: Principal) -> None:
        clients.recheck(self.conn, principal)

    def add(self, actor: Principal, name: str, grants: list[dict[str, str]], ttl: int | None) -> ClientAdded:
        return cast(ClientAdded, clients.add_client(self.conn, actor, name, grants, ttl))

    def page(self, after: int | None, limit: int) -> ClientPage:
        return cast(ClientPage, clients.list_clients(self.conn, after, limit))

    def remove(self, actor: Principal, name: str) -> ClientRemoved:
        return cast(ClientRemoved, clients.remove_client(self.conn, actor, name))


class SQLiteEvents(_Repository):
    __slots__ = ()

    def page(self, keep: Keep, before: int | None, limit: int, types: tuple[str, ...],
             spaces: tuple[str, ...]) -> EventPage:  # fmt: skip
        """Newest first below `before`: a page of `limit`, and the id to pass as `before` for the next."""
        found = audit.list_events(self.conn, keep, before=before, limit=limit, types=types, spaces=spaces)
        page = found[:limit]
        return {"events": [cast(Event, audit.shown(e)) for e in page],
                "next": page[-1]["id"] if len(found) > limit else None}  # fmt: skip

    def after(self, keep: Keep, after: int, limit: int, types: tuple[str, ...],
              spaces: tuple[str, ...]) -> list[Event]:  # fmt: skip
        """Oldest first above `after`, at most `limit` + 1."""
        found = audit.list_events(self.conn, keep, after=after, limit=limit, types=types, spaces=spaces)
        return [cast(Event, audit.shown(e)) for e in found]

    def newest(self) -> int:
        return int(scalar(self.conn, "SELECT COALESCE(MAX(id), 0) FROM events"))

    def recalled(self, actor: Principal, query_sha256: str, hits: list[dict[str, Any]]) -> None:
        """One `memory.recalled` event per hit, together (SPEC 8.5)."""
        with atomic(self.conn):
            for hit in hits:
                data = {"query_sha256": query_sha256, "hash": "sha256", "score": hit["score"], "space": hit["space"]}
                memory = int(hit["id"][1:])
                audit.append(self.conn, "memory.recalled", actor, space=hit["space"], memory=memory, data=data)


class SQLiteSearch(_Repository):
    __slots__ = ()

    def full_text(self, words: list[str], flt: Filter, limit: int) -> list[Hit]:
        """The best `limit` memories, best first, as list items whose snippet marks the matched terms."""
        return cast(list[Hit], search.hits(self.conn, words, flt, limit))

    def matching(self, words: list[str], flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
        return search.matching(self.conn, words, flt, limit)

    def newest(self, flt: Filter, limit: int) -> tuple[list[dict[str, Any]], int]:
        return search.newest(self.conn, flt, limit)

    def ranked(self, words: list[str], flt: Filter) -> list[int]:
        """The full-text list: at most LIST_MAX memory ids, best first."""
        return search.ranked(self.conn, words, flt)

    def near(self, words: list[str], ids: list[int], window: int) -> set[int]:
        """Those of the memories holding two of the terms close together (recall's relevance floor)."""
        return search.near(self.conn, words, ids, window)

    def listed(self, words: list[str], ids: list[int], marked: set[int], flt: Filter) -> list[Hit]:
        return cast(list[Hit], search.listed(self.conn, words, ids, marked, flt))

    def shaped(self, ids: list[int], flt: Filter) -> list[dict[str, Any]]:
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


class SQLiteVectors(_Repository):
    __slots__ = ()

    def pending(self, limit: int, skip: Sequence[int]) -> list[tuple[int, str, str, bytes]]:
        return vectors.pending(self.conn, limit, skip)

    def put(self, model: str, items: Sequence[tuple[int, str, bytes, Sequence[float]]]) -> list[int]:
        return vectors.put(self.conn, model, items)

    def width(self, model: str) -> int:
        return vectors.width(self.conn, model)

    def drop_other_models(self, model: str) -> int:
        return vectors.drop_other_models(self.conn, model)

    def drop_all(self) -> int:
        return vectors.drop_all(self.conn)

    def pending_count(self) -> int:
        return vectors.pending_count(self.conn)

    def load(self, model: str, memories: Sequence[int] | None = None) -> list[tuple[int, str, bytes]]:
        return vectors.load(self.conn, model, memories)

    def page(self, model: str, after: int, limit: int) -> list[tuple[int, str, bytes]]:
        return vectors.page(self.conn, model, after, limit)

    def count(self, model: str) -> int:
        return vectors.model_count(self.conn, model)

    def admitted(self, model: str, ids: Sequence[int], flt: Filter) -> dict[int, bytes]:
        return vectors.admitted(self.conn, model, ids, flt)


class SQLiteGovernance(_Repository):
    __slots__ = ()

    def capture(self, actor: Principal, p: dict[str, Any], session: int | None, flt: Filter) -> Captured:
        return cast(Captured, governance.capture(self.conn, self._store.limits, actor, p, session, flt))

    def confirm(self, actor: Principal, memory: int, p: dict[str, Any]) -> Written:
        return cast(Written, governance.confirm(self.conn, self._store.limits, actor, memory, p))

    def review(self, flt: Filter, after: int | None, limit: int) -> MemoryPage:
        return cast(MemoryPage, governance.review(self.conn, flt, after, limit))

    def challenge(self, actor: Principal, memory: int, p: dict[str, Any], replacement: int | None) -> Challenged:
        return cast(Challenged, governance.challenge(self.conn, self._store.limits, actor, memory, p, replacement))

    def archive(self, actor: Principal, memory: int, revision: int) -> Restored:
        return cast(Restored, governance.archive(self.conn, self._store.limits, actor, memory, revision))

    def relate(self, actor: Principal, source: int, target: int, relation: str, reason: str | None) -> Relating:
        return cast(Relating, governance.relate(self.conn, actor, source, target, relation, reason))

    def unrelate(self, actor: Principal, source: int, target: int, relation: str) -> Relating:
        return cast(Relating, governance.unrelate(self.conn, actor, source, target, relation))

    def move(self, actor: Principal, memory: int, revision: int, space: str) -> Moved:
        return cast(Moved, governance.move(self.conn, self._store.limits, actor, memory, revision, space))

    def audit(self, memory: int, before: int | None, limit: int) -> EventPage:
        return cast(EventPage, governance.audit_events(self.conn, memory, before, limit))

    def audited_space(self, memory: int) -> str | None:
        return governance.audited_space(self.conn, memory)

    def live_space(self, memory: int) -> str | None:
        return governance.live_space(self.conn, memory)

    def hygiene(self, flt: Filter) -> Scan:
        return hygiene.scan(self.conn, flt)
