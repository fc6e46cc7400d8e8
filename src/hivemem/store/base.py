"""The Store interface: everything ops may ask of a backend, in backend-neutral terms (docs/architecture.md).

A backend (`store/sqlite/`, or `store/postgres/` for a team store) implements these protocols; nothing above
`store/` knows which one runs. Arguments are principals and filters (`hivemem.auth`, `store/filters.py`), memory and
session numbers, and the validated params of a verb; results are the wire records of `hivemem.records`. A backend
owns its connections: no caller ever holds one. Every method that writes runs inside the verb's `transaction()` when
one is open (a nested change is a savepoint), and on its own otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from hivemem.auth import Principal, Readable
from hivemem.records import (
    BackupMade,
    Captured,
    Chain,
    Challenged,
    CheckReport,
    ClientAdded,
    ClientPage,
    ClientRemoved,
    Deleted,
    Event,
    EventPage,
    Exported,
    History,
    Hit,
    Imported,
    MemoryPage,
    MemoryRead,
    Moved,
    Relating,
    Repair,
    Restored,
    SearchHit,
    Session,
    SessionEnded,
    SessionPage,
    SessionPurged,
    SessionStarted,
    SpacePage,
    Status,
    Written,
)
from hivemem.store.filters import Filter
from hivemem.store.hygiene import Scan
from hivemem.store.limits import Limits
from hivemem.store.transfer_check import Document

Provenance = Mapping[str, object]  # a memory's bounded provenance claim (docs/verbs.md), a JSON object


class Encoded(str):
    """A provenance already written as the memories row keeps it (a bulk caller encodes each one once)."""


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to write at revision 1 (memory.add, memory.capture, memory.move, store.import): its space, text
    and the members its writer gave; None is a member not given, which the store fills in (kind `note`, no title,
    confidence 1.0, the kind's review time). `provenance` may be Encoded already (by a bulk import)."""

    space: str
    content: str
    kind: str | None = None
    title: str | None = None
    tags: Sequence[str] = ()
    source: str | None = None
    provenance: Provenance | Encoded | None = None
    confidence: float | None = None
    confidence_state: str | None = None
    review_after: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryChange:
    """The members memory.update (or memory.confirm) changes: None is a member not given, left as it is; an empty
    `source`, `confidence_state`, `review_after` or `expires_at`, or an empty `provenance`, clears it
    (docs/verbs.md)."""

    content: str | None = None
    kind: str | None = None
    title: str | None = None
    tags: Sequence[str] | None = None
    source: str | None = None
    provenance: Provenance | None = None
    confidence: float | None = None
    confidence_state: str | None = None
    review_after: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True, slots=True)
class NewSession:
    """A session to record (session.start): its harness and what its reporter claims of it (docs/hooks.md)."""

    harness: str
    harness_session: str | None = None
    parent: str | None = None  # a session id, `s<N>`
    relation: str | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class SessionQuery:
    """session.list's filters: a member None is no filter."""

    harness: str | None = None
    harness_session: str | None = None
    parent: str | None = None  # a session id, `s<N>`


Visible = Callable[[int, str], bool]  # (session number, reporter principal) -> may the caller read it?
Keep = Callable[[dict[str, object]], bool]  # an event, every member present -> may the caller see it?


class Memories(Protocol):
    """Memory rows, their versions, full-text entries and events, changed together."""

    def add(self, actor: Principal, new: NewMemory, session: int | None) -> Written: ...
    def get(self, memory: int, include_deleted: bool) -> MemoryRead: ...
    def version(self, memory: int, revision: int, include_deleted: bool) -> MemoryRead: ...
    def update(self, actor: Principal, memory: int, revision: int, change: MemoryChange) -> Written: ...
    def delete(self, actor: Principal, memory: int, revision: int) -> Deleted: ...
    def restore(self, actor: Principal, memory: int) -> Restored: ...
    def history(self, memory: int) -> History: ...
    def purge(self, actor: Principal, memory: int) -> str: ...
    def erase_copies(self, memory: int) -> None: ...
    def space_of(self, memory: int) -> str | None: ...
    def holding(self, space: str, digest: bytes) -> int | None: ...
    def page(self, flt: Filter, after: int | None, limit: int) -> MemoryPage: ...
    def selection(self, flt: Filter, after: int | None, limit: int) -> list[tuple[int, int]]: ...
    def remove_tombstones(self, days: int) -> int: ...


class Sessions(Protocol):
    """Session lineage (docs/verbs.md). `find` answers (number, reporter) of a session the caller can read."""

    def find(self, session: str, visible: Visible) -> tuple[int, str]: ...
    def get(self, session: str, visible: Visible) -> Session: ...
    def existing(self, harness: str, harness_session: str | None) -> int | None: ...
    def lineage(self, n: int, visible: Visible) -> list[int]: ...
    def start(self, actor: Principal, new: NewSession) -> SessionStarted: ...
    def end(self, actor: Principal, n: int) -> SessionEnded: ...
    def page(self, query: SessionQuery, visible: Visible, after: int | None, limit: int) -> SessionPage: ...
    def chain(self, n: int, visible: Visible) -> Chain: ...
    def purge(self, actor: Principal, n: int) -> SessionPurged: ...


class Clients(Protocol):
    """Client principals and their tokens (docs/security.md); the token itself is returned once and never kept."""

    def authenticate(self, token: str, owner_key: str, unknown_grants: list[dict[str, str]]) -> Principal: ...
    def recheck(self, principal: Principal) -> None: ...
    def add(self, actor: Principal, name: str, grants: list[dict[str, str]], ttl: int | None) -> ClientAdded: ...
    def page(self, after: int | None, limit: int) -> ClientPage: ...
    def remove(self, actor: Principal, name: str) -> ClientRemoved: ...


class Events(Protocol):
    """The audit log (docs/governance.md): appended by the other repositories, read here."""

    def page(self, keep: Keep, before: int | None, limit: int, types: tuple[str, ...],
             spaces: tuple[str, ...]) -> EventPage: ...  # fmt: skip
    def after(self, keep: Keep, after: int, limit: int, types: tuple[str, ...],
              spaces: tuple[str, ...]) -> list[Event]: ...  # fmt: skip
    def newest(self) -> int: ...
    def recalled(self, actor: Principal, query_sha256: str, hits: Sequence[SearchHit]) -> None: ...


class Vectors(Protocol):
    """Stored embeddings (docs/schema.md, docs/embeddings.md): the worker's pending memories and their vectors, the
    vector list's candidates, and `embeddings.reindex`."""

    def pending(self, limit: int, skip: Sequence[int]) -> list[tuple[int, str, str, bytes]]: ...
    def put(self, model: str, items: Sequence[tuple[int, str, bytes, Sequence[float]]]) -> list[int]: ...
    def width(self, model: str) -> int: ...
    def drop_other_models(self, model: str) -> int: ...
    def drop_all(self) -> int: ...
    def pending_count(self) -> int: ...
    def load(self, model: str, memories: Sequence[int] | None = None) -> list[tuple[int, str, bytes]]: ...
    def page(self, model: str, after: int, limit: int) -> list[tuple[int, str, bytes]]: ...
    def count(self, model: str) -> int: ...
    def admitted(self, model: str, ids: Sequence[int], flt: Filter) -> dict[int, bytes]: ...


class Search(Protocol):
    """The lists of docs/embeddings.md and recall's selections; ranking is the backend's, exactly as that says."""

    def full_text(self, words: list[str], flt: Filter, limit: int) -> list[Hit]: ...
    def matching(self, words: list[str], flt: Filter, limit: int) -> tuple[list[MemoryRead], int]: ...
    def newest(self, flt: Filter, limit: int) -> tuple[list[MemoryRead], int]: ...
    def ranked(self, words: list[str], flt: Filter) -> list[int]: ...
    def near(self, words: list[str], ids: list[int], window: int) -> set[int]: ...
    def held(self, words: list[str], ids: list[int], window: int) -> dict[int, tuple[int, int, int]]: ...
    def counts(self, words: list[str], flt: Filter) -> tuple[int, list[int]]: ...
    def listed(self, words: list[str], ids: list[int], marked: set[int], flt: Filter) -> list[Hit]: ...
    def shaped(self, ids: list[int], flt: Filter) -> list[MemoryRead]: ...
    def snapshot(self) -> AbstractContextManager[None]: ...
    def compact(self, resume: bool) -> bool: ...  # one idle-time step of index upkeep; True: more to do


class Operations(Protocol):
    """Export, import, integrity, repair and backup (docs/operations.md): files the daemon writes and reads itself."""

    def export(self, actor: Principal, dest: str, keep: Callable[[str, int], bool], spaces: list[str] | None,
               include_deleted: bool, sessions: Visible | None) -> Exported: ...  # fmt: skip
    def import_document(self, actor: Principal, doc: Document, dry_run: bool) -> Imported: ...
    def check(self) -> CheckReport: ...
    def repair_fts(self, apply: bool) -> Repair: ...
    def backup(self, dest: str) -> BackupMade: ...


class Governance(Protocol):
    """Drafts, review, challenges, archive, relations, move and a memory's audit (docs/governance.md)."""

    def capture(self, actor: Principal, new: NewMemory, session: int | None, flt: Filter) -> Captured: ...
    def confirm(self, actor: Principal, memory: int, revision: int, change: MemoryChange) -> Written: ...
    def review(self, flt: Filter, after: int | None, limit: int) -> MemoryPage: ...
    def challenge(self, actor: Principal, memory: int, revision: int, outcome: str, reason: str | None,
                  confirm: bool, replacement: int | None) -> Challenged: ...  # fmt: skip
    def archive(self, actor: Principal, memory: int, revision: int) -> Restored: ...
    def relate(self, actor: Principal, source: int, target: int, relation: str,
               reason: str | None) -> Relating: ...  # fmt: skip
    def unrelate(self, actor: Principal, source: int, target: int, relation: str) -> Relating: ...
    def move(self, actor: Principal, memory: int, revision: int, space: str) -> Moved: ...
    def audit(self, memory: int, before: int | None, limit: int) -> EventPage: ...
    def audited_space(self, memory: int) -> str | None: ...
    def live_space(self, memory: int) -> str | None: ...
    def hygiene(self, flt: Filter) -> Scan: ...  # memory.hygiene's rows, relations and recall times, one snapshot


class Embeddings(Protocol):
    """What a store reads of the search side's embeddings (hivemem.search.vector.Runtime): the configured
    provider's kind for `store.status`, and the model whose vectors `memory.get` reports on. Ops takes the
    runtime itself from the store by type (docs/decisions.md D370)."""

    kind: str

    @property
    def model(self) -> str: ...


class Store(Protocol):
    """One store: its repositories, its settings, and the verb's transaction."""

    path: str
    limits: Limits
    readonly: bool
    # The search side's embeddings (hivemem.search.vector.Runtime) when a provider is on, set by the daemon
    # and shared by its readers; the store sits below search in the layers, so it names only what it reads.
    embeddings: Embeddings | None

    @property
    def memories(self) -> Memories: ...
    @property
    def sessions(self) -> Sessions: ...
    @property
    def clients(self) -> Clients: ...
    @property
    def events(self) -> Events: ...
    @property
    def search(self) -> Search: ...
    @property
    def operations(self) -> Operations: ...
    @property
    def governance(self) -> Governance: ...
    @property
    def vectors(self) -> Vectors: ...
    @property
    def data_dir(self) -> str: ...
    def reader(self) -> Store: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def after_commit(self, step: Callable[[], None]) -> None: ...
    def store_id(self) -> str: ...
    def owner_key(self, path: str) -> str: ...  # the owner key this machine accepts (its file at `path`)
    # Call `wake` (from another thread) whenever another process may have committed; returns the stop.
    def watch(self, wake: Callable[[], None]) -> Callable[[], None]: ...
    def spaces(self, flt: Filter, after: str | None, limit: int) -> SpacePage: ...
    def status(self, readable: Readable, sessions: tuple[bool, frozenset[int], str | None],
               with_path: bool) -> Status: ...  # fmt: skip
    def close(self, *, checkpoint: bool = False, moved: bool = False) -> None: ...
