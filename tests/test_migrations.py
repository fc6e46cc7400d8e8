"""Schema versions (docs/schema.md; conformance C03): the committed v1 fixture migrates to version 3 and serves, the v2
fixture gains the time indexes of version 3, the v3 fixture serves unchanged, a failed migration leaves version 1;
newer or foreign files are refused and left byte-for-byte untouched."""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable

import apsw
import pytest

from conftest import Home, fails, on_a_terminal, wait_for
from hivemem.store.sqlite import db
from hivemem.store.sqlite.audit import verify_chain

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
HVMM = 1213615437


def install(home: Home, source: str) -> str:
    """Put a database file where this home's store lives (0600 in a 0700 directory)."""
    store = home.paths.store
    os.makedirs(os.path.dirname(store), mode=0o700, exist_ok=True)
    shutil.copyfile(source, store)
    os.chmod(store, 0o600)
    return store


def header(path: str) -> tuple[int, int]:
    """(application_id, user_version) read from the file header."""
    with open(path, "rb") as f:
        head = f.read(100)
    return int.from_bytes(head[68:72], "big"), int.from_bytes(head[60:64], "big")


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_fixtures_are_small_real_stores() -> None:
    for version in (1, 2, 3):
        path = os.path.join(FIXTURES, f"store-v{version}.db")
        assert os.path.getsize(path) <= 512 * 1024  # one 16 KiB page per table and index, and little else
        assert header(path) == (HVMM, version)
        assert not os.path.exists(path + "-wal")


def test_a_migration_shows_its_progress_on_a_terminal(home: Home) -> None:
    """The command whose call starts the daemon on an old store shows the migration's progress on a terminal,
    then its own result; with --json, or in a pipe, it prints nothing of it (the other tests here read
    stderr empty)."""
    install(home, os.path.join(FIXTURES, "store-v1.db"))
    code, out, terminal = on_a_terminal(home, "store", "status", "--json")
    assert code == 0 and '"schema_version":3' in out.replace(" ", "")
    assert terminal == "", "silent with --json, as every progress line is"
    home.stop_daemon()
    shutil.rmtree(os.path.join(home.paths.data_dir, "backups"))
    install(home, os.path.join(FIXTURES, "store-v1.db"))
    code, out, terminal = on_a_terminal(home, "store", "status")
    assert code == 0, (out, terminal)
    lines = [part.removesuffix("\x1b[K") for part in terminal.split("\r") if part.strip()]
    assert lines[0].startswith("hivemem: migrating ") and "from schema 1 to 2" in lines[0], repr(terminal)
    assert "hivemem: search index: 3 of 3 memories" in lines, repr(terminal)
    assert any("from schema 2 to 3" in line for line in lines), repr(terminal)
    assert lines[-1].startswith("hivemem: migrated ") and terminal.endswith("to schema 3\x1b[K\r\n"), repr(terminal)
    home.stop_daemon()
    code, out, terminal = on_a_terminal(home, "store", "status")
    assert code == 0 and terminal == "", "a store already upgraded starts without a word"


def test_v1_fixture_migrates_to_v3_and_serves(home: Home) -> None:
    source = os.path.join(FIXTURES, "store-v1.db")
    store = install(home, source)
    status = home.ok("store", "status")  # the first call starts the daemon, which migrates before it listens
    assert (status["schema_version"], status["path"], status["memories"]) == (3, store, 3)
    found = home.ok("memory", "search", "--query", "small pull requests")["results"]
    assert [h["id"] for h in found] == ["m1"]
    assert [h["id"] for h in home.ok("memory", "search", "--query", "zigversion", "--spaces", "project/api")
            ["results"]] == ["m2"]  # fmt: skip
    zig = home.ok("memory", "get", "--id", "m2")
    assert (zig["content"], zig["revision"], zig["tags"]) == (
        "The api repository pins Zig 0.13 with a .zigversion file",
        2,
        ["zig", "build"],
    )
    assert zig["author"] == {"principal": "owner", "label": "owner"}
    assert [v["revision"] for v in home.ok("memory", "history", "--id", "m2")["versions"]] == [2, 1]
    added = home.ok("memory", "add", "--space", "user", "--content", "项目使用北京的服务器")
    assert added["id"] == "m4"
    assert [h["id"] for h in home.ok("memory", "search", "--query", "北京")["results"]] == ["m4"]
    home.stop_daemon()
    assert header(store) == (HVMM, 3)
    backup = os.path.join(home.paths.data_dir, "backups", "store.db.bak-v1")
    assert header(backup) == (HVMM, 1) and os.stat(backup).st_mode & 0o777 == 0o600
    with open(os.path.join(home.paths.logs, "daemon.log"), encoding="utf-8") as f:
        log = f.read()
    assert "from schema 1 to 2" in log and "search index: 3 of 3 memories" in log


def readiness_lines(fd: int, timeout: float = 30) -> list[str]:
    """What a daemon writes on its readiness pipe until it closes it (after `ready` or its error)."""
    deadline, data = time.monotonic() + timeout, b""
    while select.select([fd], [], [], max(deadline - time.monotonic(), 0))[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            return data.decode().splitlines()
        data += chunk
    raise AssertionError(f"the daemon did not close its readiness pipe in {timeout} s: {data!r}")


def test_the_client_that_starts_the_daemon_is_told_the_migration_progress(home: Home) -> None:
    """docs/schema.md: progress lines go to logs/daemon.log and, before `ready`, to the client that started the
    daemon (on the readiness pipe every starting client hands it, as `hivemem` itself starts one)."""
    store = install(home, os.path.join(FIXTURES, "store-v1.db"))
    read_end, write_end = os.pipe()
    try:
        subprocess.run([sys.executable, "-m", "hivemem", "serve", "--on-demand", "--ready-fd", str(write_end)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                       env=home.env, pass_fds=(write_end,), timeout=30, check=True)  # fmt: skip
    finally:
        os.close(write_end)
    try:
        lines = readiness_lines(read_end)
    finally:
        os.close(read_end)
    assert lines[-1] == "ready" and all(line.startswith("progress ") for line in lines[:-1]), lines
    told = [line.removeprefix("progress ") for line in lines[:-1]]
    backups = os.path.join(home.paths.data_dir, "backups")
    assert told == [f"migrating {store} from schema 1 to 2 (backup in {backups})",
                    "search index: 3 of 3 memories", f"migrated {store} to schema 2",
                    f"migrating {store} from schema 2 to 3 (backup in {backups})",
                    f"migrated {store} to schema 3"]  # fmt: skip
    assert all(line in home.daemon_log() for line in told)
    assert home.ok("store", "status")["schema_version"] == 3  # the daemon so started serves


def test_purge_after_a_migration_erases_the_memory_from_the_version_1_backup(home: Home) -> None:
    install(home, os.path.join(FIXTURES, "store-v1.db"))
    home.ok("memory", "purge", "--id", "m2")
    home.stop_daemon()
    backup = os.path.join(home.paths.data_dir, "backups", "store.db.bak-v1")
    assert header(backup) == (HVMM, 1)
    with open(backup, "rb") as f:
        assert b"zigversion" not in f.read()
    conn = apsw.Connection(backup)
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2  # type: ignore[index]
    conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")  # its index agrees
    conn.close()


def indexes(path: str) -> set[str]:
    conn = apsw.Connection(path)
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()


def test_v2_fixture_migrates_to_v3_with_time_indexes_and_serves(home: Home) -> None:
    """m003_time_indexes: the live rows by updated and by created; a windowed search and list use them."""
    store = install(home, os.path.join(FIXTURES, "store-v2.db"))
    assert not {"memories_updated", "memories_created"} & indexes(store)
    status = home.ok("store", "status")
    assert (status["schema_version"], status["memories"]) == (3, 4)
    assert [h["id"] for h in home.ok("memory", "search", "--query", "北京 服务器")["results"]] == ["m4"]
    old = home.ok("memory", "search", "--query", "zig", "--since", "2000-01-01", "--by-created")
    assert [h["id"] for h in old["results"]] == ["m2"] and old["window"]["on"] == "created"
    assert home.ok("memory", "search", "--query", "zig", "--since", "today", "--by-created")["results"] == []
    assert home.ok("store", "check")["ok"] is True  # the new indexes are what a new store has
    home.stop_daemon()
    assert header(store) == (HVMM, 3)
    assert {"memories_updated", "memories_created"} <= indexes(store)
    assert header(os.path.join(home.paths.data_dir, "backups", "store.db.bak-v2")) == (HVMM, 2)


def test_v3_fixture_opens_unchanged_and_serves(home: Home) -> None:
    store = install(home, os.path.join(FIXTURES, "store-v3.db"))
    status = home.ok("store", "status")
    assert (status["schema_version"], status["memories"]) == (3, 4)
    assert [h["id"] for h in home.ok("memory", "search", "--query", "北京 服务器")["results"]] == ["m4"]
    listed = home.ok("memory", "list", "--since", "2000-01-01", "--authors", "owner", "--limit", "2")
    assert [m["id"] for m in listed["memories"]] == ["m4", "m3"] and listed["next"] == "m3"
    assert not os.path.exists(os.path.join(home.paths.data_dir, "backups")), "no migration should have run"
    home.stop_daemon()
    assert header(store) == (HVMM, 3)


def v1_store_with(path: str, rows: list[tuple[str, str]]) -> None:
    """The v1 fixture plus `rows` (space, content), written as version 1 wrote them: the raw content hash."""
    shutil.copyfile(os.path.join(FIXTURES, "store-v1.db"), path)
    conn = apsw.Connection(path)
    with conn:
        for space, content in rows:
            conn.execute(
                "INSERT INTO memories(space, kind, content, content_sha256, capture_key, principal, updated_by, "
                "created, updated) VALUES (?, 'note', ?, ?, ?, 'owner', 'owner', ?, ?)",
                (space, content, hashlib.sha256(content.encode()).digest(), content.lower(), NOW, NOW),
            )
            memory = conn.last_insert_rowid()
            conn.execute("INSERT INTO memory_versions VALUES (?, 1, 'add', 'note', '', '', '', 'active', '{}', "
                         "'owner', 'owner', ?)", (memory, NOW))  # fmt: skip
            conn.execute("INSERT INTO memory_fts(rowid, title, content, tags) VALUES (?, '', ?, '')", (memory, content))
    conn.close()


NOW = "2026-11-01T10:00:00.000Z"
NFC, NFD = "Café au lait at nine", unicodedata.normalize("NFD", "Café au lait at nine")


def test_migration_hashes_nfc_text_and_keeps_one_of_two_equal_memories(home: Home) -> None:
    """Two live memories of one space that differ only in normalization become one: the other is soft-deleted."""
    source = os.path.join(home.base, "v1.db")
    v1_store_with(source, [("user", NFC), ("user", NFD), ("project/api", NFD), ("user", "东京的服务器")])
    store = install(home, source)
    assert NFC != NFD
    status = home.ok("store", "status")
    assert (status["schema_version"], status["memories"], status["deleted"]) == (3, 6, 1)
    fails(home, "memory", "get", "--id", "m5", code="not_found.memory", exit_code=3)
    gone = home.ok("memory", "get", "--id", "m5", "--include-deleted")
    assert gone["revision"] == 2 and gone["content"] == NFD
    assert [v["action"] for v in home.ok("memory", "history", "--id", "m5")["versions"]] == ["delete", "add"]
    client = home.client()
    event = client.call("events.list")["events"][0]  # newest first
    client.close()
    assert (event["type"], event["memory"], event["data"]) == (
        "memory.deleted", "m5", {"duplicate_of": "m4", "reason": "normalization"})  # fmt: skip
    assert home.ok("memory", "add", "--space", "user", "--content", NFC) == {"id": "m4", "revision": 1,
                                                                             "changed": False}  # fmt: skip
    assert [h["id"] for h in home.ok("memory", "search", "--query", "cafe")["results"]] == ["m6", "m4"]
    assert [h["id"] for h in home.ok("memory", "search", "--query", "服务器")["results"]] == ["m7"]
    home.stop_daemon()
    conn = db.Connection(store)
    assert verify_chain(conn) is None  # the migration's event extends the hash chain
    hashes = dict(conn.execute("SELECT id, content_sha256 FROM memories").fetchall())  # type: ignore[arg-type, var-annotated]
    contents = dict(conn.execute("SELECT id, content FROM memories").fetchall())  # type: ignore[arg-type, var-annotated]
    conn.close()
    assert all(bytes(hashes[m]) == hashlib.sha256(unicodedata.normalize("NFC", c).encode()).digest()
               for m, c in contents.items())  # fmt: skip


def test_a_failed_migration_leaves_version_1(home: Home) -> None:
    store = install(home, os.path.join(FIXTURES, "store-v1.db"))
    conn = apsw.Connection(store)
    conn.execute("CREATE TABLE memory_fts_source(x)")  # the name version 2 needs for its view
    conn.close()
    result = home.cli("store", "status", "--json")
    assert result.code == 1, result
    assert result.json["error"]["code"] == "failed.store_migration"
    assert wait_for(lambda: home.daemon_pid() is None)
    assert header(store) == (HVMM, 1)
    conn = apsw.Connection(store)
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 3  # type: ignore[index]
    assert conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'zig'").fetchone()[0] == 1  # type: ignore[index]
    conn.close()


def newer_store(path: str) -> None:
    shutil.copyfile(os.path.join(FIXTURES, "store-v1.db"), path)
    conn = apsw.Connection(path)
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    assert header(path) == (HVMM, 4)


def foreign_store(path: str) -> None:
    conn = apsw.Connection(path)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('mine')")
    conn.close()


def not_sqlite(path: str) -> None:
    with open(path, "wb") as f:
        f.write(b"these are my notes, not a database\n" * 100)


@pytest.mark.parametrize(
    ("make", "found"), [(newer_store, 4), (foreign_store, None), (not_sqlite, None)], ids=["newer", "foreign", "text"]
)
def test_newer_or_foreign_files_are_refused_untouched(home: Home, make: Callable[[str], None], found: int) -> None:
    source = os.path.join(home.base, "source.db")
    make(source)
    store = install(home, source)
    before = sha256(store)
    result = home.cli("memory", "search", "--query", "notes", "--json")
    assert result.code == 10, result
    error = result.json["error"]
    assert error["code"] == "unsupported.store_schema"
    assert error["data"]["found"] == found
    assert error["data"]["supported"] == 3
    served = home.cli("serve", timeout=20)
    assert served.code == 10, served
    assert home.daemon_pid() is None
    assert sha256(store) == before
    assert not os.path.exists(store + "-wal") and not os.path.exists(store + "-shm")
    assert not os.path.exists(os.path.join(home.paths.data_dir, "backups"))
