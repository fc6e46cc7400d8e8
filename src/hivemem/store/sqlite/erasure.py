"""What purge does after its transaction: checkpoint, then scrub backups and exports (SPEC 2.5)."""

from __future__ import annotations

import json
import os

import apsw

from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store.sqlite import fts_index
from hivemem.store.sqlite.db import atomic, connect, translate


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
        if os.path.islink(path) or not os.path.isfile(path) or name.endswith(("-wal", "-shm", "-journal", ".tmp")):
            continue
        try:
            _scrub(path, memory)
        except HivememError as exc:
            failures.append((path, exc.message))
        except apsw.Error as exc:
            failures.append((path, str(exc)))
    return failures


def _scrub(path: str, memory: int) -> None:
    conn = connect(path)
    try:
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
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("format") != "hivemem.export" or doc.get("store_id") != store_id:
            continue
        doc["memories"] = [m for m in doc.get("memories", []) if m.get("id") != target]
        doc["relations"] = [r for r in doc.get("relations", []) if target not in (r.get("source"), r.get("target"))]
        tmp = f"{path}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
