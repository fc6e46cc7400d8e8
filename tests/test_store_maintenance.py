"""store check, repair-fts and backup (docs/operations.md; conformance C14, C16) and purge of backups and exports
(docs/memories.md).

Each corruption is made behind the daemon's back on the real store file while no daemon runs, as a careless
tool would; then the CLI starts a daemon and reports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import apsw
import pytest

from conftest import Home, fails
from hivemem.store.sqlite import fts_index
from hivemem.store.sqlite.db import Connection, connect

Edit = Callable[[Connection], object]


def filled(home: Home, n: int = 6) -> list[str]:
    ids = [home.ok("memory", "add", "--space", "user", "--content", f"memory number {i} about zig builds",
                   "--tags", "zig,build")["id"] for i in range(n)]  # fmt: skip
    return ids


def edit(home: Home, change: Edit) -> None:
    """Stop the daemon and change the store file directly (with the FTS tokenizer registered)."""
    home.stop_daemon()
    conn = connect(home.paths.store)
    try:
        conn.execute("PRAGMA foreign_keys=OFF")
        change(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def canonical(home: Home) -> list[Any]:
    """Every canonical row, read from a stopped store."""
    home.stop_daemon()
    conn = connect(home.paths.store, readonly=True)
    try:
        tables = ("memories", "memory_versions", "memory_relations", "sessions", "clients", "events")
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables]
    finally:
        conn.close()


def check(home: Home) -> dict[str, Any]:
    result = home.cli("store", "check", "--json")
    assert result.code == 0, result
    report: dict[str, Any] = result.json
    return report


def test_a_healthy_store_checks_ok(home: Home) -> None:
    filled(home)
    assert check(home) == {"ok": True, "findings": [], "counts": {}}
    fails(home, "store", "check", code="denied.admin", exit_code=4, token=None)


CORRUPTIONS: list[tuple[str, Edit, str, str | None, bool]] = [
    ("missing", lambda c: fts_index.remove(c, 2), "fts.missing", "m2", True),
    ("orphaned", lambda c: c.execute("UPDATE memories SET status = 'draft' WHERE id = 3"), "fts.orphaned", "m3", True),
    ("mismatched", lambda c: c.execute("UPDATE memories SET content = 'other words entirely' WHERE id = 4"),
     "fts.mismatched", None, True),
    ("bad tag", lambda c: c.execute("UPDATE memories SET tags = 'Bad_Tag' WHERE id = 5"), "tags.invalid", "m5", False),
    ("altered schema", lambda c: c.execute("CREATE INDEX sneaky ON memories(title)"), "schema.unexpected", None, False),
    ("dropped index", lambda c: c.execute("DROP INDEX memories_review"), "schema.unexpected", None, False),
    ("broken chain", lambda c: c.execute("UPDATE events SET data = '{\"x\":1}' WHERE id = 3"), "events.chain", None,
     False),
    ("bad vector", lambda c: c.execute("INSERT INTO memory_vectors VALUES (1, 'm', x'0102')"), "vectors.length", "m1",
     False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "change", "found", "memory", "repairable"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS]
)
def test_each_corruption_is_found_and_the_index_ones_repaired(
    home: Home, name: str, change: Edit, found: str, memory: str | None, repairable: bool
) -> None:
    filled(home)
    edit(home, change)
    report = check(home)
    assert report["ok"] is False
    mine = [f for f in report["findings"] if f["check"] == found]
    also = {"tags.invalid": {"fts.mismatched"}}.get(found, set())  # the index holds the old tags too
    assert {f["check"] for f in report["findings"]} == {found, *also}, report
    assert report["counts"][found] == len(mine) >= 1
    if memory is not None:
        assert mine[0]["memory"] == memory
    if found == "events.chain":
        assert mine[0]["event"] == 3
    preview = home.ok("store", "repair-fts")
    assert preview["applied"] is False
    before = canonical(home)
    if not repairable:
        if found in ("tags.invalid", "schema.unexpected"):
            error = fails(home, "store", "repair-fts", "--apply", "--confirm", code="failed.repair_refused",
                          exit_code=1)  # fmt: skip
            assert error["data"]["findings"][0]["check"] == found
            assert not os.path.exists(home.paths.backups) or os.listdir(home.paths.backups) == []
        return
    assert [f["check"] for f in preview["findings"]] == [found]
    assert canonical(home) == before, "the preview writes nothing"
    repaired = home.ok("store", "repair-fts", "--apply", "--confirm")
    assert repaired["applied"] is True and repaired["findings"] == preview["findings"]
    assert os.path.dirname(repaired["backup"]) == home.paths.backups
    assert os.stat(repaired["backup"]).st_mode & 0o777 == 0o600
    assert check(home) == {"ok": True, "findings": [], "counts": {}}
    assert canonical(home) == before, "canonical rows and the audit log are never changed by repair"
    assert home.ok("memory", "search", "--query", "memory number")["results"], "search works again"


def test_apply_needs_confirm_and_repair_is_not_on_mcp(home: Home) -> None:
    filled(home, 2)
    error = fails(home, "store", "repair-fts", "--apply", code="invalid_params.missing", exit_code=2)
    assert error["data"]["param"] == "confirm"
    assert not os.path.exists(home.paths.backups)
    from hivemem.manifest import BY_NAME

    assert not any(BY_NAME[v].mcp for v in ("store.repair_fts", "store.check", "store.backup", "store.import"))


def test_repair_backups_are_kept_to_the_retention_setting(home: Home) -> None:
    home.config("[backups]\nkeep = 2\n")
    filled(home, 2)
    made = [home.ok("store", "repair-fts", "--apply", "--confirm")["backup"] for _ in range(4)]
    assert sorted(os.listdir(home.paths.backups)) == sorted(os.path.basename(p) for p in made[-2:])


def test_backup_is_a_validated_private_copy_that_never_replaces(home: Home) -> None:
    ids = filled(home, 3)
    work = os.path.join(home.base, "work")
    os.mkdir(work)
    result = home.ok("store", "backup", "--path", "copy.db", cwd=work)
    path = os.path.join(work, "copy.db")
    assert result == {"path": path, "bytes": os.path.getsize(path)}
    assert os.stat(path).st_mode & 0o777 == 0o600
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("SELECT count(*) FROM memories").fetchall() == [(len(ids),)]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    before = os.path.getsize(path)
    fails(home, "store", "backup", "--path", path, code="conflict.path_exists", exit_code=5)
    assert os.path.getsize(path) == before
    os.symlink(os.path.join(home.base, "target.db"), os.path.join(work, "link.db"))
    fails(home, "store", "backup", "--path", os.path.join(work, "link.db"), code="denied.path", exit_code=4)
    assert not os.path.exists(os.path.join(home.base, "target.db"))
    assert sorted(os.listdir(work)) == ["copy.db", "link.db"], "no temporary file is left behind"
    fails(home, "store", "backup", "--path", path + "2", code="denied.admin", exit_code=4, token=None)


def scan(root: str, needle: bytes) -> list[str]:
    """Every file under `root` whose bytes hold `needle`."""
    found = []
    for base, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(base, name), "rb") as f:
                if needle in f.read():
                    found.append(os.path.join(base, name))
    return found


def test_purge_erases_the_text_from_backups_and_exports_it_manages(home: Home) -> None:
    marker = "purgeable-marker-7f3a9c text that must go"
    target = home.ok("memory", "add", "--space", "user", "--content", marker)["id"]
    home.ok("memory", "add", "--space", "user", "--content", "a neighbour that stays")
    home.ok("store", "repair-fts", "--apply", "--confirm")  # a backup in backups/
    export = home.ok("store", "export")["path"]  # an export in exports/
    mine = os.path.join(home.base, "mine.db")
    home.ok("store", "backup", "--path", mine)  # a copy the user made elsewhere
    needle = b"purgeable-marker-7f3a9c"
    assert len(scan(home.paths.data_dir, needle)) >= 3
    home.ok("memory", "purge", "--id", target)
    home.stop_daemon()
    assert scan(home.paths.data_dir, needle) == [], "no file hivemem manages keeps the text"
    assert needle in open_bytes(mine), "copies made elsewhere are the user's"
    assert b"a neighbour that stays" in open_bytes(export)


def open_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_restore_swaps_in_a_backup_and_keeps_the_current_store(home: Home) -> None:
    first = home.ok("memory", "add", "--space", "user", "--content", "from before the backup")["id"]
    copy = os.path.join(home.base, "copy.db")
    home.ok("store", "backup", "--path", copy)
    later = home.ok("memory", "add", "--space", "user", "--content", "written after the backup")["id"]
    connected = home.client()  # an agent still connected: the daemon keeps serving, restore refuses
    try:
        connected.call("whoami")
        fails(home, "store", "restore", "--path", copy, code="conflict.daemon_running", exit_code=5)
    finally:
        connected.close()
    home.stop_daemon()
    fails(home, "store", "restore", "--path", copy, code="denied.admin", exit_code=4, token=None)
    result = home.ok("store", "restore", "--path", "copy.db")  # relative to the CLI's working directory
    assert result["from"] == copy and result["path"] == home.paths.store
    assert result["check"] == {"ok": True, "findings": [], "counts": {}}
    assert os.path.dirname(result["previous"]) == home.paths.backups
    assert os.stat(home.paths.store).st_mode & 0o777 == 0o600
    assert [m["id"] for m in home.ok("memory", "list")["memories"]] == [first]
    fails(home, "memory", "get", "--id", later, code="not_found.memory", exit_code=3)
    home.stop_daemon()
    back = home.ok("store", "restore", "--path", result["previous"])  # and back again
    assert back["check"]["ok"] is True
    assert {m["id"] for m in home.ok("memory", "list")["memories"]} == {first, later}


def test_restore_refuses_what_is_not_a_good_hivemem_store(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "the store as it is")
    home.stop_daemon()
    before = open_bytes(home.paths.store)
    foreign = os.path.join(home.base, "other-app.db")
    conn = apsw.Connection(foreign)
    conn.execute("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('not ours')")
    conn.close()
    fails(home, "store", "restore", "--path", foreign, code="unsupported.store_schema", exit_code=10)
    good = os.path.join(home.base, "good.db")
    home.ok("store", "backup", "--path", good)
    home.stop_daemon()
    broken = os.path.join(home.base, "broken.db")
    with open(broken, "wb") as f:
        data = open_bytes(good)
        f.write(data[: len(data) // 2])
    fails(home, "store", "restore", "--path", broken, code="failed.backup", exit_code=1)
    fails(home, "store", "restore", "--path", os.path.join(home.base, "none.db"), code="invalid_params.path",
          exit_code=2)  # fmt: skip
    assert open_bytes(home.paths.store) == before, "the store is untouched"
    assert not os.path.exists(home.paths.backups) or os.listdir(home.paths.backups) == []


@pytest.mark.parametrize(
    ("name", "change", "found", "memory", "repairable"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS]
)
def test_the_online_check_finds_the_same_on_a_read_connection(
    home: Home, name: str, change: Edit, found: str, memory: str | None, repairable: bool
) -> None:
    """`store check --online` runs on one of the daemon's readers: everything but FTS5's own check, which it names."""
    filled(home)
    edit(home, change)
    online = home.ok("store", "check", "--online")
    assert online["skipped"] == ["fts.mismatched"]
    full = check(home)
    assert "skipped" not in full
    expected = [f for f in full["findings"] if f["check"] != "fts.mismatched"]
    assert online["findings"] == expected and online["ok"] is (not expected)
    assert online["counts"] == {k: n for k, n in full["counts"].items() if k != "fts.mismatched"}
    if found != "fts.mismatched":
        assert [f for f in online["findings"] if f["check"] == found], online


def test_the_online_check_never_waits_for_the_write_lock(home: Home) -> None:
    """Another process holds the store's write lock: the writer's check waits and gives up, the reader's does not."""
    filled(home, 3)
    edit(home, lambda c: c.execute("UPDATE events SET data = '{\"x\":1}' WHERE id = 2"))
    assert home.ok("store", "status")["memories"] == 3  # the daemon runs
    holder = apsw.Connection(home.paths.store)
    holder.execute("BEGIN IMMEDIATE")
    try:
        online = home.ok("store", "check", "--online")
        assert [(f["check"], f.get("event")) for f in online["findings"]] == [("events.chain", 2)]
        fails(home, "store", "check", code="unavailable.store_busy", exit_code=6)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert check(home)["counts"] == {"events.chain": 1}


def test_the_online_check_of_a_reader_that_saw_an_older_index_finds_nothing(home: Home) -> None:
    """A reader's FTS5 keeps the index structure it last read; after the writer's commits, the online check must
    read the index as it is now, not report the blobs merged away since as corruption (docs/decisions.md D234)."""
    for round_ in range(4):
        for n in range(12):
            home.ok("memory", "add", "--space", "user", "--content", f"heron seen on the lake, round {round_} no {n}")
        online = home.ok("store", "check", "--online")
        assert online["ok"] and online["findings"] == [], online
