"""One transaction per verb (docs/architecture.md): store functions nest as savepoints inside the verb's transaction, a
verb commits once, and a verb that fails halfway leaves nothing behind, on real store files and a real daemon."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import apsw
import pytest

from conftest import Home, raises
from hivemem import ops
from hivemem.auth import owner
from hivemem.client import DaemonClient
from hivemem.errors import Failed, NotFound
from hivemem.store import SQLiteStore, open_store
from hivemem.store.sqlite.db import atomic, connect

REFUSE_ADDED = (
    "CREATE TRIGGER refuse_halfway BEFORE INSERT ON events WHEN NEW.type = 'memory.added' "
    "BEGIN SELECT RAISE(ABORT, 'refused halfway'); END"
)
REFUSE_MOVE_AT_ITS_LAST_EVENT = (  # the old memory's event: the new memory, its version and event are written
    "CREATE TRIGGER refuse_halfway BEFORE INSERT ON events WHEN NEW.type = 'memory.moved' "
    "AND NEW.data LIKE '%\"to\"%' BEGIN SELECT RAISE(ABORT, 'refused halfway'); END"
)
REFUSE_SECOND_RECALL = (
    "CREATE TRIGGER refuse_halfway BEFORE INSERT ON events WHEN NEW.type = 'memory.recalled' "
    "AND EXISTS (SELECT 1 FROM events WHERE type = 'memory.recalled') "
    "BEGIN SELECT RAISE(ABORT, 'refused halfway'); END"
)


@pytest.fixture
def store() -> Iterator[SQLiteStore]:
    made = open_store(tempfile.mkdtemp(prefix="hm-tx-") + "/store.db")
    try:
        yield made
    finally:
        made.close()


def meta(conn: apsw.Connection, key: str) -> str | None:
    rows = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchall()
    return str(rows[0][0]) if rows else None


def put(conn: apsw.Connection, key: str) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES (?, 'x')", (key,))


def test_atomic_nests_as_savepoints_and_a_failed_inner_change_is_undone_alone(store: SQLiteStore) -> None:
    conn = store.conn
    with atomic(conn):
        put(conn, "outer")
        with atomic(conn):
            put(conn, "kept")
        with pytest.raises(NotFound), atomic(conn):
            put(conn, "undone")
            with atomic(conn):
                put(conn, "undone too")
            raise NotFound("memory", "m9 not found")
        assert not conn.getautocommit(), "an inner failure must not end the outer transaction"
    assert [meta(conn, k) for k in ("outer", "kept", "undone", "undone too")] == ["x", "x", None, None]


def test_a_failed_first_change_is_undone_alone_and_the_transaction_goes_on(store: SQLiteStore) -> None:
    """The first change of a verb's transaction takes no savepoint (D132): undone alone, all the same."""
    conn = store.conn
    with store.transaction():
        with pytest.raises(NotFound), atomic(conn):
            put(conn, "undone")
            with atomic(conn):
                put(conn, "undone too")
            raise NotFound("memory", "m9 not found")
        assert not conn.getautocommit(), "an inner failure must not end the outer transaction"
        with atomic(conn):
            put(conn, "kept")
        with pytest.raises(NotFound), atomic(conn):  # after a change: a savepoint
            put(conn, "undone last")
            raise NotFound("memory", "m9 not found")
    assert [meta(conn, k) for k in ("undone", "undone too", "kept", "undone last")] == [None, None, "x", None]


def test_an_outer_failure_undoes_what_inner_changes_released(store: SQLiteStore) -> None:
    conn = store.conn
    with pytest.raises(Failed), atomic(conn):
        with atomic(conn):
            put(conn, "released")
        conn.execute("INSERT INTO meta(key, value) VALUES ('released', 'twice')")  # a constraint error
    assert conn.getautocommit()
    assert meta(conn, "released") is None


def test_a_second_connection_sees_a_verb_only_once_it_has_committed(store: SQLiteStore) -> None:
    other = connect(store.path)
    try:
        with atomic(store.conn):
            put(store.conn, "pending")
            with atomic(store.conn):
                put(store.conn, "pending too")
            assert meta(other, "pending") is None
        assert meta(other, "pending") == meta(other, "pending too") == "x"
    finally:
        other.close()


def test_every_write_verb_commits_exactly_once(store: SQLiteStore) -> None:
    commits: list[int] = []

    def counted() -> bool:
        commits.append(1)
        return False  # go on and commit

    store.conn.set_commit_hook(counted)
    me = owner()

    def once(verb: str, **params: object) -> dict[str, object]:
        before = len(commits)
        result = ops.dispatch(store, me, verb, params)
        assert len(commits) - before == 1, f"{verb} committed {len(commits) - before} times"
        return result

    session = once("session.start", harness="claude-code", harness_session="h1")["session"]
    first = once("memory.add", space="user", content="apples are red", session=session)
    second = once("memory.add", space="user", content="apples are green")
    once("memory.update", id=first["id"], revision=1, content="apples are often red")
    once("memory.search", query="apples", spaces=["user"], limit=10, record_usage=True)
    once("memory.forget", spaces=["user"], limit=10)  # two deletes, one transaction
    once("memory.restore", id=second["id"])
    once("memory.delete", id=second["id"], revision=3)
    once("memory.purge", id=first["id"])
    third = once("memory.add", space="user", content="pears are yellow")
    draft = once("memory.capture", space="user", content="pears are inferred to be sweet")
    once("memory.confirm", id=draft["id"], revision=1)
    once("memory.challenge", id=draft["id"], revision=2, outcome="needs_review")
    once("memory.relate", source=draft["id"], target=third["id"], relation="related")
    once("memory.unrelate", source=draft["id"], target=third["id"], relation="related")
    once("memory.archive", id=draft["id"], revision=3)
    moved = once("memory.move", id=draft["id"], revision=4, space="project/x")
    assert ops.dispatch(store, me, "memory.get", {"id": moved["id"]})["status"] == "archived"
    once("session.end", session=session)
    once("client.add", name="reader", grants=[{"right": "read", "scope": "*"}])
    once("client.remove", name="reader")
    once("session.purge", session=session)


@pytest.mark.sqlite_only  # a SQLite trigger in the store file; tests/test_postgres.py has the team store's
def test_a_memory_add_that_fails_at_its_event_leaves_no_row_text_or_version(home: Home, owner: DaemonClient) -> None:
    with apsw.Connection(home.paths.store) as conn:
        conn.execute(REFUSE_ADDED)
    error = raises(owner, "memory.add", space="user", content="written halfway")
    assert error.code == "failed.store" and "refused halfway" in error.message
    with apsw.Connection(home.paths.store) as conn:
        conn.execute("DROP TRIGGER refuse_halfway")
        assert conn.execute("SELECT count(*) FROM memories").fetchall() == [(0,)]
        assert conn.execute("SELECT count(*) FROM memory_versions").fetchall() == [(0,)]
    assert owner.call("memory.search", query="halfway", spaces=["user"])["results"] == []
    assert owner.call("memory.add", space="user", content="written whole")["id"] == "m1"  # no number was spent


@pytest.mark.sqlite_only  # a SQLite trigger in the store file
def test_a_move_failing_after_its_new_memory_is_written_leaves_the_old_whole(home: Home, owner: DaemonClient) -> None:
    ident = owner.call("memory.add", space="user", content="plums ripen in august", tags=["fruit"])["id"]

    def state() -> list[object]:
        conn = apsw.Connection(home.paths.store)
        try:
            return [conn.execute(sql).fetchall() for sql in (
                "SELECT id, space, deleted, revision FROM memories ORDER BY id",
                "SELECT memory, revision, action FROM memory_versions ORDER BY memory, revision",
                "SELECT id, type, memory FROM events ORDER BY id",
                "SELECT seq FROM sqlite_sequence WHERE name = 'memories'",
                "SELECT id FROM memory_fts_docsize ORDER BY id",  # the search index's entries
            )]  # fmt: skip
        finally:
            conn.close()

    before = state()
    with apsw.Connection(home.paths.store) as conn:
        conn.execute(REFUSE_MOVE_AT_ITS_LAST_EVENT)
    error = raises(owner, "memory.move", id=ident, revision=1, space="project/x")
    assert error.code == "failed.store" and "refused halfway" in error.message
    with apsw.Connection(home.paths.store) as conn:
        conn.execute("DROP TRIGGER refuse_halfway")
    assert state() == before, "no new memory, version, event or id; the old memory neither deleted nor bumped"
    assert owner.call("memory.get", id=ident)["revision"] == 1
    assert [h["id"] for h in owner.call("memory.search", query="plums ripen")["results"]] == [ident]
    assert owner.call("memory.list", spaces=["project/x"])["memories"] == []
    moved = owner.call("memory.move", id=ident, revision=1, space="project/x")
    assert moved["id"] == "m2", "the failed move spent no id"
    assert [h["id"] for h in owner.call("memory.search", query="plums ripen")["results"]] == ["m2"]


@pytest.mark.sqlite_only  # a SQLite trigger in the store file; tests/test_postgres.py has the team store's
def test_a_search_whose_usage_fails_halfway_records_no_usage(home: Home, owner: DaemonClient) -> None:
    for text in ("pears are sweet", "pears are ripe", "pears are green"):
        owner.call("memory.add", space="user", content=text)
    with apsw.Connection(home.paths.store) as conn:
        conn.execute(REFUSE_SECOND_RECALL)
    error = raises(owner, "memory.search", query="pears", spaces=["user"], record_usage=True)
    assert error.code == "failed.store"
    assert owner.call("events.list", types=["memory.recalled"])["events"] == []
    with apsw.Connection(home.paths.store) as conn:
        conn.execute("DROP TRIGGER refuse_halfway")
    found = owner.call("memory.search", query="pears", spaces=["user"], record_usage=True)["results"]
    assert len(found) == 3
    assert len(owner.call("events.list", types=["memory.recalled"])["events"]) == 3
