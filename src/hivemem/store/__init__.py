"""The core: the Store interface (`base.py`) and its backends. Never prints, never reads the environment,
never imports adapters. The backends are SQLite (`sqlite/`, a file) and PostgreSQL (`postgres/`, a team store,
docs/team.md); `open_store` opens the one the config names, `open_reader` a SQLite file."""

from __future__ import annotations

import os
from typing import Literal, overload

import apsw

from hivemem import libpq
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


@overload
def open_store(
    path: str,
    limits: Limits | None = None,
    progress: Progress | None = None,
    *,
    read_only_ok: bool = False,
    url: Literal[""] = "",
    timeout_ms: int = 0,
) -> SQLiteStore: ...


@overload
def open_store(
    path: str,
    limits: Limits | None = None,
    progress: Progress | None = None,
    *,
    read_only_ok: bool = False,
    url: str,
    timeout_ms: int = 0,
) -> Store: ...


def open_store(
    path: str,
    limits: Limits | None = None,
    progress: Progress | None = None,
    *,
    read_only_ok: bool = False,
    url: str = "",
    timeout_ms: int = 0,
) -> Store:
    """Open (creating or migrating) the store at `path` for writing; a migration reports to `progress`; with
    read_only_ok, a read-only file is opened for reading. With `url` (config `store.url`), the team store in
    that PostgreSQL database instead, `path`'s directory holding this machine's exports."""
    if url:
        require_driver()
        from hivemem.store.postgres.store import open_postgres

        return open_postgres(url, os.path.dirname(path), limits or Limits(), progress, timeout_ms=timeout_ms)
    if read_only_ok and os.path.exists(path) and not os.access(path, os.W_OK):
        if check_header(path) != schema.VERSION:
            raise read_only()  # it needs creating or migrating, which a read-only file cannot take
        return open_reader(path, limits)
    backups = os.path.join(os.path.dirname(path), "backups")
    return SQLiteStore(open_and_migrate(path, backups, progress), path, limits or Limits())


def require_driver() -> None:
    """The team store's driver, psycopg, comes with the `team` extra; without it, unsupported.store_driver names
    the install (docs/team.md)."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise libpq.missing_driver(exc) from exc


def init_store(path: str, key_path: str, url: str = "", runtime_role: str | None = None) -> dict[str, object]:
    """`hivemem store init`: create the store (the team store's schema when `url` is set) and its owner key;
    `owner_key` is in the answer only when this call created it, so it is shown once. With `runtime_role` (a
    team store only), that role gets exactly the rights the verbs need, and is recorded (D250)."""
    store = open_store(path, url=url)
    try:
        out: dict[str, object] = {"store": store.path}
        if url:
            from hivemem.store.postgres.store import PostgresStore

            key = store.init_owner(key_path) if isinstance(store, PostgresStore) else None
            if runtime_role is not None and isinstance(store, PostgresStore):
                out["runtime_role"] = store.grant_runtime(runtime_role)
        else:
            key = None if os.path.exists(key_path) else store.owner_key(key_path)
        out |= {"created": key is not None, "key_path": key_path}
        if key is not None:
            out["owner_key"] = key
        return out
    finally:
        store.close()


def _open_file(path: str) -> SQLiteStore:
    return SQLiteStore(open_and_migrate(path, os.path.join(os.path.dirname(path), "backups")), path, Limits())


def open_reader(path: str, limits: Limits | None = None) -> SQLiteStore:
    """A read-only connection to an existing, current store."""
    check_header(path)
    return SQLiteStore(connect(path, readonly=True), path, limits or Limits(), readonly=True)


def restore(store_path: str, source: str, keep: int, url: str = "") -> dict[str, object]:
    """Replace the store at `store_path` with a validated copy of the backup `source` while no daemon serves it,
    keeping the current store in backups/; returns {path, from, previous, check}. A team store (`url`) is
    restored with pg_restore instead: unsupported.store_backup."""
    if url:
        require_driver()
        from hivemem.store.postgres.operations import backup_deferred

        raise backup_deferred()
    from hivemem.store.sqlite.operations import restore as swap

    return swap(store_path, source, keep, _open_file)
