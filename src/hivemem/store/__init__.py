"""The core: the Store interface (`base.py`) and its backends. Never prints, never reads the environment,
never imports adapters. Today's backend is SQLite (`sqlite/`); `open_store` and `open_reader` open it."""

from __future__ import annotations

import os

import apsw

from hivemem.store.base import Store
from hivemem.store.limits import Limits
from hivemem.store.sqlite import schema
from hivemem.store.sqlite.db import connect, read_only, start_cause
from hivemem.store.sqlite.migrations import Progress, check_header, open_and_migrate
from hivemem.store.sqlite.store import SQLiteStore

__all__ = [
    "BACKEND_ERRORS",
    "Limits",
    "Progress",
    "SQLiteStore",
    "Store",
    "open_reader",
    "open_store",
    "restore",
    "start_cause",
]

BACKEND_ERRORS: tuple[type[BaseException], ...] = (apsw.Error,)  # what opening a store may raise, untranslated


def open_store(
    path: str, limits: Limits | None = None, progress: Progress | None = None, *, read_only_ok: bool = False
) -> SQLiteStore:
    """Open (creating or migrating) the store at `path` for writing; a migration reports to `progress`; with
    read_only_ok, a read-only file is opened for reading."""
    if read_only_ok and os.path.exists(path) and not os.access(path, os.W_OK):
        if check_header(path) != schema.VERSION:
            raise read_only()  # it needs creating or migrating, which a read-only file cannot take
        return open_reader(path, limits)
    backups = os.path.join(os.path.dirname(path), "backups")
    return SQLiteStore(open_and_migrate(path, backups, progress), path, limits or Limits())


def open_reader(path: str, limits: Limits | None = None) -> SQLiteStore:
    """A read-only connection to an existing, current store."""
    check_header(path)
    return SQLiteStore(connect(path, readonly=True), path, limits or Limits(), readonly=True)


def restore(store_path: str, source: str, keep: int) -> dict[str, object]:
    """Replace the store at `store_path` with a validated copy of the backup `source` while no daemon serves it,
    keeping the current store in backups/; returns {path, from, previous, check}."""
    from hivemem.store.sqlite.operations import restore as swap

    return swap(store_path, source, keep, open_store)
