"""What purge does after its transaction: checkpoint, then scrub backups and exports (docs/schema.md)."""

from __future__ import annotations

import json
import os

import apsw

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.paths import write_private
from hivemem.store.sqlite import fts_index, integrity
from hivemem.store.sqlite.db import atomic, connect, scalar, translate


def checkpoint(conn: apsw.Connection) -> None:
    """`wal_checkpoint(TRUNCATE)`, or unavailable.store_busy if readers keep it from finishing."""
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    except apsw.BusyError:
        busy = 1
    except apsw.Error as exc:  # an I/O error or a full disk: the purge committed, the WAL still holds the text
        error = translate(exc)
        error.message = f"purged, but the WAL checkpoint failed ({error.message}); it runs at next start"
        raise error from None
    if busy:
        raise Unavailable("store_busy", "purged, but the WAL checkpoint could not finish; it runs at next start")


def scrub_backups(directory: str, memory: int) -> list[tuple[str, str]]:
    """Delete the memory from every backup database with secure delete, then vacuum it.

    Returns the backups that could not be opened or scrubbed, with why; every other one is scrubbed.
    """
    if not os.path.isdir(directory):
        return []
    failures = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if (os.path.islink(path) or not os.path.isfile(path) or ".tmp-" in name
                or name.endswith(("-wal", "-shm", "-journal", ".tmp"))):  # fmt: skip
            continue
        try:
            _scrub(path, memory)
        except HivememError as exc:
            failures.append((path, exc.message))
        except apsw.Error as exc:
            failures.append((path, str(exc)))
    return failures


def _scrub(path: str, memory: int) -> None:
    """Erase the memory from one backup; a backup holding schema objects hivemem did not make (a trigger could
    keep what is deleted) is not touched, and reported."""
    conn = connect(path)
    try:
        foreign = integrity.foreign_objects(conn, int(scalar(conn, "PRAGMA user_version") or 0))
        if foreign:
            raise Failed("store", f"{path} holds schema objects hivemem did not create "
                         f"({', '.join(o['type'] + ' ' + o['name'] for o in foreign)})", path=path)  # fmt: skip
        with atomic(conn):
            fts_index.remove_any_version(conn, memory)
            conn.execute("DELETE FROM memories WHERE id = ?", (memory,))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.execute("VACUUM")  # reads every page, so a corrupt backup fails here rather than passing unseen
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()


def unscrubbed(ident: str, failures: list[tuple[str, str]]) -> Failed:
    """failed.store naming the backup(s) that may still hold a purged memory."""
    path, why = failures[0]
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return Failed(
        "store",
        f"{ident} is purged from the store, but the backup {path}{more} could not be scrubbed: {why}",
        path=path,
        paths=[p for p, _ in failures],
        fix=f"the backup may still hold {ident}: delete it, or repair it and erase {ident} from it yourself",
    )


def scrub_exports(directory: str, store_id: str, memory: int) -> None:
    """Rewrite every export of this store without the memory, atomically."""
    if not os.path.isdir(directory):
        return
    target = f"m{memory}"
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(doc, dict) or doc.get("format") != "hivemem.export" or doc.get("store_id") != store_id:
            continue
        doc["memories"] = [m for m in doc.get("memories", []) if m.get("id") != target]
        doc["relations"] = [r for r in doc.get("relations", []) if target not in (r.get("source"), r.get("target"))]
        # a new file under a random name (never written through one left at a guessable name), then renamed
        write_private(path, json.dumps(doc, ensure_ascii=False).encode("utf-8"))
