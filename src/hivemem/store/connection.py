"""The connection the portable statement modules run on, as they use it (docs/decisions.md D355), the locks a
statement declares when its verb goes on to write what it reads (D356), and the reads built on both. SQLite's
APSW connection (`sqlite/db.py`) and the team store's psycopg one (`postgres/conn.py`) are each one."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Row = tuple[Any, ...]  # a result row: its cells as the driver reads them (the statement knows their types)
Value = str | int | float | bytes | None  # a value a statement binds (both drivers take these)
Args = Sequence[Value]


class Lock(enum.Enum):
    """What a read inside a verb's transaction holds to the transaction's end, because the verb goes on to write
    what it read, or relies on it staying as read. SQLite's writer already holds the whole file (`BEGIN
    IMMEDIATE`), so there each is a no-op; the team store takes it (docs/team.md)."""

    ROW = "row"  # the rows read, for update: another writer of one of them waits
    SHARE = "share"  # the rows read, unchanged by anyone else: another writer of one of them waits
    STORE = "store"  # every other writer waits (the event chain's lock), from this statement on
    IMPORT = "import"  # no other writer changes any memory (reads go on): ids and duplicates planned stay true
    EXPORT = "export"  # memories, their relations and sessions unchanged: what is read is one state


class Key:
    """A value no row holds yet, looked up before it is inserted: two writers looking up one value take turns
    (`kind` names what the value is, so unrelated values of equal text do not wait for each other)."""

    __slots__ = ("kind", "values")

    def __init__(self, kind: str, *values: Value) -> None:
        self.kind, self.values = kind, values

    def __repr__(self) -> str:
        return f"Key({self.kind!r}, ...)"


Locking = Lock | Key


@dataclass(frozen=True, slots=True)
class Dialect:
    """The statements the backends spell differently, asked for by name (D358); each backend's connection has
    its own (`sqlite/db.py`, `postgres/conn.py`)."""

    chain_end: str  # the event chain's last link and the last event's id: one row, none before the first event
    last_event: str  # the last event's id (none or 0 before the first): whether a cache is still valid
    last_memory: str  # the highest memory id the store ever gave, 0 at first: an import numbers after it
    add_relation: str  # a memory_relations row (7 values), nothing when it is there: `changes()` tells which
    version_bytes: str  # the byte length of a kept version's text (`v`, of memory `m`), as an expression


class Rows(Protocol):
    """The rows of one statement, read whole or one at a time."""

    def fetchall(self) -> list[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """What a statement module calls of its connection. A transaction is the statements it sends (`BEGIN
    IMMEDIATE`, `SAVEPOINT`, `COMMIT`: `sqlite/db.py`'s atomic())."""

    @property
    def filename(self) -> str: ...

    @property
    def dialect(self) -> Dialect: ...

    def execute(self, sql: str, args: Args = (), /) -> Rows: ...

    def executemany(self, sql: str, seq: Sequence[Args], /) -> Rows: ...

    def locked(self, lock: Locking, sql: str, args: Args = (), /) -> list[Row]:
        """Run a statement under the lock it declares (Lock, Key), all its rows read."""
        ...

    def changes(self) -> int: ...

    def last_insert_rowid(self) -> int: ...

    def getautocommit(self) -> bool: ...

    def close(self) -> None: ...


def all_rows(conn: Connection, sql: str, args: Args = (), *, lock: Locking | None = None) -> list[Row]:
    """Run a query to completion (so no read transaction is left open), under the lock it declares, if any."""
    return conn.execute(sql, args).fetchall() if lock is None else conn.locked(lock, sql, args)


def one(conn: Connection, sql: str, args: Args = (), *, lock: Locking | None = None) -> Row | None:
    """The first row of a query, run to completion."""
    rows = conn.execute(sql, args).fetchall() if lock is None else conn.locked(lock, sql, args)
    return rows[0] if rows else None


def scalar(conn: Connection, sql: str, args: Args = (), *, lock: Locking | None = None) -> Any:
    row = one(conn, sql, args, lock=lock)
    return row[0] if row else None
