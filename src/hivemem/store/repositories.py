"""The repositories both backends hold (docs/architecture.md, docs/decisions.md D366): memories, sessions, clients,
events, governance and vectors, and a verb's transaction. Their code runs unchanged on SQLite and on the team store
because it calls the portable statement modules through `store/connection.py`'s Protocol. Each store composes them
with what is its own: how a change is run (`Change`: once on SQLite, again after a lost race on the team store), how
a purged memory's copies are erased, and its search and operations repositories, which are the backend's classes.

The portable statement modules still live in `store/sqlite/` (memories, sessions, clients, audit, governance,
listing, vectors, hygiene, and `db.py`'s atomic() and snapshot()): they were written there first, and the team
store runs them through its connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import ParamSpec, Protocol, TypeVar

from hivemem.auth import Principal
from hivemem.records import (
    Captured,
    Chain,
    Challenged,
    ClientAdded,
    ClientPage,
    ClientRemoved,
    Deleted,
    Event,
    EventPage,
    History,
    MemoryPage,
    MemoryRead,
    Moved,
    Relating,
    Restored,
    SearchHit,
    Session,
    SessionEnded,
    SessionPage,
    SessionPurged,
    SessionStarted,
    Written,
)
from hivemem.store.base import Keep, MemoryChange, NewMemory, NewSession, SessionQuery, Visible
from hivemem.store.connection import Connection, Lock, scalar
from hivemem.store.filters import Filter
from hivemem.store.hygiene import Scan
from hivemem.store.limits import Limits
from hivemem.store.sqlite import audit, clients, governance, hygiene, listing, memories, sessions, vectors
from hivemem.store.sqlite.db import atomic

P = ParamSpec("P")
R = TypeVar("R")


class Host(Protocol):
    """What the shared repositories read of the store that holds them (SQLiteStore and PostgresStore are each one)."""

    @property
    def conn(self) -> Connection: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def embeddings_model(self) -> str | None: ...


class Change(Protocol):
    """How a store runs one writing call of a repository, a single atomic() block: `once` on SQLite, whose one
    writer loses no race; on the team store, again after the database settled a race against it (D209, D360)."""

    def __call__(self, change: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R: ...


def once(change: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    return change(*args, **kwargs)


class Transaction:
    """A verb's transaction on the store's connection (the calls inside it nest as savepoints), and the steps to
    run once it commits."""

    __slots__ = ("_after", "_host")

    def __init__(self, host: Host) -> None:
        self._host = host
        self._after: list[Callable[[], None]] = []

    @contextmanager
    def verb(self) -> Iterator[None]:
        """One verb's change. Steps registered with `after_commit` run once it has committed, and are dropped when
        it rolls back."""
        self._after = []
        try:
            with atomic(self._host.conn, verb=True):
                yield
        except BaseException:
            self._after = []
            raise
        steps, self._after = self._after, []
        for step in steps:
            step()

    def after_commit(self, step: Callable[[], None]) -> None:
        """Run `step` once the open transaction commits (at once when none is open)."""
        if self._host.conn.getautocommit():
            step()
        else:
            self._after.append(step)


class _Repository:
    __slots__ = ("_change", "_store")

    def __init__(self, store: Host, change: Change = once) -> None:
        self._store = store
        self._change = change

    @property
    def conn(self) -> Connection:
        return self._store.conn


class Memories(_Repository):
    """`erase` takes a purged memory's text out of the copies the backend keeps outside its rows (after the
    commit): SQLite's backups, exports and WAL; the team store's exports."""

    __slots__ = ("_erase",)

    def __init__(self, store: Host, change: Change, erase: Callable[[int], None]) -> None:
        super().__init__(store, change)
        self._erase = erase

    def add(self, actor: Principal, new: NewMemory, session: int | None) -> Written:
        return self._change(memories.add, self.conn, self._store.limits, actor, new, session)

    def get(self, memory: int, include_deleted: bool) -> MemoryRead:
        return memories.get(self.conn, memory, include_deleted, self._store.embeddings_model)

    def version(self, memory: int, revision: int, include_deleted: bool) -> MemoryRead:
        return memories.get_version(self.conn, memory, revision, include_deleted)

    def update(self, actor: Principal, memory: int, revision: int, change: MemoryChange) -> Written:
        return self._change(memories.update, self.conn, self._store.limits, actor, memory, revision, change)

    def delete(self, actor: Principal, memory: int, revision: int) -> Deleted:
        return self._change(memories.delete, self.conn, self._store.limits, actor, memory, revision)

    def restore(self, actor: Principal, memory: int) -> Restored:
        return self._change(memories.restore, self.conn, self._store.limits, actor, memory)

    def history(self, memory: int) -> History:
        return memories.history(self.conn, memory)

    def purge(self, actor: Principal, memory: int) -> str:
        return self._change(memories.purge, self.conn, actor, memory)

    def erase_copies(self, memory: int) -> None:
        self._erase(memory)

    def space_of(self, memory: int) -> str | None:
        return memories.space_of(self.conn, memory)

    def holding(self, space: str, digest: bytes) -> int | None:
        return memories.holding(self.conn, space, digest)

    def page(self, flt: Filter, after: int | None, limit: int) -> MemoryPage:
        return listing.list_memories(self.conn, flt, after, limit)

    def selection(self, flt: Filter, after: int | None, limit: int) -> list[tuple[int, int]]:
        return listing.selection(self.conn, flt, after, limit)

    def remove_tombstones(self, days: int) -> int:
        return memories.remove_tombstones(self.conn, days)


class Sessions(_Repository):
    __slots__ = ()

    def find(self, session: str, visible: Visible) -> tuple[int, str]:
        # the session a request names: a verb that writes in it holds it to its end (D208)
        found = sessions.require(self.conn, session, visible, Lock.ROW)
        return int(found[0]), str(found[6])

    def get(self, session: str, visible: Visible) -> Session:
        return sessions.shape(sessions.require(self.conn, session, visible), self.conn, visible)

    def existing(self, harness: str, harness_session: str | None) -> int | None:
        return sessions.existing(self.conn, harness, harness_session)

    def lineage(self, n: int, visible: Visible) -> list[int]:
        return sessions.lineage(self.conn, n, visible)

    def start(self, actor: Principal, new: NewSession) -> SessionStarted:
        return self._change(sessions.start, self.conn, actor, new)

    def end(self, actor: Principal, n: int) -> SessionEnded:
        return self._change(sessions.end, self.conn, actor, n)

    def page(self, query: SessionQuery, visible: Visible, after: int | None, limit: int) -> SessionPage:
        return sessions.list_sessions(self.conn, query, visible, after, limit)

    def chain(self, n: int, visible: Visible) -> Chain:
        return sessions.chain(self.conn, n, visible)

    def purge(self, actor: Principal, n: int) -> SessionPurged:
        return self._change(sessions.purge, self.conn, actor, n)


class Clients(_Repository):
    __slots__ = ()

    def authenticate(self, token: str, owner_key: str, unknown_grants: list[dict[str, str]]) -> Principal:
        return clients.authenticate(self.conn, token, owner_key, unknown_grants)

    def recheck(self, principal: Principal) -> None:
        clients.recheck(self.conn, principal)

    def add(self, actor: Principal, name: str, grants: list[dict[str, str]], ttl: int | None) -> ClientAdded:
        return self._change(clients.add_client, self.conn, actor, name, grants, ttl)

    def page(self, after: int | None, limit: int) -> ClientPage:
        return clients.list_clients(self.conn, after, limit)

    def remove(self, actor: Principal, name: str) -> ClientRemoved:
        return self._change(clients.remove_client, self.conn, actor, name)


def _recalled(conn: Connection, actor: Principal, query_sha256: str, hits: Sequence[SearchHit]) -> None:
    with atomic(conn):
        for hit in hits:
            data = {"query_sha256": query_sha256, "hash": "sha256", "score": hit["score"], "space": hit["space"]}
            memory = int(hit["id"][1:])
            audit.append(conn, "memory.recalled", actor, space=hit["space"], memory=memory, data=data)


class Events(_Repository):
    __slots__ = ()

    def page(self, keep: Keep, before: int | None, limit: int, types: tuple[str, ...],
             spaces: tuple[str, ...]) -> EventPage:  # fmt: skip
        """Newest first below `before`: a page of `limit`, and the id to pass as `before` for the next."""
        found = audit.list_events(self.conn, keep, before=before, limit=limit, types=types, spaces=spaces)
        events = [audit.shown(e) for e in found[:limit]]
        return {"events": events, "next": events[-1]["id"] if len(found) > limit else None}

    def after(self, keep: Keep, after: int, limit: int, types: tuple[str, ...],
              spaces: tuple[str, ...]) -> list[Event]:  # fmt: skip
        """Oldest first above `after`, at most `limit` + 1."""
        found = audit.list_events(self.conn, keep, after=after, limit=limit, types=types, spaces=spaces)
        return [audit.shown(e) for e in found]

    def newest(self) -> int:
        return int(scalar(self.conn, "SELECT COALESCE(MAX(id), 0) FROM events"))

    def recalled(self, actor: Principal, query_sha256: str, hits: Sequence[SearchHit]) -> None:
        """One `memory.recalled` event per hit, together (docs/governance.md)."""
        self._change(_recalled, self.conn, actor, query_sha256, hits)


class Vectors(_Repository):
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


class Governance(_Repository):
    __slots__ = ()

    def capture(self, actor: Principal, new: NewMemory, session: int | None, flt: Filter) -> Captured:
        return self._change(governance.capture, self.conn, self._store.limits, actor, new, session, flt)

    def confirm(self, actor: Principal, memory: int, revision: int, change: MemoryChange) -> Written:
        return self._change(governance.confirm, self.conn, self._store.limits, actor, memory, revision, change)

    def review(self, flt: Filter, after: int | None, limit: int) -> MemoryPage:
        return governance.review(self.conn, flt, after, limit)

    def challenge(self, actor: Principal, memory: int, revision: int, outcome: str, reason: str | None,
                  confirm: bool, replacement: int | None) -> Challenged:  # fmt: skip
        limits = self._store.limits
        return self._change(governance.challenge, self.conn, limits, actor, memory, revision, outcome, reason,
                            confirm, replacement)  # fmt: skip

    def archive(self, actor: Principal, memory: int, revision: int) -> Restored:
        limits = self._store.limits
        return self._change(governance.archive, self.conn, limits, actor, memory, revision)

    def relate(self, actor: Principal, source: int, target: int, relation: str, reason: str | None) -> Relating:
        return self._change(governance.relate, self.conn, actor, source, target, relation, reason)

    def unrelate(self, actor: Principal, source: int, target: int, relation: str) -> Relating:
        return self._change(governance.unrelate, self.conn, actor, source, target, relation)

    def move(self, actor: Principal, memory: int, revision: int, space: str) -> Moved:
        limits = self._store.limits
        return self._change(governance.move, self.conn, limits, actor, memory, revision, space)

    def audit(self, memory: int, before: int | None, limit: int) -> EventPage:
        return governance.audit_events(self.conn, memory, before, limit)

    def audited_space(self, memory: int) -> str | None:
        return governance.audited_space(self.conn, memory)

    def live_space(self, memory: int) -> str | None:
        return governance.live_space(self.conn, memory)

    def hygiene(self, flt: Filter) -> Scan:
        return hygiene.scan(self.conn, flt)
