"""Online backups (SPEC 12.2): `VACUUM INTO` a private temporary file, fsync, validate, publish without replacing.

Automatic backups (before a repair) live in `backups/` beside the store, where purge scrubs them (SPEC 2.5);
only the newest `backups.keep` of them are kept.
"""

from __future__ import annotations

import contextlib
import os

import apsw

from hivemem.errors import Failed
from hivemem.store import files, schema
from hivemem.store.db import all_rows, now, scalar

COUNTED = ("memories", "memory_versions", "memory_relations", "sessions", "events")
REPAIR_PREFIX = ".bak-repair-"


def backup(conn: apsw.Connection, dest: str, *, counts: bool = False) -> dict[str, object]:
    """A consistent copy of the store behind `conn` at `dest` (a new 0600 file); with `counts`, the copy must
    also hold as many canonical rows as the store (true only when no write can run in between)."""
    files.check_destination(dest)
    tmp = files.temporary(dest)
    try:
        conn.execute("VACUUM INTO ?", (tmp,))
        os.chmod(tmp, 0o600)
        files.fsync_file(tmp)
        validate(tmp, row_counts(conn) if counts else None)
        files.publish(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return {"path": dest, "bytes": os.path.getsize(dest)}


def row_counts(conn: apsw.Connection) -> dict[str, int]:
    return {table: int(scalar(conn, f"SELECT count(*) FROM {table}")) for table in COUNTED}


def validate(path: str, counts: dict[str, int] | None = None) -> None:
    """failed.backup unless `path` is a hivemem store of this version that passes `integrity_check`."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_NOFOLLOW)
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


def automatic(conn: apsw.Connection, directory: str, keep: int) -> str:
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
