"""The core: synchronous SQLite. Never prints, never reads the environment, never imports adapters."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw

from hivemem.store import schema
from hivemem.store.db import atomic, connect, read_only
from hivemem.store.limits import Limits
from hivemem.store.migrations import Progress, check_header, open_and_migrate


class Store:
    """One connection to a store file, with the settings its verbs need."""

    def __init__(self, conn: apsw.Connection, path: str, limits: Limits, *, readonly: bool = False) -> None:
        self.conn = conn
        self.path = path
        self.limits = limits
        self.readonly = readonly
        self._after_commit: list[Callable[[], None]] = []

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One verb's change: a single transaction (the store functions it calls nest as savepoints).

        Steps registered with `after_commit` run once it has committed, and are dropped when it rolls back.
        """
        self._after_commit = []
        try:
            with atomic(self.conn):
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

    @property
    def data_dir(self) -> str:
        return os.path.dirname(self.path)

    @property
    def sqlite_version(self) -> str:
        return str(apsw.sqlite_lib_version())

    def close(self) -> None:
        self.conn.close()


def open_store(
    path: str, limits: Limits | None = None, progress: Progress | None = None, *, read_only_ok: bool = False
) -> Store:
    """Open (creating or migrating) the store at `path` for writing; a migration reports to `progress`; with
    read_only_ok, a read-only file is opened for reading."""
    if read_only_ok and os.path.exists(path) and not os.access(path, os.W_OK):
        if check_header(path) != schema.VERSION:
            raise read_only()  # it needs creating or migrating, which a read-only file cannot take
        return open_reader(path, limits)
    backups = os.path.join(os.path.dirname(path), "backups")
    return Store(open_and_migrate(path, backups, progress), path, limits or Limits())


def open_reader(path: str, limits: Limits | None = None) -> Store:
    """A read-only connection to an existing, current store."""
    check_header(path)
    return Store(connect(path, readonly=True), path, limits or Limits(), readonly=True)
