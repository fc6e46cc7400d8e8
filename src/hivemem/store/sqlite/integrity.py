"""Integrity checks (docs/operations.md): each returns a list of findings, and none means healthy.

A finding is `{check, memory?, event?, detail}`. `doctor` runs the quick check on the store file
itself, read-only and only while no daemon runs (docs/protocol.md); `store check` runs the full set on the
daemon's own connection. New checks are one function each, added to CHECKS.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import TypeVar

import apsw

from hivemem import progress
from hivemem.params import MAX_TAGS, valid_tag
from hivemem.records import CheckReport, Finding
from hivemem.store.connection import Connection
from hivemem.store.sqlite import fts5, schema, vectors
from hivemem.store.sqlite.audit import verify_chain
from hivemem.store.sqlite.db import all_rows, connect, open_file
from hivemem.store.sqlite.migrations import check_header
from hivemem.store.sqlite.secret_scan import Progress, Report, scan_stored

Check = Callable[[Connection], list[Finding]]
C = TypeVar("C", bound=Connection)  # a backend's own connection, for the checks that are its own
MIN_SQLITE = (3, 42, 0)
SCHEMA_VERSION = schema.VERSION  # the version a new store is created at


def finding(check: str, detail: str, *, memory: int | None = None, event: int | None = None) -> Finding:
    """One finding; `memory` is shown as its wire id `m<N>`, `event` as the event id."""
    if memory is not None and event is not None:
        return {"check": check, "memory": f"m{memory}", "event": event, "detail": detail}
    if memory is not None:
        return {"check": check, "memory": f"m{memory}", "detail": detail}
    if event is not None:
        return {"check": check, "event": event, "detail": detail}
    return {"check": check, "detail": detail}


def _pragma_check(conn: Connection, pragma: str) -> list[Finding]:
    rows = all_rows(conn, f"PRAGMA {pragma}(100)")
    return [] if rows == [("ok",)] else [finding("integrity", str(row[0])) for row in rows]


def quick(conn: Connection) -> list[Finding]:
    """`PRAGMA quick_check`: the pages and b-trees, without matching indexes to their tables."""
    return _pragma_check(conn, "quick_check")


def integrity(conn: Connection) -> list[Finding]:
    """`PRAGMA integrity_check`: everything quick_check does, and every index against its table."""
    return _pragma_check(conn, "integrity_check")


def foreign_keys(conn: Connection) -> list[Finding]:
    """`PRAGMA foreign_key_check`: rows that name a parent row that does not exist."""
    rows = all_rows(conn, "PRAGMA foreign_key_check")
    found = []
    for table, rowid, parent, _ in rows:
        memory = rowid if table == "memories" else None
        found.append(finding("foreign_keys", f"{table} row {rowid} names a missing {parent} row", memory=memory))
    return found


def events_chain(conn: Connection) -> list[Finding]:
    """The audit log's hash chain (docs/governance.md): the first event where it breaks."""
    broken = verify_chain(conn)
    if broken is None:
        return []
    return [finding("events.chain", f"event {broken} does not match the chain", event=broken)]


def fts_missing(conn: Connection) -> list[Finding]:
    """Live, active memories without a memory_fts row."""
    rows = all_rows(conn, "SELECT id FROM memory_fts_source WHERE id NOT IN (SELECT id FROM memory_fts_docsize)")
    return [finding("fts.missing", "live, active memory has no search index row", memory=r[0]) for r in rows]


def fts_orphaned(conn: Connection) -> list[Finding]:
    """memory_fts rows for a memory that is absent, deleted, draft or archived."""
    rows = all_rows(conn, "SELECT id FROM memory_fts_docsize WHERE id NOT IN (SELECT id FROM memory_fts_source)")
    return [finding("fts.orphaned", "search index row for a memory that is absent, deleted, draft or archived",
                    memory=r[0]) for r in rows]  # fmt: skip


def fts_mismatched(conn: Connection) -> list[Finding]:
    """FTS5's own integrity check, which re-tokenizes every live, active row (title, content, tags, space token).

    FTS5 says only that the index and the rows differ, not where; a missing or orphaned row also makes it fail,
    so it is reported as a mismatch only when neither explains it.
    """
    try:
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")
    except apsw.ReadOnlyError:  # a read-only handle (doctor's file check) cannot run it; `store check` can
        return []
    except apsw.Error as exc:
        if fts_missing(conn) or fts_orphaned(conn):
            return []
        return [finding("fts.mismatched", f"the search index differs from the canonical rows: {exc}")]
    return []


def tags_invalid(conn: Connection) -> list[Finding]:
    """Stored tags outside the grammar, more than 16, or repeated."""
    found = []
    for memory, tags in all_rows(conn, "SELECT id, tags FROM memories WHERE tags != ''"):
        items = tags.split(" ")
        if len(items) > MAX_TAGS or len(set(items)) != len(items) or not all(map(valid_tag, items)):
            found.append(finding("tags.invalid", "tags break the tag grammar, repeat, or are over 16", memory=memory))
    return found


def _normal(sql: str | None) -> str:
    return " ".join((sql or "").split())


SCHEMAS = {1: schema.V1, 2: schema.V2, 3: schema.V3}  # the SQL that makes a store of each version


@functools.cache
def expected_schema(version: int = schema.VERSION) -> dict[str, str]:
    """name -> SQL of every schema object a new store of `version` has (tables, the FTS table and its shadows,
    the view the index reads, indexes)."""
    conn = open_file(":memory:", apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    try:
        fts5.prepare(conn)
        conn.execute(SCHEMAS[version])
        return {name: _normal(sql) for name, sql in all_rows(conn, "SELECT name, sql FROM sqlite_master")}
    finally:
        conn.close()


def foreign_objects(conn: Connection, version: int) -> list[dict[str, str]]:
    """Every schema object that a store of `version` made by hivemem does not have, or has with other SQL:
    [{type, name}]. SQLite's own tables and automatic indexes (`sqlite_*`) are SQLite's, not foreign."""
    want = expected_schema(version) if version in SCHEMAS else {}
    rows = all_rows(conn, "SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
    return [{"type": kind, "name": name} for kind, name, sql in rows
            if not (kind in ("table", "index") and name.startswith("sqlite_"))
            and want.get(name) != _normal(sql)]  # fmt: skip


@functools.cache
def expected_fts_settings(version: int = schema.VERSION) -> tuple[tuple[str, object], ...]:
    """The FTS5 settings (`memory_fts_config`, but its `version`, which FTS5 raises itself) a new store of
    `version` has: `secure-delete` on, so a purge leaves no token of its text in the index (docs/security.md)."""
    conn = open_file(":memory:", apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    try:
        fts5.prepare(conn)
        conn.execute(SCHEMAS[version])
        return tuple(sorted(all_rows(conn, "SELECT k, v FROM memory_fts_config WHERE k != 'version'")))
    finally:
        conn.close()


def foreign_settings(conn: Connection, version: int) -> list[dict[str, str]]:
    """Every FTS5 setting that a store of `version` made by hivemem does not have, or has with another value
    (`secure-delete` off keeps purged text in the index): [{type: "setting", name: "memory_fts.<key>"}]."""
    if version not in SCHEMAS:
        return []
    want = dict(expected_fts_settings(version))
    found: dict[str, object] = dict(all_rows(conn, "SELECT k, v FROM memory_fts_config WHERE k != 'version'"))
    return [{"type": "setting", "name": f"memory_fts.{key}"} for key in sorted(set(want) | set(found))
            if want.get(key) != found.get(key)]  # fmt: skip


def schema_unexpected(conn: Connection) -> list[Finding]:
    """Schema objects whose SQL differs from what this version creates, or that are missing or extra."""
    found = {name: _normal(sql) for name, sql in all_rows(conn, "SELECT name, sql FROM sqlite_master")}
    want = expected_schema()
    out = [finding("schema.unexpected", f"{name}: missing") for name in sorted(set(want) - set(found))]
    out += [finding("schema.unexpected", f"{name}: SQL differs from the expected") for name in sorted(want)
            if name in found and found[name] != want[name]]  # fmt: skip
    out += [finding("schema.unexpected", f"{name}: not part of the schema") for name in sorted(set(found) - set(want))
            if not name.startswith("sqlite_")]  # fmt: skip
    if "memory_fts_config" in found:
        out += [finding("schema.unexpected", f"{o['name']}: setting differs from the expected")
                for o in foreign_settings(conn, schema.VERSION)]  # fmt: skip
    return out


def vectors_length(conn: Connection) -> list[Finding]:
    """Vectors whose byte length is not a whole number of f32s, or differs from the rest of their model's."""
    rows = all_rows(conn, "SELECT memory, model, length(embedding) FROM memory_vectors ORDER BY memory")
    usual: dict[str, int] = {}
    for _, model, size in rows:
        usual.setdefault(model, size)
    return [finding("vectors.length", f"{size} bytes; {model} vectors here have {usual[model]}", memory=memory)
            for memory, model, size in rows if size % 4 or size == 0 or size != usual[model]]  # fmt: skip


QUICK: dict[str, Check] = {"integrity": quick}
CHECKS: dict[str, Check] = {
    "integrity": integrity,
    "foreign_keys": foreign_keys,
    "fts.missing": fts_missing,
    "fts.orphaned": fts_orphaned,
    "fts.mismatched": fts_mismatched,
    "tags.invalid": tags_invalid,
    "schema.unexpected": schema_unexpected,
    "vectors.length": vectors_length,
    "events.chain": events_chain,
}
FTS: dict[str, Check] = {name: CHECKS[name] for name in ("fts.missing", "fts.orphaned", "fts.mismatched")}
WRITER_ONLY = ("fts.mismatched",)  # FTS5's integrity-check is an INSERT command: a read-only handle cannot run it


def run(conn: C, checks: Mapping[str, Callable[[C], list[Finding]]] = CHECKS,
        errors: tuple[type[BaseException], ...] = (apsw.Error,)) -> list[Finding]:  # fmt: skip
    """Every check's findings; a check that the database cannot finish (one of `errors`) is a finding of its
    own."""
    found: list[Finding] = []
    for done, (name, check) in enumerate(checks.items()):
        progress.report("checks", done, len(checks))
        try:
            found += check(conn)
        except errors as exc:
            found.append(finding(name, f"could not run: {exc}"))
    progress.report("checks", len(checks), len(checks))
    return found


def report(findings: list[Finding], skipped: tuple[str, ...] = ()) -> CheckReport:
    """`{ok, findings, counts}` as `store check` answers it (docs/operations.md), with `skipped` naming the checks that
    did not run (on a read-only connection)."""
    counts: dict[str, int] = {}
    for found in findings:
        counts[found["check"]] = counts.get(found["check"], 0) + 1
    done: CheckReport = {"ok": not findings, "findings": findings, "counts": counts}
    if skipped:
        done["skipped"] = list(skipped)
    return done


def check_file(path: str, checks: dict[str, Check] = QUICK) -> list[Finding]:
    """Open the store file read-only (under umask 077, so nothing it creates is readable by others) and check it.

    Raises the store's error (unsupported.store_schema, failed.store) when it cannot be opened at all.
    """
    old = os.umask(0o077)
    try:
        conn = _open_read_only(path)
        try:
            return run(conn, checks)
        finally:
            conn.close()
    finally:
        os.umask(old)


def scan_secrets(path: str, budget_s: float, progress: Progress | None = None) -> Report:
    """Scan the live memories of the store file for secrets (read-only, under umask 077), within `budget_s`."""
    old = os.umask(0o077)
    try:
        conn = _open_read_only(path)
        try:
            return scan_stored(conn, budget_s, progress)
        finally:
            conn.close()
    finally:
        os.umask(old)


def embedding_state(path: str) -> tuple[int, int, str | None]:
    """(vectors, pending memories, `updated` of the oldest pending one) in the store file, read-only."""
    old = os.umask(0o077)
    try:
        conn = _open_read_only(path)
        try:
            return vectors.count(conn), vectors.pending_count(conn), vectors.oldest_pending(conn)
        finally:
            conn.close()
    finally:
        os.umask(old)


def _open_read_only(path: str) -> Connection:
    """A read-only connection to an existing store file of this version (a foreign or newer one is refused)."""
    check_header(path)
    return connect(path, readonly=True)


def schema_version(path: str) -> int:
    """The schema version the store file claims (0: no store yet); refuses a foreign or newer file."""
    return check_header(path)


def sqlite_library() -> tuple[str, bool]:
    """The SQLite version hivemem binds, and whether it has FTS5."""
    return str(apsw.sqlite_lib_version()), "ENABLE_FTS5" in apsw.compile_options


def sqlite_supported(version: str, fts5: bool) -> bool:
    return tuple(int(x) for x in version.split(".")[:3]) >= MIN_SQLITE and fts5
