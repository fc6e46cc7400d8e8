"""The secret scan of a large import beside its apply (D201): a document imported with the scan split between
the worker process and the daemon gives exactly what the whole check in the daemon gives, the same rows or the
same first problem at the same pointer, and no memory is written before it is scanned. In process, on a real
store file; the worker's threshold and piece size are made small so that small documents take that path."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from conftest import BACKENDS, pg_database
from hivemem import ops
from hivemem.auth import Principal, owner
from hivemem.errors import HivememError
from hivemem.store import SQLiteStore, open_store, transfer_scan
from hivemem.store.sqlite import audit, memories
from hivemem.store.sqlite.db import all_rows, scalar

if TYPE_CHECKING:
    from hivemem.store.postgres.store import PostgresStore

    Opened = SQLiteStore | PostgresStore  # the store fixture's, one per backend

AKIA = "AKIA" + "IOSFODNN7Q2ZX4TR"  # an AWS key id shape, assembled so this file holds none
TABLES = ("memories", "memory_versions", "memory_relations", "sessions", "events")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A store on each backend (the import's apply is shared; D201's scan is the same on both)."""
    directory = tempfile.mkdtemp(prefix="hm-scan-")
    if request.param == "sqlite":
        opened = open_store(os.path.join(directory, "store.db"))
        yield opened
        opened.close()
        return
    with pg_database() as url:
        team = open_store(os.path.join(directory, "store.db"), url=url)
        yield team
        team.close()


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every document through the worker, in pieces of 3 memories."""
    monkeypatch.setattr(transfer_scan, "WORKER_MIN_BYTES", 0)
    monkeypatch.setattr(transfer_scan, "CHUNK", 3)
    yield


def doc(n: int, **changes: Any) -> dict[str, Any]:
    """A document of n memories (with a session, a relation and authors), `changes` applied by memory index:
    {i: {member: value}}, or `relations=`/`sessions=` replacing those lists."""
    items = [{"id": f"m{i + 1}", "space": "user" if i % 2 else "project/x", "content": f"memory number {i}",
              "tags": ["t"], "author": {"principal": "g1", "label": "codex"},
              **({"session": "s1"} if i == 0 else {})} for i in range(n)]  # fmt: skip
    for i, members in changes.pop("memories", {}).items():
        if members.pop("_whole", False):
            items[i] = members
        else:
            items[i].update(members)
    out: dict[str, Any] = {
        "format": "hivemem.export", "version": 1, "store_id": "s-1", "memories": items,
        "relations": [{"source": "m1", "target": f"m{n}", "relation": "related", "reason": "linked"}],
        "sessions": [{"session": "s1", "harness": "codex", "started": "2026-10-01T00:00:00.000Z"}],
    }  # fmt: skip
    out.update(changes)
    return out


def counts(store: Opened) -> tuple[int, ...]:
    return tuple(int(scalar(store.conn, f"SELECT count(*) FROM {t}")) for t in TABLES)


def outcome(store: Opened, document: dict[str, Any], principal: Principal | None = None,
            **params: Any) -> Any:  # fmt: skip
    """The import's result, or its error as (code, at, kind); the store must be unchanged after an error."""
    path = os.path.join(store.data_dir, "doc.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)
    before = counts(store)
    try:
        return ops.dispatch(store, principal or owner(), "store.import", {"path": path, **params})
    except HivememError as exc:
        assert counts(store) == before, "nothing half-written"
        return exc.code, exc.data.get("at"), exc.data.get("kind")


LEAKED = "key " + AKIA
CASES: list[tuple[str, dict[str, Any]]] = [
    ("first memory", {"memories": {0: {"content": LEAKED}}}),
    ("a middle memory", {"memories": {13: {"content": LEAKED}}}),
    ("the last memory", {"memories": {29: {"content": LEAKED}}}),
    ("two secrets", {"memories": {22: {"content": LEAKED}, 7: {"title": LEAKED}}}),
    ("a tag and a source", {"memories": {5: {"source": LEAKED}, 4: {"tags": ["a", "b"], "title": LEAKED}}}),
    ("an author label", {"memories": {17: {"author": {"principal": "g1", "label": AKIA}}}}),
    ("provenance", {"memories": {26: {"provenance": {"kind": "file", "path": LEAKED}}}}),
    ("a bad member after a secret", {"memories": {10: {"content": LEAKED}, 20: {"kind": "nope"}}}),
    ("a bad member before a secret", {"memories": {10: {"kind": "nope"}, 20: {"content": LEAKED}}}),
    ("a secret and a bad member in one memory", {"memories": {12: {"content": LEAKED, "kind": "nope"}}}),
    ("a bad member first in a memory with a secret", {"memories": {12: {"_whole": True, "id": "m13",
                                                                         "space": "user", "kind": "nope",
                                                                         "content": LEAKED}}}),
    ("a secret first in a memory with a bad member", {"memories": {12: {"_whole": True, "id": "m13",
                                                                         "space": "user", "content": LEAKED,
                                                                         "kind": "nope"}}}),
    ("a duplicate id after a secret", {"memories": {3: {"content": LEAKED}, 25: {"id": "m1"}}}),
    ("a secret in a relation and a memory", {"memories": {28: {"content": LEAKED}},
                                             "relations": [{"source": "m1", "target": "m2", "relation": "related",
                                                            "reason": LEAKED}]}),
    ("a secret in a relation", {"relations": [{"source": "m1", "target": "m2", "relation": "related",
                                              "reason": LEAKED}]}),
    ("a bad relation and a secret", {"memories": {28: {"content": LEAKED}},
                                     "relations": [{"source": "m1", "target": "m99", "relation": "related"}]}),
    ("a secret in a session", {"memories": {2: {"content": LEAKED}},
                               "sessions": [{"session": "s1", "harness": "codex", "cwd": "/x/" + LEAKED,
                                             "started": "2026-10-01T00:00:00.000Z"}]}),
    ("clean", {}),
    ("duplicates and a deleted memory", {"memories": {6: {"content": "memory number 2", "space": "project/x"},
                                                       8: {"deleted": "2026-10-01T00:00:00.000Z"}}}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "changes"), CASES, ids=[c[0] for c in CASES])
def test_the_split_scan_gives_what_the_whole_check_gives(store: Opened, monkeypatch: pytest.MonkeyPatch,
                                                         name: str, changes: dict[str, Any]) -> None:  # fmt: skip
    document = doc(30, **changes)
    for dry_run in (True, False):
        whole = outcome(store, document, dry_run=dry_run)
        with monkeypatch.context() as m:
            m.setattr(transfer_scan, "WORKER_MIN_BYTES", 0)
            m.setattr(transfer_scan, "CHUNK", 3)
            shared = outcome(store, document, dry_run=dry_run)
        if isinstance(whole, tuple) or dry_run:
            assert shared == whole, name
        else:  # the whole check's import added the memories: the split one finds them all duplicates
            assert shared["planned"]["add"] == 0 or dry_run
            assert shared["planned"]["add"] + shared["planned"]["duplicate"] == (
                whole["planned"]["add"] + whole["planned"]["duplicate"]
            )


def test_a_split_import_writes_what_a_whole_one_writes(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rows, versions and events (hash chain included) as the import checked whole in the daemon."""
    document = doc(40, memories={3: {"title": "T", "provenance": {"kind": "file", "path": "a.md", "line": 2}},
                                 9: {"status": "draft"}})  # fmt: skip
    stores = []
    for threshold in (1 << 62, 0):
        monkeypatch.setattr(transfer_scan, "WORKER_MIN_BYTES", threshold)
        directory = tempfile.mkdtemp(prefix="hm-scan-")
        opened = open_store(os.path.join(directory, "store.db"))
        assert outcome(opened, document)["planned"]["add"] == 40
        stores.append(opened)
    try:
        queries = (f"SELECT {memories.COLUMNS} FROM memories ORDER BY id",
                   "SELECT memory, revision, action, kind, title, content, tags, status, meta FROM memory_versions "
                   "ORDER BY memory", "SELECT id, type, space, memory, data FROM events ORDER BY id",
                   "SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'memory' ORDER BY rowid")  # fmt: skip
        for sql in queries:
            whole, shared = (untimed(all_rows(s.conn, sql)) for s in stores)
            assert shared == whole, sql
        for s in stores:
            assert audit.verify_chain(s.conn) is None
    finally:
        for s in stores:
            s.close()


def untimed(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows without their times (each import writes its own)."""
    return [tuple(v for v in r if not (isinstance(v, str) and v[:2] == "20" and v.endswith("Z"))) for r in rows]


def test_nothing_is_written_before_it_is_scanned(store: Any, split: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    written: list[tuple[int, int]] = []
    scans: list[transfer_scan.Scan] = []
    start, insert = transfer_scan.Scan.__init__, memories.insert_many

    def started(self: transfer_scan.Scan, *args: Any) -> None:
        start(self, *args)
        scans.append(self)

    def inserting(*args: Any) -> list[int]:
        scan = scans[-1]
        written.append((scan.prefix * transfer_scan.CHUNK, int(scalar(store.conn, "SELECT count(*) FROM memories"))
                        + len(args[3])))  # fmt: skip
        return insert(*args)

    monkeypatch.setattr(transfer_scan.Scan, "__init__", started)
    monkeypatch.setattr(memories, "insert_many", inserting)
    monkeypatch.setattr("hivemem.store.sqlite.transfer.BATCH", 4)
    assert outcome(store, doc(30))["planned"]["add"] == 30
    assert len(written) == 8
    assert all(cleared >= end for cleared, end in written), written
    assert outcome(store, doc(30, memories={29: {"content": "new " + LEAKED}}))[0] == "invalid_params.secret_content"


def test_a_failed_or_stalled_worker_leaves_the_scan_to_the_daemon(
    store: Any, split: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker that is never started, one that exits at once, one that says nonsense, one that answers nothing.
    monkeypatch.setattr(transfer_scan, "STALL_S", 0.05)
    commands = [("/nonexistent/python", ("-m", "x")), ("/bin/false", ()), (sys.executable, ("-m", "this")),
                (sys.executable, ("-c", "import time; time.sleep(30)"))]  # fmt: skip
    for command, args in commands:
        monkeypatch.setattr(transfer_scan.sys, "executable", command)
        monkeypatch.setattr(transfer_scan, "COMMAND", args)
        assert outcome(store, doc(12, memories={7: {"content": LEAKED}})) == (
            "invalid_params.secret_content",
            "/memories/7/content",
            "aws-access-token",
        )
        fresh = doc(12, memories={i: {"content": f"{command} {args} {i}"} for i in range(12)})
        assert outcome(store, fresh)["planned"]["add"] == 12


def test_a_client_is_refused_before_the_document_is_read(store: Opened, split: None) -> None:
    """Only the owner imports (docs/security.md): a client is refused at dispatch, whatever the document holds."""
    grants = ({"right": "write", "scope": "*"}, {"right": "read", "scope": "*"})
    added = ops.dispatch(store, owner(), "client.add", {"name": "writer", "grants": list(grants)})
    writer = Principal(added["principal"], "writer", grants)
    assert outcome(store, doc(20, memories={15: {"content": LEAKED}}), writer)[0] == "denied.admin"
    assert outcome(store, doc(20), writer)[0] == "denied.admin"
