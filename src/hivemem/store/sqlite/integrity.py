"""Integrity checks (SPEC 12.2): each returns a list of findings, and none means healthy.

A finding is `{check, memory?, event?, detail}`. `doctor` runs the quick check on the store file
itself, read-only and only while no daemon runs (SPEC 6.1); `store check` runs the full set on the
daemon's own connection. New checks are one function each, added to CHECKS.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import apsw

from hivemem.store import open_reader
from hivemem.store.sqlite.audit import verify_chain
from hivemem.store.sqlite.db import all_rows
from hivemem.store.sqlite.migrations import check_header
from hivemem.store.sqlite.schema import VERSION
from hivemem.store.sqlite.secret_scan import Progress, Report, scan_stored

Finding = dict[str, Any]
Check = Callable[[apsw.Connection], list[Finding]]
MIN_SQLITE = (3, 42, 0)
SCHEMA_VERSION = VERSION  # the version a new store is created at


def finding(check: str, detail: str, *, memory: int | None = None, event: int | None = None) -> Finding:
    """One finding; `memory` is shown as its wire id `m<N>`, `event` as the event id."""
    found: Finding = {"check": check}
    if memory is not None:
        found["memory"] = f"m{memory}"
    if event is not None:
        found["event"] = event
    found["detail"] = detail
    return found


def _pragma_check(conn: apsw.Connection, pragma: str) -> list[Finding]:
    rows = all_rows(conn, f"PRAGMA {pragma}(100)")
    return [] if rows == [("ok",)] else [finding("integrity", str(row[0])) for row in rows]


def quick(conn: apsw.Connection) -> list[Finding]:
    """`PRAGMA quick_check`: the pages and b-trees, without matching indexes to their tables."""
    return _pragma_check(conn, "quick_check")


def integrity(conn: apsw.Connection) -> list[Finding]:
    """`PRAGMA integrity_check`: everything quick_check does, and every index against its table."""
    return _pragma_check(conn, "integrity_check")


def foreign_keys(conn: apsw.Connection) -> list[Finding]:
    """`PRAGMA foreign_key_check`: rows that name a parent row that does not exist."""
    rows = all_rows(conn, "PRAGMA foreign_key_check")
    found = []
    for table, rowid, parent, _ in rows:
        memory = rowid if table == "memories" else None
        found.append(finding("foreign_keys", f"{table} row {rowid} names a missing {parent} row", memory=memory))
    return found


def events_chain(conn: apsw.Connection) -> list[Finding]:
    """The audit log's hash chain (SPEC 8.5): the first event where it breaks."""
    broken = verify_chain(conn)
    if broken is None:
        return []
    return [finding("events.chain", f"event {broken} does not match the chain", event=broken)]


QUICK: dict[str, Check] = {"integrity": quick}
CHECKS: dict[str, Check] = {"integrity": integrity, "foreign_keys": foreign_keys, "events.chain": events_chain}


def run(conn: apsw.Connection, checks: dict[str, Check] = CHECKS) -> list[Finding]:
    """Every check's findings; a check that SQLite cannot finish is a finding of its own."""
    found: list[Finding] = []
    for name, check in checks.items():
        try:
            found += check(conn)
        except apsw.Error as exc:
            found.append(finding(name, f"could not run: {exc}"))
    return found


def report(findings: list[Finding]) -> dict[str, Any]:
    """`{ok, findings, counts}` as `store check` answers it (SPEC 12.2)."""
    counts: dict[str, int] = {}
    for found in findings:
        counts[found["check"]] = counts.get(found["check"], 0) + 1
    return {"ok": not findings, "findings": findings, "counts": counts}


def check_file(path: str, checks: dict[str, Check] = QUICK) -> list[Finding]:
    """Open the store file read-only (under umask 077, so nothing it creates is readable by others) and check it.

    Raises the store's error (unsupported.store_schema, failed.store) when it cannot be opened at all.
    """
    old = os.umask(0o077)
    try:
        store = open_reader(path)
        try:
            return run(store.conn, checks)
        finally:
            store.close()
    finally:
        os.umask(old)


def scan_secrets(path: str, budget_s: float, progress: Progress | None = None) -> Report:
    """Scan the live memories of the store file for secrets (read-only, under umask 077), within `budget_s`."""
    old = os.umask(0o077)
    try:
        store = open_reader(path)
        try:
            return scan_stored(store.conn, budget_s, progress)
        finally:
            store.close()
    finally:
        os.umask(old)


def schema_version(path: str) -> int:
    """The schema version the store file claims (0: no store yet); refuses a foreign or newer file."""
    return check_header(path)


def sqlite_library() -> tuple[str, bool]:
    """The SQLite version hivemem binds, and whether it has FTS5."""
    return str(apsw.sqlite_lib_version()), "ENABLE_FTS5" in apsw.compile_options


def sqlite_supported(version: str, fts5: bool) -> bool:
    return tuple(int(x) for x in version.split(".")[:3]) >= MIN_SQLITE and fts5
