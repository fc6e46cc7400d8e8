"""The team store on PostgreSQL (docs/team.md): what differs from SQLite by design, bad input, and several machines
(separate homes, each with its own daemon) on one database. Every test here runs on a real server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pytest

from conftest import Home, fails, isolated_home, wait_for
from hivemem import auth, manifest, ops
from hivemem.errors import HivememError
from hivemem.store.connection import Lock, Locking
from hivemem.store.limits import Limits
from hivemem.store.postgres import schema
from hivemem.store.postgres.conn import Connection, Cursor, Retry
from hivemem.store.postgres.store import BACKOFF_MAX_S, BACKOFF_S, RETRIES, PostgresStore, again, pause
from hivemem.store.sqlite import memories

pytestmark = pytest.mark.skipif("postgresql" not in os.environ.get("HIVEMEM_TEST_BACKENDS", "postgresql"),
                                reason="HIVEMEM_TEST_BACKENDS leaves PostgreSQL out")  # fmt: skip
SOAK = os.environ.get("HIVEMEM_SOAK") == "1"


@pytest.fixture
def pg() -> Iterator[Home]:
    """A home whose store is a fresh PostgreSQL database."""
    with isolated_home("postgresql") as h:
        yield h


def sql(home: Home, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A statement on the home's database, outside hivemem."""
    with psycopg.connect(home.store_url, autocommit=True) as conn:
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


@contextlib.contextmanager
def machine(url: str) -> Iterator[Home]:
    """Another machine: a home of its own (config, socket, daemon) on the same database. Its calls go through
    the CLI or `client()`, which take the home's own environment."""
    h = Home(tempfile.mkdtemp(prefix="hm-", dir="/tmp"), url)
    h.config("")
    try:
        yield h
    finally:
        h.stop_daemon()
        shutil.rmtree(h.base, ignore_errors=True)


def share_owner(source: Home, target: Home) -> None:
    """Copy the owner key, as a team does with `store init`'s owner.key."""
    os.makedirs(target.paths.data_dir, mode=0o700, exist_ok=True)
    shutil.copyfile(source.paths.owner_key, target.paths.owner_key)
    os.chmod(target.paths.owner_key, 0o600)


WORKER = r"""
import json, sys
from hivemem.client import DaemonClient
from hivemem.config import load
from hivemem.errors import HivememError
memory, rounds = sys.argv[1], int(sys.argv[2])
client = DaemonClient(load(), token="@owner")
done = conflicts = 0
while done < rounds:
    got = client.call("memory.get", id=memory)
    value = int(got["content"].split()[-1])
    try:
        client.call("memory.update", id=memory, revision=got["revision"], content=f"counter {value + 1}")
        done += 1
    except HivememError as exc:
        if exc.code not in ("conflict.memory_revision", "unavailable.store_busy"):
            raise
        conflicts += 1
print(json.dumps({"done": done, "conflicts": conflicts}))
"""


def worker(home: Home, *args: str) -> subprocess.Popen[bytes]:
    env = {**home.env, "HIVEMEM_TOKEN": "@owner"}
    return subprocess.Popen([sys.executable, "-c", WORKER, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip


# The schema and its guard


def test_store_init_creates_the_schema_and_shows_the_owner_key_once(pg: Home) -> None:
    first = pg.ok("store", "init")
    assert first["created"] is True and first["owner_key"].startswith("hm1.owner.")
    assert oct(os.stat(pg.paths.owner_key).st_mode & 0o777) == "0o600"
    with open(pg.paths.owner_key) as f:
        assert f.read().strip() == first["owner_key"]
    again = pg.ok("store", "init")
    assert again["created"] is False and "owner_key" not in again
    assert "password" not in again["store"]
    versions = dict(sql(pg, "SELECT key, value FROM meta WHERE key IN ('application', 'schema_version')"))
    assert versions == {"application": "hivemem", "schema_version": str(schema.VERSION)}
    assert pg.ok("whoami")["principal"] == "owner"


def test_a_key_value_connection_string_reaches_the_team_store_and_status_never_shows_its_password(pg: Home) -> None:
    """`store.url` in libpq's key=value form (docs/team.md, docs/decisions.md D345); the test server trusts local
    logins, so a password given is never asked for, yet must not show in status or the log."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    hidden = "Sw0rdf1sh-" + "9q"  # assembled, so that the repository holds no credential-shaped text
    given = {"pass" + "word": hidden}  # libpq's keyword, built so the line does not read as a credential
    pg.config(f"[store]\nurl = {json.dumps(make_conninfo(pg.store_url, **given))}\n")
    pg.ok("store", "init")
    added = pg.ok("memory", "add", "--space", "user", "--content", "reached by key=value")
    assert pg.ok("memory", "get", "--id", added["id"])["content"] == "reached by key=value"
    shown = pg.ok("store", "status")["path"]
    assert hidden not in shown and conninfo_to_dict(shown)["dbname"] == conninfo_to_dict(pg.store_url)["dbname"]
    with open(os.path.join(pg.env["XDG_STATE_HOME"], "hivemem", "logs", "daemon.log")) as f:
        assert hidden not in f.read()


def test_a_database_of_another_application_is_refused_untouched(pg: Home) -> None:
    sql(pg, "CREATE TABLE invoices (id int)")
    error = fails(pg, "memory", "add", "--space", "user", "--content", "x", code="unsupported.store_schema",
                  exit_code=10)  # fmt: skip
    assert "not a hivemem store" in error["message"]
    assert [r[0] for r in sql(pg, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")] == ["invoices"]


def test_a_newer_schema_is_refused(pg: Home) -> None:
    pg.ok("store", "init")
    sql(pg, "UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    error = fails(pg, "memory", "add", "--space", "user", "--content", "x", code="unsupported.store_schema",
                  exit_code=10)  # fmt: skip
    assert error["data"]["found"] == "9" and error["data"]["supported"] == schema.VERSION


def search_index_options(home: Home) -> list[str] | None:
    rows = sql(home, "SELECT reloptions FROM pg_class WHERE relname = 'memories_search'")
    return rows[0][0] if rows else None


def test_a_new_store_builds_its_search_index_without_a_pending_list(pg: Home) -> None:
    pg.ok("store", "init")
    assert search_index_options(pg) == ["fastupdate=off"]


def test_a_version_1_store_migrates_its_search_index_and_still_finds_its_memories(pg: Home) -> None:
    pg.ok("store", "init")
    pg.ok("memory", "add", "--space", "user", "--content", "the gateway retries three times")
    # A version 1 store, as hivemem before version 2 left it: the GIN index keeps a pending list.
    sql(pg, "ALTER INDEX memories_search SET (fastupdate = on)")
    sql(pg, "UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    pg.stop_daemon()
    assert search_index_options(pg) == ["fastupdate=on"]
    found = pg.ok("memory", "search", "--query", "gateway", "--space", "user")
    assert [r["id"] for r in found["results"]] == ["m1"]
    assert search_index_options(pg) == ["fastupdate=off"]
    assert sql(pg, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(schema.VERSION),)]
    assert pg.ok("store", "status")["schema_version"] == schema.VERSION


def test_a_version_3_store_gains_the_time_indexes_and_windowed_search_works(pg: Home) -> None:
    """Schema 4 (docs/team.md, docs/decisions.md D292): the live rows by updated and by created."""
    pg.ok("store", "init")
    memory = pg.ok("memory", "add", "--space", "user", "--content", "the gateway retries three times")["id"]
    time_indexes = "SELECT count(*) FROM pg_indexes WHERE indexname IN ('memories_updated', 'memories_created')"
    assert sql(pg, time_indexes) == [(2,)]  # a new store has them
    sql(pg, "DROP INDEX memories_updated")
    sql(pg, "DROP INDEX memories_created")
    sql(pg, "UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    pg.stop_daemon()
    found = pg.ok("memory", "search", "--query", "gateway", "--since", "7d", "--authors", "owner")
    assert [r["id"] for r in found["results"]] == [memory] and found["window"]["on"] == "updated"
    assert sql(pg, time_indexes) == [(2,)]
    assert pg.ok("store", "status")["schema_version"] == schema.VERSION == 4


# What differs by design: backup and restore defer to PostgreSQL's tools


def test_backup_and_restore_defer_to_pg_dump(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "kept where it is")
    target = os.path.join(pg.base, "copy.db")
    error = fails(pg, "store", "backup", "--path", target, code="unsupported.store_backup", exit_code=10)
    assert "pg_dump" in error["data"]["fix"] and not os.path.exists(target)
    pg.ok("stop")
    error = fails(pg, "store", "restore", "--path", target, code="unsupported.store_backup", exit_code=10)
    assert "pg_restore" in error["data"]["fix"]
    assert pg.ok("memory", "get", "--id", "m1")["content"] == "kept where it is"


# Storage: parameters, the search column, the chain


def test_memory_text_is_bound_never_inlined(pg: Home) -> None:
    """The server's statement log holds no memory text: every value travels as a parameter."""
    marker = "zq-secret-ish-marker-7731"
    pg.ok("memory", "add", "--space", "user", "--content", f"{marker} in the text")
    pg.ok("memory", "search", "--query", marker)
    statements = sql(pg, "SELECT query FROM pg_stat_activity WHERE datname = current_database()")
    assert not any(marker in (q or "") for (q,) in statements)
    assert sql(pg, "SELECT count(*) FROM memories WHERE content LIKE %s", (f"{marker}%",)) == [(1,)]


def test_cjk_runs_match_as_contiguous_substrings(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "東京都の天気は晴れ")
    pg.ok("memory", "add", "--space", "user", "--content", "京に都あり")
    found = [r["id"] for r in pg.ok("memory", "search", "--query", "京都")["results"]]
    assert found == ["m1"]  # 京都 is inside 東京都; 京 … 都 apart is not a match
    assert pg.ok("memory", "search", "--query", "天都")["results"] == []


def test_recall_weighs_rare_words_as_on_sqlite(pg: Home) -> None:
    """docs/decisions.md D282 on the team store: one rare word is evidence, one common word is not."""
    close = pg.ok("memory", "add", "--space", "user", "--content", "The staging deploy runs make release.")["id"]
    pg.ok("memory", "add", "--space", "user", "--content", "We talked about the difference between two plans.")
    zig = pg.ok("memory", "add", "--space", "user", "--title", "Zig pin", "--content", "We pin Zig 0.13.")["id"]
    for n in range(12):
        pg.ok("memory", "add", "--space", "user", "--content", f"widget queue note {n}")
    both = pg.ok("memory", "add", "--space", "user", "--content", "A widget queue drains every night.")["id"]
    c = pg.client("@owner")
    try:
        for query in ("Explain the difference.", "What time is it?", "the queue at the bakery was long"):
            assert c.call("memory.recall", spaces=["user"], query=query)["count"] == 0, query
        for query, memory in (("how do I make a release", close), ("release", close),
                              ("which Zig version does this repo use?", zig)):  # fmt: skip
            result = c.call("memory.recall", spaces=["user"], query=query)
            assert result["count"] == 1 and f'"id":"{memory}"' in result["text"], query
        result = c.call("memory.recall", spaces=["user"], query="does the widget queue drain at night?")
        assert f'"id":"{both}"' in result["text"].splitlines()[2], "near each other, two common words add up"
    finally:
        c.close()


def test_an_edited_event_breaks_the_chain_and_store_check_names_it(pg: Home) -> None:
    for n in range(3):
        pg.ok("memory", "add", "--space", "user", "--content", f"event source {n}")
    assert pg.ok("store", "check")["ok"] is True
    sql(pg, "UPDATE events SET principal = 'mallory' WHERE id = 2")
    report = pg.ok("store", "check")
    assert report["ok"] is False
    assert [f["event"] for f in report["findings"] if f["check"] == "events.chain"] == [2]


def test_a_search_column_out_of_step_is_found_and_repaired(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "indexed pears")
    pg.ok("memory", "add", "--space", "user", "--content", "indexed plums")
    sql(pg, "UPDATE memories SET search = NULL WHERE id = 1")
    sql(pg, "UPDATE memories SET search = to_tsvector('simple', 'apples') WHERE id = 2")
    checks = sorted(f["check"] for f in pg.ok("store", "check")["findings"])
    assert checks == ["fts.mismatched", "fts.missing"]
    assert pg.ok("memory", "search", "--query", "pears")["results"] == []
    repaired = pg.ok("store", "repair-fts", "--apply", "--confirm")
    assert repaired["applied"] is True and repaired["indexed"] == 2
    assert pg.ok("store", "check")["ok"] is True
    assert [r["id"] for r in pg.ok("memory", "search", "--query", "pears")["results"]] == ["m1"]


def test_a_new_memory_is_written_with_its_search_terms_in_one_row_version(pg: Home) -> None:
    """memory.add puts an active memory's terms in its INSERT (D211): the terms are exactly those the index
    writes for the text (store check re-tokenizes every row), the row is never updated after it, and a draft
    has none until it is confirmed."""
    pg.ok("memory", "add", "--space", "user", "--content", "ship the 東京 release notes", "--title", "Notes",
          "--tags", "docs,release")  # fmt: skip
    draft = pg.ok("memory", "capture", "--space", "user", "--content", "a captured draft about pears")["id"]
    assert pg.ok("store", "check")["ok"] is True
    rows = sql(pg, "SELECT id, search IS NOT NULL, ctid::text FROM memories ORDER BY id")
    assert rows[0] == (1, True, "(0,1)")  # the first tuple of the table: no second version was written
    assert rows[1][:2] == (int(draft[1:]), False)
    assert [r["id"] for r in pg.ok("memory", "search", "--query", "東京 notes")["results"]] == ["m1"]
    pg.ok("memory", "confirm", "--id", draft, "--revision", "1")
    assert [r["id"] for r in pg.ok("memory", "search", "--query", "pears")["results"]] == [draft]
    assert pg.ok("store", "check")["ok"] is True


# Bad input: a failure halfway, the server going away, a statement timeout


def test_a_memory_add_that_fails_at_its_event_leaves_nothing(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "before the trigger")
    sql(
        pg,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.type = 'memory.added' THEN RAISE EXCEPTION 'refused halfway'; END IF; RETURN NEW; END $$",
    )
    sql(pg, "CREATE TRIGGER refuse_halfway BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse()")
    error = fails(pg, "memory", "add", "--space", "user", "--content", "never half written", code="failed.store",
                  exit_code=1)  # fmt: skip
    assert "refused halfway" in error["message"]
    assert sql(pg, "SELECT count(*) FROM memories") == [(1,)]
    assert sql(pg, "SELECT count(*) FROM memory_versions") == [(1,)]
    assert sql(pg, "SELECT count(*) FROM events") == [(1,)]
    sql(pg, "DROP TRIGGER refuse_halfway ON events")
    assert pg.ok("memory", "add", "--space", "user", "--content", "never half written")["id"] == "m3"
    assert pg.ok("store", "check")["ok"] is True


def test_the_server_dropping_the_connection_is_store_busy_and_the_daemon_reconnects(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "before the drop")
    sql(pg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid != pg_backend_pid()")  # fmt: skip
    first = pg.cli("memory", "add", "--space", "user", "--content", "during the drop", "--json")
    if first.code != 0:  # the verb met the dropped connection: a clear, retryable error, nothing written
        assert first.json["error"]["code"] in ("unavailable.store_busy", "failed.store"), first
        assert sql(pg, "SELECT count(*) FROM memories WHERE content = 'during the drop'") == [(0,)]
    again = pg.ok("memory", "add", "--space", "user", "--content", "during the drop")
    assert again["id"] in ("m2", "m3")
    assert sql(pg, "SELECT count(*) FROM memories WHERE content = 'during the drop'") == [(1,)]
    assert pg.ok("memory", "search", "--query", "drop")["results"]
    assert pg.ok("store", "check")["ok"] is True


def test_a_statement_timeout_is_a_clear_error_and_the_daemon_keeps_serving(pg: Home) -> None:
    pg.ok("memory", "add", "--space", "user", "--content", "served before the lock")
    holder = psycopg.connect(pg.store_url)
    try:
        holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        sql(pg, f"ALTER DATABASE \"{pg.store_url.rsplit('/', 1)[1]}\" SET statement_timeout = '300ms'")
        pg.ok("stop")
        error = fails(pg, "memory", "list", code="unavailable.store_busy", exit_code=6)
        assert "statement timeout" in error["message"]
    finally:
        holder.rollback()
        holder.close()
    assert pg.ok("memory", "list")["memories"][0]["id"] == "m1"
    assert pg.daemon_pid() is not None


# Moving between backends


def test_export_from_sqlite_imports_into_postgresql_and_back(tmp_path: Any) -> None:
    with isolated_home() as lite:
        lite.ok("memory", "add", "--space", "user", "--content", "travels between stores", "--tags", "move")
        lite.ok("memory", "add", "--space", "project/a", "--content", "東京都 also travels", "--kind", "fact")
        out = str(tmp_path / "from-sqlite.json")
        lite.ok("store", "export", "--path", out)
    with isolated_home("postgresql") as team:
        imported = team.ok("store", "import", "--path", out)
        assert imported["planned"]["add"] == 2, imported
        assert [r["id"] for r in team.ok("memory", "search", "--query", "京都")["results"]] == ["m2"]
        back = str(tmp_path / "from-postgresql.json")
        team.ok("store", "export", "--path", back)
        again = team.ok("store", "import", "--path", out)
        assert again["planned"]["add"] == 0 and again["planned"]["duplicate"] == 2  # nothing twice
    with isolated_home() as lite2:
        assert lite2.ok("store", "import", "--path", back)["planned"]["add"] == 2
        found = lite2.ok("memory", "search", "--query", "travels")["results"]
        assert sorted(r["space"] for r in found) == ["project/a", "user"]


class Recording(Connection):
    """The team store's own connection, noting each statement the statement modules send it, with the lock it
    declared (None for none)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.sent: list[tuple[str, tuple[Any, ...], Locking | None]] = []

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Cursor:
        self.sent.append((sql, tuple(args), None))
        return super().execute(sql, args)

    def locked(self, lock: Locking, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self.sent.append((sql, tuple(args), lock))
        return super().locked(lock, sql, args)


# The row a statement names by its first condition, `column = ?` or `column = 'literal'`.
READ = re.compile(r"^SELECT .*? FROM (\w+)(?: \w+)? WHERE (\w+) = (\?|'[^']*')")
WRITE = re.compile(r"^(?:UPDATE (\w+) SET .*?|DELETE FROM (\w+)) WHERE (\w+) = (\?|'[^']*')")
Named = tuple[str, str, Any]  # (table, column, value)


def named(match: re.Match[str], table: str, args: tuple[Any, ...]) -> Named:
    """The (table, column, value) of a statement's first condition: its literal, or the argument bound there."""
    last = len(match.groups())
    column, value = match.group(last - 1), match.group(last)
    if value != "?":
        return table, column, value.strip("'")
    return table, column, args[match.string[: match.start(last)].count("?")]


def unlocked_writes(sent: list[tuple[str, tuple[Any, ...], Locking | None]]) -> list[str]:
    """Each UPDATE or DELETE of a verb's transaction whose row the transaction had read without a lock and never
    read under one (nor held the store-wide lock, or an import's, when it read it): a read then write that another
    machine's verb could interleave with (D356). A statement's row is the one its first condition names."""
    found: list[str] = []
    unlocked: set[Named] = set()
    rows: set[Named] = set()
    held: set[str] = set()  # "*" under the store-wide lock, "memories" under an import's
    for sql, args, lock in sent:
        if sql == "BEGIN IMMEDIATE" or sql in ("COMMIT", "ROLLBACK"):
            unlocked, rows, held = set(), set(), set()
        held |= {"*"} if lock is Lock.STORE else {"memories"} if lock is Lock.IMPORT else set()
        read, write = READ.match(sql), WRITE.match(sql)
        if read is not None and not {"*", read.group(1)} & held:
            (unlocked if lock is None else rows).add(named(read, read.group(1), args))
        if write is not None:
            row = named(write, write.group(1) or write.group(2), args)
            if row in unlocked and row not in rows:
                found.append(f"{sql} {args}")
    return found


def every_writing_verb(store: PostgresStore, tmp_path: Any) -> set[str]:
    """Run each verb of the manifest that writes (and the embedding worker's vector write) once; the verbs run."""
    ran: set[str] = set()

    def do(verb: str, **p: Any) -> Any:
        ran.add(verb)
        return ops.dispatch(store, auth.owner(), verb, p)

    s1 = do("session.start", harness="codex", harness_session="one")["session"]
    s2 = do("session.start", harness="codex", harness_session="two", parent=s1, relation="fork")["session"]
    do("session.end", session=s1)
    m1 = do("memory.add", space="user", content="the first text", session=s1)["id"]
    m2 = do("memory.add", space="user", content="the second text")["id"]
    do("memory.update", id=m1, revision=1, content="the first text, edited")
    do("memory.delete", id=m1, revision=2)
    do("memory.restore", id=m1)
    draft = do("memory.capture", space="user", content="a captured draft", session=s2)["id"]
    do("memory.confirm", id=draft, revision=1)
    do("memory.challenge", id=m1, revision=4, outcome="superseded", replacement=m2, confirm=True)
    do("memory.relate", source=m2, target=draft, relation="related")
    do("memory.unrelate", source=m2, target=draft, relation="related")
    do("memory.archive", id=draft, revision=2)
    moved = do("memory.move", id=m2, revision=1, space="project/x")["id"]
    do("memory.search", query="second", record_usage=True)
    store.vectors.put("m", [(int(moved[1:]), "", memories.sha256("the second text"), [1.0, 0.0])])
    do("client.add", name="laptop", grants=[{"right": "read", "scope": "space:user"}])
    do("client.remove", name="laptop")
    out = str(tmp_path / "export.json")
    do("store.export", path=out)
    do("store.import", path=out, space_map={"user": "imported"})
    do("memory.forget", spaces=["imported"])
    do("memory.purge", id=draft)
    do("session.purge", session=s2)
    do("store.check")
    do("store.repair_fts", apply=True, confirm=True)
    with contextlib.suppress(HivememError):  # no embedding provider here: refused, after nothing was read
        do("embeddings.reindex")
    return ran


def test_every_read_a_verb_then_writes_declares_its_lock(pg: Home, tmp_path: Any) -> None:
    """Locks are declared where a statement is written (`lock=Lock.ROW`, D356), not found by the text of the SQL:
    on the team store every verb that writes runs once, and no UPDATE or DELETE may write a row its transaction
    read without a lock. Taking out one declared lock (memory.update's `load`) fails this test."""
    conn = Recording(pg.store_url)
    schema.migrate(conn, lambda _: None)
    store = PostgresStore(conn, pg.store_url, str(tmp_path), Limits())
    try:
        ran = every_writing_verb(store, tmp_path)
    finally:
        store.close()
    writing = {v.name for v in manifest.VERBS if v.writes or any(p.writes for p in v.params)}
    assert writing - ran == set()
    assert unlocked_writes(conn.sent) == []
    assert any(lock is Lock.ROW for _, _, lock in conn.sent)  # the test sees the declared locks


def test_a_write_after_an_unlocked_read_of_its_row_is_found() -> None:
    """The check above, on statements as a verb sends them: a read without a lock, then a write of that row."""
    begin, row = ("BEGIN IMMEDIATE", (), None), (f"SELECT {memories.COLUMNS} FROM memories WHERE id = ?", (7,))
    write = ("UPDATE memories SET title = ? WHERE id = ? AND revision = ?", ("t", 7, 1), None)
    assert unlocked_writes([begin, (*row, None), write]) == ["UPDATE memories SET title = ? WHERE id = ? AND "
                                                             "revision = ? ('t', 7, 1)"]  # fmt: skip
    assert unlocked_writes([begin, (*row, None), (*row, Lock.ROW), write]) == []
    assert unlocked_writes([begin, (*row, None), (*row[:1], (8,), Lock.ROW), write]) != []
    assert unlocked_writes([begin, ("SELECT 1 FROM clients WHERE name = ?", ("a",), Lock.STORE), (*row, None),
                            write]) == []  # fmt: skip


def test_a_lost_race_is_run_again_after_a_jittered_pause_a_bounded_number_of_times() -> None:
    """D209's runs again, paced (D360): a change that lost a race runs again after a random pause whose ceiling
    doubles (capped), at most RETRIES times in all, then answers `unavailable.store_busy`."""
    calls: list[float] = []

    def change(lost: int) -> str:
        calls.append(time.monotonic())
        if len(calls) <= lost:
            raise Retry("another machine's change crossed this one")
        return "done"

    assert again(change, 2) == "done" and len(calls) == 3
    calls.clear()
    with pytest.raises(Retry) as lost:
        again(change, RETRIES)
    assert len(calls) == RETRIES and lost.value.code == "unavailable.store_busy"
    ceilings = [min(BACKOFF_MAX_S, BACKOFF_S * 2**attempt) for attempt in range(RETRIES - 1)]
    waited = calls[-1] - calls[0]
    assert 0.0005 < waited < sum(ceilings) + 0.5  # it paused, and not for long
    for attempt, ceiling in enumerate(ceilings):
        pauses = [pause(attempt) for _ in range(200)]
        assert all(0 <= p <= ceiling for p in pauses) and len(set(pauses)) == 200 and max(pauses) > ceiling / 2
    assert ceilings == sorted(ceilings) and pause(40) <= BACKOFF_MAX_S  # doubling, to a cap


# Several machines, one store


@pytest.fixture
def team() -> Iterator[tuple[Home, Home]]:
    """Two machines (homes with their own daemons) on one fresh database, sharing the owner key. The test
    process's environment is the first's; the second is reached through subprocesses with its own."""
    with isolated_home("postgresql") as a, machine(a.store_url) as b:
        a.ok("store", "init")
        share_owner(a, b)
        yield a, b


HOLDER = r"""
import sys
from hivemem.client import DaemonClient
from hivemem.config import load
from hivemem.errors import HivememError
client = DaemonClient(load(), token=sys.argv[1])
print(client.call("memory.get", id="m1")["content"], flush=True)
sys.stdin.readline()
try:
    client.call("memory.get", id="m1")
    print("served", flush=True)
except HivememError as exc:
    print(exc.code, flush=True)
"""


def test_a_token_removed_on_one_machine_is_refused_on_the_other(team: tuple[Home, Home]) -> None:
    a, b = team
    grants = json.dumps([{"right": "read", "scope": "space:user"}, {"right": "write", "scope": "space:user"}])
    token = a.ok("client", "add", "--name", "laptop", "--grants", grants)["token"]
    assert b.ok("memory", "add", "--space", "user", "--content", "from the laptop", token=token)["id"] == "m1"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, token], env=b.env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "from the laptop"  # one connection to b's daemon, open
        a.ok("client", "remove", "--name", "laptop")
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "denied.token"  # its next request, on the other machine
    finally:
        holder.kill()
        holder.communicate(timeout=10)
    fails(b, "memory", "get", "--id", "m1", code="denied.token", exit_code=4, token=token)


def test_two_machines_adding_the_same_text_at_once_keep_one_row(team: tuple[Home, Home]) -> None:
    a, b = team
    a.ok("whoami")
    b.ok("whoami")
    results: list[dict[str, Any]] = []

    def add(home: Home) -> None:
        results.append(home.ok("memory", "add", "--space", "user", "--content", "said by both at once"))

    threads = [threading.Thread(target=add, args=(h,)) for h in (a, b, a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["changed"] for r in results) == [False, False, False, True]
    assert {r["id"] for r in results} == {"m1"}
    assert sql_url(a.store_url, "SELECT count(*) FROM memories") == [(1,)]


RACER = r"""
import json, sys
from hivemem.client import DaemonClient
from hivemem.config import load
from hivemem.errors import HivememError
client = DaemonClient(load(), token="@owner")
client.call("whoami")
print("ready", flush=True)
for line in sys.stdin:
    verb, params = json.loads(line)
    try:
        out = client.call(verb, **params)
    except HivememError as exc:
        out = exc.code
    print(json.dumps(out), flush=True)
"""


class Racers:
    """One client process per machine, connected to its daemon and waiting for a line: `both` sends each its
    call in the same instant and returns the two answers (a result, or an error's code)."""

    def __init__(self, homes: tuple[Home, ...]) -> None:
        self.procs = [self._spawn(h) for h in homes]
        for p in self.procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"

    @staticmethod
    def _spawn(home: Home) -> subprocess.Popen[str]:
        env = {**home.env, "HIVEMEM_TOKEN": "@owner"}
        return subprocess.Popen([sys.executable, "-c", RACER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)  # fmt: skip

    def both(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        for p, call in zip(self.procs, calls, strict=True):
            assert p.stdin is not None
            p.stdin.write(json.dumps(call) + "\n")
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.flush()
        return [json.loads(p.stdout.readline()) for p in self.procs if p.stdout is not None]

    def close(self) -> None:
        for p in self.procs:
            p.kill()
            p.communicate(timeout=10)


def test_two_machines_giving_two_memories_one_text_at_once_answer_as_one_writer(team: tuple[Home, Home]) -> None:
    """The live (space, content) index settles the race the single writer's check used to: one change
    commits, the other is conflict.memory_duplicate, never failed.store; captures of one capture key from both
    machines at once keep one draft; adds of one text, one row (the second `changed: false`)."""
    a, b = team
    racers = Racers((a, b))
    try:
        for n in range(12):
            first, second = racers.both(("memory.add", {"space": "user", "content": f"first {n}"}),
                                        ("memory.add", {"space": "user", "content": f"second {n}"}))  # fmt: skip
            same = {"revision": 1, "content": f"same {n}"}
            got = racers.both(("memory.update", {"id": first["id"], **same}),
                              ("memory.update", {"id": second["id"], **same}))  # fmt: skip
            codes = sorted("ok" if isinstance(g, dict) else g for g in got)
            assert codes == ["conflict.memory_duplicate", "ok"], got
            drafts = racers.both(("memory.capture", {"space": "user", "content": f"Captured {n}!"}),
                                 ("memory.capture", {"space": "user", "content": f"captured {n}"}))  # fmt: skip
            assert sorted(d["changed"] for d in drafts) == [False, True], drafts
            added = racers.both(*[("memory.add", {"space": "user", "content": f"added by both {n}"})] * 2)
            assert sorted(r["changed"] for r in added) == [False, True] and len({r["id"] for r in added}) == 1
    finally:
        racers.close()
    assert a.ok("store", "check")["ok"] is True


def test_two_machines_relating_two_memories_both_ways_at_once_both_commit(team: tuple[Home, Home]) -> None:
    """relate a to b on one machine and b to a on the other lock the same two rows in opposite orders: when
    the server breaks that deadlock, the loser's change runs again (D209), and both relations are made."""
    a, b = team
    racers = Racers((a, b))
    try:
        for n in range(4):
            one, two = racers.both(("memory.add", {"space": "user", "content": f"one side {n}"}),
                                   ("memory.add", {"space": "user", "content": f"other side {n}"}))  # fmt: skip
            ways = [{"source": x["id"], "target": y["id"], "relation": "related"} for x, y in ((one, two), (two, one))]
            got = racers.both(("memory.relate", ways[0]), ("memory.relate", ways[1]))
            assert [g["changed"] if isinstance(g, dict) else g for g in got] == [True, True], got
    finally:
        racers.close()
    assert a.ok("store", "check")["ok"] is True


def sql_url(url: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(statement).fetchall()


def test_compare_and_swap_across_machines_loses_no_update(team: tuple[Home, Home]) -> None:
    """2 daemons, 8 clients each, N read-modify-writes each of one counter: it ends at exactly 16 N, and its revision
    history is linear (every revision once, in order)."""
    a, b = team
    rounds = 250  # the count, in CI too (D210): 87 s on this 2-core machine under load
    assert a.ok("memory", "add", "--space", "user", "--content", "counter 0")["id"] == "m1"
    b.ok("whoami")
    procs = [worker(h, "m1", str(rounds)) for h in (a, b) for _ in range(8)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-400:] for o in outs]
    total = 16 * rounds
    got = a.ok("memory", "get", "--id", "m1")
    assert got["content"] == f"counter {total}" and got["revision"] == total + 1
    revisions = [v["revision"] for v in a.ok("memory", "history", "--id", "m1")["versions"]]
    assert revisions == sorted(revisions, reverse=True) and len(set(revisions)) == len(revisions)
    assert a.ok("store", "check")["ok"] is True


def test_kill_9_of_one_daemon_loses_no_acknowledged_write_and_the_other_serves_on(team: tuple[Home, Home]) -> None:
    a, b = team
    a.ok("whoami")
    b.ok("whoami")
    acknowledged: list[str] = []
    stop = threading.Event()

    def write() -> None:
        client = a.client()
        n = 0
        try:
            while not stop.is_set():
                text = f"acknowledged write {n}"
                try:
                    client.call("memory.add", space="user", content=text)
                except HivememError:
                    return
                acknowledged.append(text)
                n += 1
        finally:
            client.close()

    thread = threading.Thread(target=write)
    thread.start()
    assert wait_for(lambda: len(acknowledged) >= 5, 60)
    pid = a.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    stop.set()
    thread.join(30)
    stored = {m for (m,) in sql_url(a.store_url, "SELECT content FROM memories")}
    assert set(acknowledged) <= stored
    assert b.ok("memory", "add", "--space", "user", "--content", "the other machine goes on")["changed"] is True
    assert b.ok("store", "check")["ok"] is True


def test_events_follow_on_one_machine_sees_commits_of_the_other(team: tuple[Home, Home]) -> None:
    a, b = team
    a.ok("memory", "add", "--space", "user", "--content", "first, seen by the follower")
    env = {**b.env, "HIVEMEM_TOKEN": "@owner"}
    follower = subprocess.Popen([sys.executable, "-m", "hivemem", "events", "follow", "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    lines: list[dict[str, Any]] = []

    def read() -> None:
        assert follower.stdout is not None
        for raw in follower.stdout:
            lines.append(json.loads(raw))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    writer = a.client()
    try:  # the follower starts after the newest event: write on machine a until a line arrives on machine b
        made: list[str] = []
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            made.append(writer.call("memory.add", space="user", content=f"probe {len(made)}")["id"])
            wait_for(lambda: bool(lines), 0.5)
        assert lines, "the follower on the other machine printed nothing"
        assert lines[0]["type"] == "memory.added" and lines[0]["memory"] in made, lines
    finally:
        writer.close()
        follower.terminate()
        follower.wait(10)
        reader.join(10)
        for stream in (follower.stdout, follower.stderr):
            if stream is not None:
                stream.close()


def test_a_one_space_search_weights_terms_by_their_counts_in_that_space(pg: Home) -> None:
    # "alpha" is common in the store (team/b) but rare in team/a, and "beta" the other way round: in team/a the
    # memory holding alpha ranks first (D203), while the store's counts would put beta's, the newer, first.
    for n in range(10):
        pg.ok("memory", "add", "--space", "team/b", "--content", f"alpha filler {n}")
    first = pg.ok("memory", "add", "--space", "team/a", "--content", "alpha note")["id"]
    second = pg.ok("memory", "add", "--space", "team/a", "--content", "beta note")["id"]
    for n in range(3):
        pg.ok("memory", "add", "--space", "team/a", "--content", f"beta filler {n}")
    found = pg.ok("memory", "search", "--query", "alpha beta", "--space", "team/a")["results"]
    assert [r["id"] for r in found[:2]] == [first, second]
