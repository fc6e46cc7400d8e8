"""Schema versions: the header guard, creation, and ordered named migration steps (SPEC 5.4)."""

from __future__ import annotations

import contextlib
import os
import struct
import uuid
from collections.abc import Callable

import apsw

from hivemem.errors import Failed, Unsupported
from hivemem.store import schema
from hivemem.store.db import atomic, connect, now, scalar

Step = Callable[[apsw.Connection], None]


def m001_initial(conn: apsw.Connection) -> None:
    """Version 1: every table, index and the FTS table, plus the meta rows."""
    conn.execute(schema.V1)
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('next_principal', '1'), ('store_id', ?), ('created', ?)",
        (str(uuid.uuid4()), now()),
    )
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")


STEPS: tuple[tuple[int, Step], ...] = ((1, m001_initial),)


def read_header(path: str) -> tuple[int, int] | None:
    """(application_id, user_version) from the file header, without opening it; None if empty."""
    with open(path, "rb") as f:
        head = f.read(100)
    if not head:
        return None
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return (-1, -1)
    user_version, application_id = struct.unpack(">I", head[60:64])[0], struct.unpack(">I", head[68:72])[0]
    return application_id, user_version


def refuse(found: int) -> Unsupported:
    return Unsupported(
        "store_schema",
        f"this store has schema {found}; this hivemem supports up to {schema.VERSION}",
        found=found,
        supported=schema.VERSION,
    )


def check_header(path: str) -> int:
    """The schema version a store file claims; refuse foreign and too-new files untouched."""
    if not os.path.exists(path):
        return 0
    header = read_header(path)
    if header is None:
        return 0
    application_id, version = header
    if application_id != schema.APPLICATION_ID or version < 1:
        raise Unsupported(
            "store_schema",
            f"{path} is not a hivemem store",
            found=None if application_id != schema.APPLICATION_ID else version,
            supported=schema.VERSION,
        )
    if version > schema.VERSION:
        raise refuse(version)
    return version


def open_and_migrate(path: str, backups: str) -> apsw.Connection:
    """Open the store for writing, creating or migrating it to the current version."""
    version = check_header(path)
    conn = connect(path, page_size=schema.PAGE_SIZE if version == 0 else None)
    for target, step in STEPS:
        if target <= version:
            continue
        if version > 0:
            backup_before(conn, backups, version)
        try:
            with atomic(conn):
                step(conn)
                conn.execute(f"PRAGMA user_version = {target}")
        except Exception as exc:
            conn.close()
            raise Failed("store_migration", f"migration to schema {target} failed: {exc}", version=target) from None
        version = target
    with contextlib.suppress(apsw.FullError):  # a full disk: the WAL stays, reads still see it
        conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    found = scalar(conn, "PRAGMA user_version")
    if found != schema.VERSION:
        conn.close()
        raise refuse(int(found))
    return conn


def backup_before(conn: apsw.Connection, backups: str, version: int) -> None:
    """`VACUUM INTO backups/<name>.bak-v<old>` before a migration step."""
    dest = os.path.join(backups, f"{os.path.basename(conn.filename)}.bak-v{version}")
    if not os.path.exists(dest):
        conn.execute("VACUUM INTO ?", (dest,))
        os.chmod(dest, 0o600)
