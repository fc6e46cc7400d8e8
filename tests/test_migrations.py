"""Schema versions (SPEC 5.4, C03): the committed v1 fixture serves unchanged; newer or foreign files are refused
and left byte-for-byte untouched."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable

import apsw
import pytest

from conftest import Home

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


def test_fixture_is_a_small_current_store() -> None:
    path = os.path.join(FIXTURES, "store-v1.db")
    assert os.path.getsize(path) <= 512 * 1024  # one 16 KiB page per table and index, and little else
    assert header(path) == (HVMM, 1)
    assert not os.path.exists(path + "-wal")


def test_v1_fixture_opens_unchanged_and_serves(home: Home) -> None:
    store = install(home, os.path.join(FIXTURES, "store-v1.db"))
    status = home.ok("store", "status")
    assert (status["schema_version"], status["path"], status["memories"]) == (1, store, 3)
    found = home.ok("memory", "search", "--query", "small pull requests")["results"]
    assert [h["id"] for h in found] == ["m1"]
    zig = home.ok("memory", "get", "--id", "m2")
    assert (zig["content"], zig["revision"], zig["tags"]) == (
        "The api repository pins Zig 0.13 with a .zigversion file",
        2,
        ["zig", "build"],
    )
    assert zig["author"] == {"principal": "owner", "label": "owner"}
    assert [v["revision"] for v in home.ok("memory", "history", "--id", "m2")["versions"]] == [2, 1]
    assert home.ok("memory", "add", "--space", "user", "--content", "added after the fixture")["id"] == "m4"
    assert not os.path.exists(os.path.join(home.paths.data_dir, "backups")), "no migration should have run"
    home.stop_daemon()
    assert header(store) == (HVMM, 1)


def newer_store(path: str) -> None:
    shutil.copyfile(os.path.join(FIXTURES, "store-v1.db"), path)
    conn = apsw.Connection(path)
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    assert header(path) == (HVMM, 2)


def foreign_store(path: str) -> None:
    conn = apsw.Connection(path)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('mine')")
    conn.close()


def not_sqlite(path: str) -> None:
    with open(path, "wb") as f:
        f.write(b"these are my notes, not a database\n" * 100)


@pytest.mark.parametrize(
    ("make", "found"), [(newer_store, 2), (foreign_store, None), (not_sqlite, None)], ids=["newer", "foreign", "text"]
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
    assert error["data"]["supported"] == 1
    served = home.cli("serve", timeout=20)
    assert served.code == 10, served
    assert home.daemon_pid() is None
    assert sha256(store) == before
    assert not os.path.exists(store + "-wal") and not os.path.exists(store + "-shm")
    assert not os.path.exists(os.path.join(home.paths.data_dir, "backups"))
