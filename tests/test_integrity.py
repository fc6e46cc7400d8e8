"""Integrity checks (docs/operations.md): findings {check, memory?, event?, detail} on real store files, none when
healthy."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from hivemem import ops
from hivemem.auth import owner
from hivemem.errors import HivememError
from hivemem.store import open_store
from hivemem.store.sqlite import integrity


@pytest.fixture
def store_file(tmp_path: Path) -> str:
    """A real store with memories and their events, closed and checkpointed."""
    path = str(tmp_path / "store.db")
    store = open_store(path)
    for i in range(40):
        ops.dispatch(store, owner(), "memory.add", {"space": "user", "content": f"memory {i} " + "words " * 50})
    ops.dispatch(store, owner(), "session.start", {"harness": "test"})
    store.close()
    return path


def edit(path: str, *statements: str) -> None:
    """Change the file behind hivemem's back, with foreign keys off as a careless tool would."""
    conn = apsw.Connection(path)
    try:
        conn.execute("PRAGMA foreign_keys=OFF")
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


def test_a_healthy_store_has_no_findings(store_file: str) -> None:
    assert integrity.check_file(store_file) == []
    findings = integrity.check_file(store_file, integrity.CHECKS)
    assert findings == []
    assert integrity.report(findings) == {"ok": True, "findings": [], "counts": {}}


def test_an_edited_event_breaks_the_chain_at_that_event(store_file: str) -> None:
    edit(store_file, "UPDATE events SET data = '{\"forged\":true}' WHERE id = 7")
    findings = integrity.check_file(store_file, integrity.CHECKS)
    assert [(f["check"], f.get("event")) for f in findings] == [("events.chain", 7)]
    assert set(findings[0]) == {"check", "event", "detail"}
    assert integrity.report(findings)["counts"] == {"events.chain": 1}
    assert integrity.check_file(store_file) == [], "the quick check looks at pages only"


def test_a_dangling_reference_is_a_foreign_key_finding_naming_the_memory(store_file: str) -> None:
    edit(store_file, "UPDATE memories SET session = 999 WHERE id = 3")
    findings = integrity.check_file(store_file, integrity.CHECKS)
    assert findings == [
        {"check": "foreign_keys", "memory": "m3", "detail": "memories row 3 names a missing sessions row"}
    ]
    report = integrity.report(findings)
    assert (report["ok"], report["counts"]) == (False, {"foreign_keys": 1})


def test_a_corrupt_page_is_an_integrity_finding(store_file: str) -> None:
    conn = apsw.Connection(store_file)
    page = int(str(conn.execute("PRAGMA page_size").fetchall()[0][0]))
    conn.close()
    pages = os.path.getsize(store_file) // page
    assert pages > 4
    with open(store_file, "r+b") as f:
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)
    findings = integrity.check_file(store_file)
    assert findings and {f["check"] for f in findings} == {"integrity"}
    assert all(f["detail"] for f in findings)


def test_a_file_that_is_not_a_store_cannot_be_checked(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"not a database\n" * 100)
    with pytest.raises(HivememError) as caught:
        integrity.check_file(str(path))
    assert caught.value.code == "unsupported.store_schema"
