"""The core: synchronous SQLite. Never prints, never reads the environment, never imports adapters."""

from __future__ import annotations

import os

import apsw

from hivemem.store import schema
from hivemem.store.db import connect, read_only
from hivemem.store.limits import Limits
from hivemem.store.migrations import Progress, check_header, open_and_migrate


class Store:
    """One connection to a store file, with the settings its verbs need."""

    def __init__(self, conn: apsw.Connection, path: str, limits: Limits, *, readonly: bool = False) -> None:
        self.conn = conn
        self.path = path
        self.limits = limits
        self.readonly = readonly

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
