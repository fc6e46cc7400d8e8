"""Schema versions: the header guard, creation, and ordered named migration steps (docs/schema.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import unicodedata
import uuid
from collections import defaultdict
from collections.abc import Callable

import apsw

from hivemem.auth import owner
from hivemem.errors import Failed, Unsupported
from hivemem.store import files
from hivemem.store.sqlite import audit, fts_index, schema
from hivemem.store.sqlite.db import Connection, all_rows, atomic, connect, now, scalar

Progress = Callable[[str], None]
Step = Callable[[Connection, Progress], None]


def create(conn: Connection) -> None:
    """A new store: the current schema, plus the meta rows."""
    conn.execute(schema.CURRENT)
    conn.execute(
        "INSERT INTO meta(key, value) VALUES ('next_principal', '1'), ('store_id', ?), ('created', ?)",
        (str(uuid.uuid4()), now()),
    )
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")


def m002_search_v2(conn: Connection, progress: Progress) -> None:
    """Version 2: content hashes of NFC text (docs/verbs.md), and the index of every language with space tokens."""
    duplicates = rehash_nfc(conn)
    if duplicates:
        progress(f"{len(duplicates)} memories duplicated another once normalized (NFC) and were deleted: "
                 + ", ".join(f"m{m} (kept m{k})" for m, k in duplicates))  # fmt: skip
    conn.execute("DROP TABLE memory_fts")
    conn.execute(schema.FTS_V2)
    fts_index.fill(conn, progress)


def nfc_sha256(content: str) -> bytes:
    """The content hash of schema 2: SHA-256 of the NFC form (docs/verbs.md). Frozen here: a migration must keep
    computing what its version defined, whatever later code does."""
    return hashlib.sha256(unicodedata.normalize("NFC", content).encode("utf-8")).digest()


def rehash_nfc(conn: Connection) -> list[tuple[int, int]]:
    """Recompute every content_sha256 from NFC text. Live memories of one space that become equal keep one:
    the active one, else the oldest; the others are soft-deleted as `owner` (restorable only once their text
    differs). Returns (deleted, kept) pairs."""
    changed: list[tuple[bytes, int]] = []
    live: dict[tuple[str, bytes], list[tuple[bool, int]]] = defaultdict(list)
    for memory, space, content, digest, deleted, status in all_rows(
        conn, "SELECT id, space, content, content_sha256, deleted, status FROM memories ORDER BY id"
    ):
        new = nfc_sha256(content)
        if new != bytes(digest):
            changed.append((new, memory))
        if deleted is None:
            live[(space, new)].append((status != "active", memory))
    pairs = []
    for group in (sorted(g) for g in live.values() if len(g) > 1):
        pairs += [(memory, group[0][1]) for _, memory in group[1:]]
    for memory, kept in pairs:
        _soft_delete(conn, memory, kept)
    conn.executemany("UPDATE memories SET content_sha256 = ? WHERE id = ?", changed)
    return pairs


def _soft_delete(conn: Connection, memory: int, kept: int) -> None:
    """memory.delete done by the migration: a new revision, its version and a memory.deleted event."""
    at, actor = now(), owner()
    conn.execute(
        "UPDATE memories SET deleted = ?, revision = revision + 1, updated_by = ?, updated_label = ?, updated = ? "
        "WHERE id = ?",
        (at, actor.id, actor.label, at, memory),
    )
    names = ("source", "provenance", "confidence", "confidence_state", "review_after", "expires_at")
    row = all_rows(conn, f"SELECT space, revision, kind, title, content, tags, status, {', '.join(names)} "
                         "FROM memories WHERE id = ?", (memory,))[0]  # fmt: skip
    space, revision, kind, title, content, tags, status, *meta_values = row
    meta = dict(zip(names, meta_values, strict=True))
    meta["provenance"] = json.loads(meta["provenance"]) if meta["provenance"] else None
    # The newest version keeps '' for the row's own content (D38): the one superseded gets the text first.
    conn.execute("UPDATE memory_versions SET content = ? WHERE memory = ? AND content = ''", (content, memory))
    conn.execute(
        "INSERT INTO memory_versions VALUES (?,?,'delete',?,?,'',?,?,?,?,?,?)",
        (memory, revision, kind, title, tags, status, json.dumps(meta, sort_keys=True), actor.id, actor.label, at),
    )
    data = {"duplicate_of": f"m{kept}", "reason": "normalization"}
    audit.append(conn, "memory.deleted", actor, space=space, memory=memory, revision=revision, data=data)


def m003_time_indexes(conn: Connection, progress: Progress) -> None:
    """Version 3: the live rows indexed by `updated` and by `created`, for time-windowed reads (D292)."""
    conn.execute(schema.TIME_INDEXES)


# Each step takes a store from the version before it; a new store is created at the current version.
STEPS: tuple[tuple[int, Step], ...] = ((2, m002_search_v2), (3, m003_time_indexes))


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


def open_and_migrate(path: str, backups: str, progress: Progress | None = None) -> Connection:
    """Open the store for writing, creating or migrating it to the current version (progress lines to `progress`)."""
    version = check_header(path)
    conn = connect(path, page_size=schema.PAGE_SIZE if version == 0 else None)
    say = progress or (lambda line: None)
    if version == 0:
        _step(conn, schema.VERSION, lambda c, _: create(c), say)
        version = schema.VERSION
    for target, step in STEPS:
        if target <= version:
            continue
        backup_before(conn, backups, version)
        say(f"migrating {path} from schema {version} to {target} (backup in {backups})")
        _step(conn, target, step, say)
        say(f"migrated {path} to schema {target}")
        version = target
    with contextlib.suppress(apsw.FullError):  # a full disk: the WAL stays, reads still see it
        conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    found = scalar(conn, "PRAGMA user_version")
    if found != schema.VERSION:
        conn.close()
        raise refuse(int(found))
    return conn


def _step(conn: Connection, target: int, step: Step, say: Progress) -> None:
    """One step in one transaction: all of it, with the new user_version, or nothing."""
    try:
        with atomic(conn):
            step(conn, say)
            conn.execute(f"PRAGMA user_version = {target}")
    except Exception as exc:
        conn.close()
        raise Failed("store_migration", f"migration to schema {target} failed: {exc}", version=target) from None


def backup_before(conn: Connection, backups: str, version: int) -> None:
    """`VACUUM INTO backups/<name>.bak-v<old>` before a migration step."""
    os.makedirs(backups, mode=0o700, exist_ok=True)
    dest = os.path.join(backups, f"{os.path.basename(conn.filename)}.bak-v{version}")
    if not os.path.lexists(dest):  # a new file (VACUUM INTO follows links: files.new_database), then its name
        with files.new_database(dest) as tmp:
            conn.execute("VACUUM INTO ?", (tmp,))
        files.publish(tmp, dest)
