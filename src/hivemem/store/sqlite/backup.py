"""Online backups (docs/operations.md): `VACUUM INTO` a private temporary file, fsync, validate, publish without
replacing.

Automatic backups (before a repair) live in `backups/` beside the store, where purge scrubs them (docs/schema.md);
only the newest `backups.keep` of them are kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from typing import Any

import apsw

from hivemem import progress
from hivemem.errors import Conflict, Failed, HivememError, InvalidParams, Unsupported
from hivemem.paths import create_temporary, fsync_dir
from hivemem.records import BackupMade
from hivemem.store import files
from hivemem.store.sqlite import integrity, schema
from hivemem.store.sqlite.db import Connection, all_rows, connect, now, open_file, scalar
from hivemem.store.sqlite.migrations import check_header

COUNTED = ("memories", "memory_versions", "memory_relations", "sessions", "events")
REPAIR_PREFIX = ".bak-repair-"


def backup(conn: Connection, dest: str, *, counts: bool = False) -> BackupMade:
    """A consistent copy of the store behind `conn` at `dest` (a new 0600 file); with `counts`, the copy must
    also hold as many canonical rows as the store (true only when no write can run in between)."""
    files.check_destination(dest)
    with files.new_database(dest) as tmp:  # VACUUM INTO follows links: it writes only into this new file
        _vacuum_into(conn, tmp)
    try:
        progress.report("checking", 0, 1)
        validate(tmp, row_counts(conn) if counts else None)
        progress.report("checking", 1, 1)
        files.publish(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return {"path": dest, "bytes": os.path.getsize(dest)}


def _vacuum_into(conn: Connection, dest: str) -> None:
    """`VACUUM INTO dest`. Inside the writer's transaction (a repair) VACUUM cannot run on that connection, so a
    second, read-only one takes it: the transaction holds the write lock, so it sees exactly the committed state."""
    if conn.getautocommit():
        _copied(conn, dest)
        return
    reader = connect(conn.filename, readonly=True)
    try:
        _copied(reader, dest)
    finally:
        reader.close()


def _copied(conn: Connection, dest: str) -> None:
    """`VACUUM INTO dest` on `conn`, reporting progress as the pages written to `dest` of the pages in use."""
    used = int(scalar(conn, "PRAGMA page_count") or 0) - int(scalar(conn, "PRAGMA freelist_count") or 0)
    size = int(scalar(conn, "PRAGMA page_size") or 4096)

    def written() -> bool:
        with contextlib.suppress(OSError):
            progress.report("copying", min(os.path.getsize(dest) // size, used), used)
        return False  # go on

    progress.report("copying", 0, used)
    conn.set_progress_handler(written, 100_000)
    try:
        conn.execute("VACUUM INTO ?", (dest,))
    finally:
        conn.set_progress_handler(None)
    progress.report("copying", used, used)


def row_counts(conn: Connection) -> dict[str, int]:
    return {table: int(scalar(conn, f"SELECT count(*) FROM {table}")) for table in COUNTED}


def validate(path: str, counts: dict[str, int] | None = None) -> None:
    """failed.backup unless `path` is a hivemem store of this version that passes `integrity_check`."""
    try:
        conn = open_file(path, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW)
    except apsw.Error as exc:
        raise _invalid(path, str(exc)) from None
    try:
        app, version = scalar(conn, "PRAGMA application_id"), scalar(conn, "PRAGMA user_version")
        if app != schema.APPLICATION_ID or version != schema.VERSION:
            raise _invalid(path, f"not a hivemem store of schema {schema.VERSION} (application_id {app}, "
                                 f"version {version})")  # fmt: skip
        rows = all_rows(conn, "PRAGMA integrity_check(10)")
        if rows != [("ok",)]:
            raise _invalid(path, f"integrity_check: {rows[0][0]}")
        if counts is not None and row_counts(conn) != counts:
            raise _invalid(path, "its row counts differ from the store's")
    except apsw.Error as exc:
        raise _invalid(path, str(exc)) from None
    finally:
        conn.close()


def _invalid(path: str, why: str) -> Failed:
    return Failed("backup", f"the backup {path} is not valid: {why}", path=path)


def automatic(conn: Connection, directory: str, keep: int) -> str:
    """A validated backup in `directory` named for now, then only the newest `keep` of them kept."""
    stamp = now().replace(":", "").replace("-", "")
    dest = os.path.join(directory, f"{os.path.basename(conn.filename)}{REPAIR_PREFIX}{stamp}")
    backup(conn, dest, counts=True)
    prune(directory, os.path.basename(conn.filename) + REPAIR_PREFIX, keep)
    return dest


def prune(directory: str, prefix: str, keep: int) -> list[str]:
    """Remove all but the newest `keep` files named `prefix<timestamp>`; returns what was removed."""
    names = sorted(n for n in os.listdir(directory) if n.startswith(prefix) and ".tmp-" not in n)
    gone = [os.path.join(directory, n) for n in names[: max(0, len(names) - keep)]]
    for path in gone:
        os.unlink(path)
    return gone


RESTORE_PREFIX = ".bak-restore-"


def restore(store_path: str, source: str, keep: int) -> dict[str, Any]:
    """Replace the store with a validated copy of `source`, keeping the current store in backups/.

    The caller holds the store lock, so no daemon serves the store meanwhile. The copy is published before the
    old file is moved away only in the sense that both steps are renames inside one directory; if the second
    fails, the old store is put back.
    """
    source = os.path.abspath(source)
    if not os.path.isfile(source):
        raise InvalidParams("path", f"{source} is not a file", param="path", path=source)
    version = check_header(source) or _refuse_empty(source)  # a foreign or newer file: unsupported.store_schema
    _check_file(source, version)
    directory = os.path.dirname(store_path)
    backups = files.default_dir(directory, "backups")
    fd, staged = create_temporary(store_path)
    try:
        _copy(source, fd)
    except BaseException:
        os.unlink(staged)
        raise
    stamp = now().replace(":", "").replace("-", "")
    kept = os.path.join(backups, f"{os.path.basename(store_path)}{RESTORE_PREFIX}{stamp}") if os.path.exists(
        store_path) else None  # fmt: skip
    try:
        if kept is not None:
            _set_aside(store_path, kept)
        os.rename(staged, store_path)
        fsync_dir(directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        if kept is not None and os.path.exists(kept) and not os.path.exists(store_path):
            os.rename(kept, store_path)  # put the old store back
        raise
    if kept is not None:
        prune(backups, os.path.basename(store_path) + RESTORE_PREFIX, keep)
    return {"path": store_path, "from": source, "previous": kept}


def _refuse_empty(path: str) -> int:
    raise Unsupported("store_schema", f"{path} is empty: not a hivemem store", found=None, supported=schema.VERSION)


def _check_file(path: str, version: int) -> None:
    """failed.backup unless the file's pages pass integrity_check; unsupported.store_schema, naming them, if its
    schema holds any object hivemem did not create (a trigger, a view, a table or an index) or its FTS5 settings are
    not a new store's (`secure-delete` off; docs/security.md)."""
    try:
        conn = open_file(path, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW)
        try:
            rows = all_rows(conn, "PRAGMA integrity_check(10)")
            foreign = integrity.foreign_objects(conn, version) if rows == [("ok",)] else []
            if rows == [("ok",)] and not foreign:  # the FTS table is ours, so its settings can be read
                foreign = integrity.foreign_settings(conn, version)
        finally:
            conn.close()
    except apsw.Error as exc:
        raise _invalid(path, str(exc)) from None
    if rows != [("ok",)]:
        raise _invalid(path, f"integrity_check: {rows[0][0]}")
    if foreign:
        raise foreign_schema(path, foreign)


def foreign_schema(path: str, objects: list[dict[str, str]]) -> Unsupported:
    named = ", ".join(f"{o['type']} {o['name']}" for o in objects[:5]) + (" and more" if len(objects) > 5 else "")
    return Unsupported("store_schema", f"{path} holds schema objects hivemem did not create ({named}); nothing "
                       "was replaced", path=path, objects=objects, supported=schema.VERSION,
                       fix="restore a backup made by `hivemem store backup`; if you added these objects yourself, "
                           "drop them from a copy first")  # fmt: skip


def _copy(source: str, fd: int) -> None:
    """`source` into the new 0600 file open at `fd`, fsynced, then closed (the source is a closed backup, so
    bytes are a copy)."""
    try:
        with open(source, "rb") as src, os.fdopen(fd, "wb", closefd=False) as out:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(fd)
    finally:
        os.close(fd)


def _set_aside(store_path: str, kept: str) -> None:
    """Checkpoint the current store into its file if it opens, then move it (and any WAL left) to `kept`."""
    with contextlib.suppress(apsw.Error, HivememError):
        conn = connect(store_path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
    os.rename(store_path, kept)
    for suffix in ("-wal", "-shm"):
        leftover = store_path + suffix
        if os.path.exists(leftover):
            if suffix == "-wal" and os.path.getsize(leftover):
                os.rename(leftover, kept + suffix)
            else:
                os.unlink(leftover)


@contextlib.contextmanager
def store_locked(store_path: str) -> Iterator[None]:
    """Hold the store lock a daemon holds for its life (docs/schema.md); conflict.daemon_running while one does."""
    fd = os.open(store_path + ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict("daemon_running", "a daemon is serving this store; restore replaces the store file only "
                           "while none does", path=store_path,
                           fix="close the agents that use hivemem, run `HIVEMEM_TOKEN=@owner hivemem stop`, then "
                               "restore again") from None  # fmt: skip
        yield
    finally:
        os.close(fd)
