"""Security round 3, the team store and the smaller leaks (docs/security.md): a real daemon on a real socket, a real
PostgreSQL server for the team store, and a stub HTTP server for the embeddings endpoint. Each test is named after
the attack it closes and fails without the fix.

Item 3: the runtime role every team machine holds can do what the verbs need and no more (tried as that role).
Item 8: an embeddings endpoint's redirect is never followed. Item 9: a caller with only a write grant learns
nothing about a memory it cannot read from a duplicate add or capture. Item 13: only a person sets
`user_confirmed` as a param. Item 12: doctor warns when the server would log memory text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

import test_web
from conftest import PG_SERVER, Home, client_token, fails, isolated_home, raises
from embedstub import Stub, running
from hivemem.client import DaemonClient
from hivemem.embeddings.base import EmbeddingError, Settings
from hivemem.embeddings.http import HttpProvider
from hivemem.manifest import NOT_RUN
from hivemem.store.postgres import roles as roles_mod
from test_web import UI

if TYPE_CHECKING:
    from playwright.sync_api import Page

browser, ui, page = test_web.browser, test_web.ui, test_web.page  # the review UI's fixtures

# The stub embeddings server's key: made here so that the repository holds no key-shaped literal.
API_KEY = "-".join(("stub", "embeddings", "key"))
FORGED = "hm1.owner.attacker-chosen-key"

# --- item 8: no redirect followed -------------------------------------------------------------------------------


@pytest.fixture
def endpoints() -> Iterator[tuple[Stub, Stub]]:
    """The configured endpoint, which redirects, and the host it redirects to."""
    with running() as configured, running() as elsewhere:
        configured.mode = "redirect"
        configured.redirect_to = elsewhere.base_url + "/embeddings"
        yield configured, elsewhere


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_item8_an_embeddings_redirect_is_not_followed(endpoints: tuple[Stub, Stub], code: int) -> None:
    configured, elsewhere = endpoints
    configured.redirect_code = code
    provider = HttpProvider(Settings(provider="http", base_url=configured.base_url, model="stub-a",
                                     api_key=API_KEY))  # fmt: skip
    with pytest.raises(EmbeddingError, match=f"HTTP {code}.*redirect"):
        provider.embed(["the text of a memory"], query=False, timeout=5)
    assert [r["auth"] for r in configured.requests] == [f"Bearer {API_KEY}"]
    assert elsewhere.requests == []  # neither the text nor the key went anywhere else


# --- item 9: a duplicate reveals nothing the writer cannot read -------------------------------------------------


def test_item9_a_write_only_duplicate_add_learns_nothing(home: Home, owner: DaemonClient) -> None:
    kept = owner.call("memory.add", space="project/vault", content="the vault opens with the blue key")
    token = client_token(owner, "dropbox", [("write", "space:project/vault")])
    writer = home.client(token)
    try:
        again = writer.call("memory.add", space="project/vault", content="the vault opens with the blue key")
        assert again == {"changed": False}
        assert kept["id"] not in str(again)
        new = writer.call("memory.add", space="project/vault", content="a note only the writer sent")
        assert new["changed"] is True and new["id"].startswith("m")
        mine = owner.call("memory.add", space="project/vault", content="a note only the writer sent")
        assert mine == {"id": new["id"], "revision": 1, "changed": False}  # a reader still gets the id
    finally:
        writer.close()
    assert owner.call("store.status")["memories"] == 2


def test_item9_a_write_only_duplicate_capture_learns_nothing(home: Home, owner: DaemonClient) -> None:
    kept = owner.call("memory.add", space="project/vault", content="deploys need the release manager's approval")
    token = client_token(owner, "dropbox", [("write", "space:project/vault")])
    writer = home.client(token)
    try:
        again = writer.call("memory.capture", space="project/vault",
                            content="deploys need the release manager's approval")  # fmt: skip
        assert "duplicate_of" not in again and "id" not in again
        assert again["changed"] is False and again["related"] == []
        assert kept["id"] not in str(again)
    finally:
        writer.close()
    seen = owner.call("memory.capture", space="project/vault", content="deploys need the release manager's approval")
    assert seen["duplicate_of"] == kept["id"]  # the owner, who can read it, is told which
    assert owner.call("store.status")["memories"] == 1


# --- item 13: only a person confirms ---------------------------------------------------------------------------


def test_item13_a_client_cannot_set_user_confirmed(home: Home, owner: DaemonClient) -> None:
    token = client_token(owner, "agent", [("write", "space:project/x"), ("read", "space:project/x")])
    agent = home.client(token)
    try:
        refused = raises(agent, "memory.add", space="project/x", content="the agent's own idea",
                         confidence_state="user_confirmed")  # fmt: skip
        assert refused.code == "denied.admin"
        assert refused.data["resource"] == "confidence_state:user_confirmed"
        made = agent.call("memory.add", space="project/x", content="the agent's own idea", confidence_state="inferred")
        refused = raises(agent, "memory.update", id=made["id"], revision=1, confidence_state="user_confirmed")
        assert refused.code == "denied.admin"
        assert agent.call("memory.get", id=made["id"])["confidence_state"] == "inferred"
        assert agent.call("memory.get", id=made["id"])["revision"] == 1
    finally:
        agent.close()
    assert owner.call("store.status")["memories"] == 1
    confirmed = owner.call("memory.update", id=made["id"], revision=1, confidence_state="user_confirmed")
    assert confirmed["changed"] is True  # the owner, a person, may


def test_item13_user_confirmed_refused_on_the_cli_with_exit_4(home: Home, owner: DaemonClient) -> None:
    token = client_token(owner, "agent", [("write", "space:project/x")])
    result = home.cli("memory", "add", "--space", "project/x", "--content", "trust me",
                      "--confidence-state", "user_confirmed", "--json", token=token)  # fmt: skip
    assert result.code == 4, result
    assert result.json["error"]["code"] == "denied.admin"
    assert owner.call("store.status")["memories"] == 0


# --- item 3: the runtime role every team machine holds is not the owner ---------------------------------------

ROLE_WORDS = re.compile(r"\bhivemem_(admin|app)\b")


@contextlib.contextmanager
def roles(*names: str, create: bool = True) -> Iterator[list[str]]:
    """Login roles of the test server (cluster-wide, so named uniquely), dropped afterwards; `create` False only
    names them (the statements under test create them)."""
    made = [f"hm_{n}_{uuid.uuid4().hex[:8]}" for n in names]
    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        for role in made if create else ():
            conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE')
    try:
        yield made
    finally:
        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            for role in made:
                conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def as_role(url: str, role: str) -> str:
    return url.replace("://", f"://{role}@", 1)


@pytest.fixture
def team() -> Iterator[tuple[Home, str, str]]:
    """A team store made by `store init --runtime-role` (its schema owned by the test server's own role); yields
    the home, configured as the runtime role, the owner's URL and the runtime role."""
    with roles("app") as (app,), isolated_home("postgresql") as h:
        owner_url = h.store_url
        made = h.ok("store", "init", "--runtime-role", app)
        assert made["runtime_role"] == {"role": app, "excess": []}
        h.store_url = as_role(owner_url, app)
        h.config("[memory]\nmax_versions = 2\n")
        yield h, owner_url, app
        h.stop_daemon()


def refused(url: str, statement: str, args: tuple[Any, ...] = ()) -> str:
    """Run `statement` on its own connection, which must be refused for lack of privilege; the server's message."""
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege) as no:
        conn.execute(statement, args or None)
    return str(no.value)


def rows(url: str, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


def test_item3_the_runtime_role_cannot_make_its_key_the_owners(team: tuple[Home, str, str]) -> None:
    home, owner_url, _ = team
    home.ok("memory", "add", "--space", "user", "--content", "the daemon serves as the runtime role")
    recorded = rows(owner_url, "SELECT value FROM meta WHERE key = 'owner_key_sha256'")
    mine = hashlib.sha256(b"hm1.owner.attacker-chosen-key").hexdigest()
    refused(home.store_url, "UPDATE meta SET value = %s WHERE key = 'owner_key_sha256'", (mine,))
    refused(home.store_url, "DELETE FROM meta WHERE key = 'owner_key_sha256'")
    refused(home.store_url, "INSERT INTO meta(key, value) VALUES ('owner_key_sha256_2', %s)", (mine,))
    refused(home.store_url, "UPDATE meta SET value = 'hm_other' WHERE key = 'runtime_role'")
    assert rows(owner_url, "SELECT value FROM meta WHERE key = 'owner_key_sha256'") == recorded
    assert home.cli("whoami", "--json", token=FORGED).code != 0


def test_item3_the_runtime_role_cannot_rewrite_history_or_authorship(team: tuple[Home, str, str]) -> None:
    home, owner_url, _ = team
    home.ok("memory", "add", "--space", "user", "--content", "written by the owner")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "edited by the owner")
    url = home.store_url
    refused(url, "UPDATE events SET principal = 'g7', data = '{}'")
    refused(url, "DELETE FROM events WHERE type = 'memory.updated'")
    refused(url, "UPDATE memory_versions SET content = 'never said', principal = 'g7'")
    refused(url, "DELETE FROM memory_versions")
    refused(url, "UPDATE memories SET principal = 'g7', label = 'forged'")
    refused(url, "UPDATE memories SET created = '2000-01-01T00:00:00.000Z'")
    refused(url, "DELETE FROM memories")
    refused(url, "TRUNCATE events")
    refused(url, "SELECT setval('memories_id_seq', 1)")
    refused(url, 'UPDATE clients SET grants = \'[{"right":"write","scope":"*"}]\'')
    refused(url, "UPDATE sessions SET principal = 'g7'")
    # the functions that erase for it do that one thing: no newest version, no version still in use
    assert rows(url, "SELECT hivemem_trim_versions(1, 100)") == [(1,)]  # revision 1 only; the newest stays
    assert rows(url, "SELECT hivemem_keep_version('never said', 1)") == [(0,)]
    assert rows(owner_url, "SELECT revision, content FROM memory_versions ORDER BY revision") == [(2, "")]
    assert rows(owner_url, "SELECT DISTINCT principal FROM events") == [("owner",)]
    assert home.ok("store", "check")["ok"] is True


def test_item3_the_runtime_role_cannot_change_the_schema(team: tuple[Home, str, str]) -> None:
    home, owner_url, _ = team
    home.ok("memory", "add", "--space", "user", "--content", "a row to protect")
    url = home.store_url
    for statement in (
        "CREATE TABLE stolen (x TEXT)",
        "ALTER TABLE memories ADD COLUMN shadow TEXT",
        "DROP TABLE events",
        "CREATE INDEX sneaky ON memories(content)",
        "CREATE FUNCTION copy_text() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
        "CREATE OR REPLACE FUNCTION hivemem_purge_memory(p_memory BIGINT) RETURNS BIGINT LANGUAGE sql AS 'SELECT 0'",
        "ALTER FUNCTION hivemem_purge_memory(BIGINT) SECURITY INVOKER",
    ):
        with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.Error):
            conn.execute(statement)
    rows(url, "GRANT UPDATE ON events TO PUBLIC")  # only a warning from the server: it has nothing to give
    assert rows(owner_url, "SELECT has_table_privilege('public', 'events', 'UPDATE')") == [(False,)]
    tables = rows(owner_url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
    assert [t for (t,) in tables] == sorted(roles_mod.RIGHTS)


def test_item3_the_functions_serve_the_runtime_role_alone_and_ignore_its_search_path(
    team: tuple[Home, str, str],
) -> None:
    """The owner's functions run with a fixed search_path: a temporary table the caller makes under a store
    table's name is not what they change. Another role of the server may not call them at all."""
    home, owner_url, _ = team
    home.ok("memory", "add", "--space", "user", "--content", "stays while a decoy is purged")
    with roles("other") as (other,):
        refused(as_role(owner_url, other), "SELECT hivemem_purge_memory(1)")
        with psycopg.connect(home.store_url, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE memories (id BIGINT, deleted TEXT)")
            conn.execute("INSERT INTO memories VALUES (1, '2000-01-01T00:00:00.000Z')")  # a tombstone, were it read
            conn.execute("SET search_path = pg_temp, public")
            assert conn.execute("SELECT hivemem_remove_tombstones('9999')").fetchall() == [(0,)]
            assert conn.execute("SELECT count(*) FROM pg_temp.memories").fetchall() == [(1,)]
    assert rows(owner_url, "SELECT count(*) FROM memories")[0][0] == 1
    assert home.ok("memory", "get", "--id", "m1")["content"] == "stays while a decoy is purged"


def test_item3_every_verb_serves_as_the_runtime_role(team: tuple[Home, str, str], tmp_path: Any) -> None:
    """What the runtime role may not do itself, the verbs still do: purge erases, versions are trimmed to
    memory.max_versions, sessions are purged, clients added and removed, a store exported and imported."""
    home, owner_url, app = team
    a = home.ok("memory", "add", "--space", "user", "--content", "the first text to purge")["id"]
    b = home.ok("memory", "add", "--space", "user", "--content", "the second text")["id"]
    for revision in range(1, 4):
        home.ok("memory", "update", "--id", b, "--revision", str(revision), "--content", f"the second text, {revision}")
    assert [v["revision"] for v in home.ok("memory", "history", "--id", b)["versions"]] == [4, 3]
    home.ok("memory", "relate", "--source", a, "--target", b, "--relation", "related")
    home.ok("memory", "unrelate", "--source", a, "--target", b, "--relation", "related")
    home.ok("memory", "purge", "--id", a)
    assert rows(owner_url, "SELECT count(*) FROM memories WHERE content LIKE '%%to purge%%'") == [(0,)]
    assert rows(owner_url, "SELECT count(*) FROM memory_versions WHERE memory = %s", (int(a[1:]),)) == [(0,)]
    session = home.ok("session", "start", "--harness", "codex", "--harness-session", "one")["session"]
    home.ok("session", "end", "--session", session)
    home.ok("session", "purge", "--session", session)
    assert rows(owner_url, "SELECT count(*) FROM sessions") == [(0,)]
    made = home.ok("client", "add", "--name", "laptop", "--grants", '[{"right":"read","scope":"*"}]')
    assert made["principal"] == "g1"
    home.ok("client", "remove", "--name", "laptop")
    assert home.ok("client", "add", "--name", "laptop", "--grants", "[]")["principal"] == "g2"
    out = str(tmp_path / "team.json")
    home.ok("store", "export", "--path", out)
    assert home.ok("store", "import", "--path", out, "--space-map", '{"user": "team/copy"}')["planned"]["add"] == 1
    assert home.ok("memory", "add", "--space", "user", "--content", "after the import")["id"] == "m4"
    report = home.ok("store", "check")
    assert report == {"ok": True, "findings": [], "counts": {}}
    assert rows(owner_url, "SELECT current_user")[0][0] != app  # the checks above read as the owner


def test_item3_store_check_reports_a_runtime_role_with_more_rights(team: tuple[Home, str, str]) -> None:
    home, owner_url, app = team
    home.ok("memory", "add", "--space", "user", "--content", "checked")
    assert home.ok("store", "check")["ok"] is True
    assert _doctor(home)["store.role_rights"]["status"] == "ok"
    rows(owner_url, f'GRANT UPDATE, DELETE ON events TO "{app}"')
    rows(owner_url, f'GRANT UPDATE (principal) ON memories TO "{app}"')
    rows(owner_url, f'GRANT CREATE ON SCHEMA public TO "{app}"')
    report = home.ok("store", "check")
    assert report["ok"] is False
    found = {f["detail"] for f in report["findings"] if f["check"] == "store.role_rights"}
    assert found == {f"{app} may UPDATE on events", f"{app} may DELETE on events",
                     f"{app} may UPDATE memories.principal", f"{app} may CREATE in schema public"}  # fmt: skip
    assert report["counts"] == {"store.role_rights": 4}
    doctor = _doctor(home)["store.role_rights"]
    assert doctor["status"] == "fail" and f"{app} may UPDATE on events" in doctor["message"]
    home.stop_daemon()
    home.store_url = owner_url
    home.config("")
    again = home.ok("store", "init", "--runtime-role", app)  # as the owner: everything revoked, then granted
    assert again["runtime_role"] == {"role": app, "excess": []} and again["created"] is False
    assert home.ok("store", "check")["ok"] is True


def test_item3_store_check_reports_a_runtime_role_that_may_run_programs_on_the_server(
    team: tuple[Home, str, str],
) -> None:
    home, _, app = team
    home.ok("memory", "add", "--space", "user", "--content", "checked")
    assert home.ok("store", "check")["ok"] is True
    with psycopg.connect(PG_SERVER, autocommit=True) as conn:  # `COPY ... TO PROGRAM` runs as the server's user
        conn.execute(f'GRANT pg_execute_server_program, pg_write_server_files TO "{app}"')
    try:
        report = home.ok("store", "check")
        found = {f["detail"] for f in report["findings"] if f["check"] == "store.role_rights"}
        servers = ("pg_execute_server_program", "pg_write_server_files")
        assert found == {f"{app} is a member of {server}" for server in servers}
        assert report["ok"] is False and _doctor(home)["store.role_rights"]["status"] == "fail"
    finally:
        with psycopg.connect(PG_SERVER, autocommit=True) as conn:
            conn.execute(f'REVOKE pg_execute_server_program, pg_write_server_files FROM "{app}"')


def test_item3_migrating_an_old_store_as_the_runtime_role_is_refused(team: tuple[Home, str, str]) -> None:
    home, owner_url, app = team
    home.ok("memory", "add", "--space", "user", "--content", "kept through the migration")
    home.stop_daemon()
    # the store as schema 2 left it: no functions, and the runtime role's rights of the old docs (every table)
    with psycopg.connect(owner_url, autocommit=True) as conn:
        for signature in roles_mod.FUNCTIONS:
            conn.execute(f"DROP FUNCTION {signature}")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute("DELETE FROM meta WHERE key = 'runtime_role'")
        conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{app}"')
    error = fails(home, "memory", "list", code="unsupported.store_schema", exit_code=10)
    assert "schema 2" in error["message"] and "only the role that owns the schema" in error["message"]
    assert "--runtime-role" in error["data"]["fix"]
    assert rows(owner_url, "SELECT value FROM meta WHERE key = 'schema_version'") == [("2",)]
    home.store_url = owner_url
    home.config("")
    assert home.ok("store", "init", "--runtime-role", app)["runtime_role"]["excess"] == []
    home.stop_daemon()
    home.store_url = as_role(owner_url, app)
    home.config("")
    assert home.ok("memory", "get", "--id", "m1")["content"] == "kept through the migration"
    refused(home.store_url, "DELETE FROM memories")
    assert home.ok("store", "check")["ok"] is True


def test_item3_init_refuses_a_runtime_role_that_is_the_owner(pg: Home) -> None:
    me = rows(pg.store_url, "SELECT current_user")[0][0]
    error = fails(pg, "store", "init", "--runtime-role", me, code="invalid_params.runtime_role", exit_code=2)
    assert "superuser or owns" in error["message"]
    missing = fails(pg, "store", "init", "--runtime-role", "hm_nobody_here", code="invalid_params.runtime_role",
                    exit_code=2)  # fmt: skip
    assert "CREATE ROLE" in missing["data"]["fix"]
    with isolated_home() as lite:  # a SQLite store has no roles
        error = fails(lite, "store", "init", "--runtime-role", "hm_app", code="invalid_params.runtime_role",
                      exit_code=2)  # fmt: skip
        assert "team store" in error["message"]


def _team_md_step(heading: str, language: str) -> str:
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "team.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index(heading) :]
    while True:  # the first block of that language that runs (an install line, marked as not run, may come first)
        start = section.index(f"```{language}\n") + len(language) + 4
        block, section = section[start : section.index("```\n", start)], section[section.index("```\n", start) + 4 :]
        if not block.startswith(NOT_RUN):
            return block


def test_item3_the_role_setup_of_docs_team_md_as_written() -> None:
    """docs/team.md's step 2, run statement by statement as a superuser (names made unique), then step 5's
    `store init --runtime-role` as hivemem_admin and a daemon as hivemem_app."""
    setup = _team_md_step("## 2. The database and its two roles", "sql")
    init = _team_md_step("## 5. Point hivemem at the store", "sh")
    assert "hivemem store init --runtime-role hivemem_app" in init
    database = f"hm_{uuid.uuid4().hex[:16]}"
    with roles("admin", "app", create=False) as (admin, app), isolated_home() as home:
        names = {"admin": admin, "app": app}
        conn = psycopg.connect(PG_SERVER, autocommit=True)
        try:
            for line in setup.replace("DATABASE hivemem", f'DATABASE "{database}"').splitlines():
                line = ROLE_WORDS.sub(lambda m: f'"{names[m.group(1)]}"', line.split("--", 1)[0]).strip()
                if not line or line.startswith("\\password"):
                    continue  # trust authentication here: no password to set
                if line.startswith("\\c "):
                    conn.close()
                    conn = psycopg.connect(PG_SERVER.rsplit("/", 1)[0] + "/" + database, autocommit=True)
                    continue
                conn.execute(line)
            conn.close()
            base = PG_SERVER.rsplit("/", 1)[0] + "/" + database
            home.store_url = as_role(base, admin)
            home.config("")
            assert home.ok("store", "init", "--runtime-role", app)["runtime_role"] == {"role": app, "excess": []}
            home.store_url = as_role(base, app)
            home.config("")
            made = home.ok("memory", "add", "--space", "user", "--content", "written by the runtime role")
            assert home.ok("memory", "search", "--query", "runtime role")["results"][0]["id"] == made["id"]
            home.ok("memory", "purge", "--id", made["id"])
            assert home.ok("store", "check")["ok"] is True
            refused(home.store_url, "UPDATE meta SET value = 'x' WHERE key = 'owner_key_sha256'")
            refused(home.store_url, "DROP TABLE memories")
            refused(home.store_url, "UPDATE events SET principal = 'g9'")
            owners = rows(base, "SELECT DISTINCT tableowner, schemaname FROM pg_tables WHERE tablename = 'memories'")
            assert owners == [(admin, "hivemem")]
            checks = _doctor(home)
            assert checks["store.role_rights"]["status"] == "ok"
            assert checks["store.logging"]["status"] == "ok"  # the step's ALTER ROLE keeps parameters out
        finally:
            conn.close()
            home.stop_daemon()
            with psycopg.connect(PG_SERVER, autocommit=True) as admin_conn:
                admin_conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# --- item 12: memory text in the server's logs ------------------------------------------------------------------


def _doctor(home: Home) -> dict[str, dict[str, str]]:
    result = home.cli("doctor", "--json")
    assert result.code in (0, 1), result
    return {c["id"]: c for c in result.json["checks"]}


@pytest.mark.parametrize("setting", [
    "log_statement = 'all'", "log_statement = 'mod'", "log_min_duration_statement = 0",
    "log_min_duration_statement = '250ms'", "log_parameter_max_length_on_error = -1",
])  # fmt: skip
def test_item12_doctor_warns_when_the_server_logs_memory_text(team: tuple[Home, str, str], setting: str) -> None:
    home, owner_url, app = team
    assert _doctor(home)["store.logging"]["status"] == "ok"
    rows(owner_url, f'ALTER ROLE "{app}" SET {setting}')
    try:
        logging = _doctor(home)["store.logging"]
        assert logging["status"] == "warn", logging
        assert setting.split(" =")[0] in logging["message"] and app in logging["message"]
        assert "log_parameter_max_length = 0" in logging["fix"]
        rows(owner_url, f'ALTER ROLE "{app}" SET log_parameter_max_length = 0')
        rows(owner_url, f'ALTER ROLE "{app}" SET log_parameter_max_length_on_error = 0')
        assert _doctor(home)["store.logging"]["status"] == "ok"  # statements logged, never their parameters
    finally:
        rows(owner_url, f'ALTER ROLE "{app}" RESET ALL')


@pytest.fixture
def pg() -> Iterator[Home]:
    with isolated_home("postgresql") as h:
        yield h


# --- item 13: what an import copies from its document is shown as a claim --------------------------------------


def test_item13_imported_origins_render_as_claims_in_the_ui(home: Home, page: Page, ui: UI, tmp_path: Any) -> None:
    """An import keeps the original author, store and id and a session's start as its document gives them; the
    review UI shows each as the document's claim, not as hivemem's record."""
    with isolated_home() as elsewhere:
        session = elsewhere.ok("session", "start", "--harness", "codex", "--harness-session", "h-1")["session"]
        elsewhere.ok("memory", "add", "--space", "user", "--content", "the release train leaves on Tuesdays",
                     "--session", session)  # fmt: skip
        exported = str(tmp_path / "from-elsewhere.json")
        elsewhere.ok("store", "export", "--path", exported)
    with open(exported, encoding="utf-8") as f:
        document = json.load(f)
    document["memories"][0]["author"] = {"principal": "g4", "label": "Ada Lovelace, CTO"}
    document["sessions"][0]["started"] = "2001-02-03T04:05:06.000Z"
    forged = str(tmp_path / "forged.json")
    with open(forged, "w", encoding="utf-8") as f:
        json.dump(document, f)
    assert home.ok("store", "import", "--path", forged)["planned"]["add"] == 1
    [found] = home.ok("memory", "search", "--query", "release train Tuesdays")["results"]
    page.goto(ui.login_url)
    page.goto(f"{ui.origin}/memory/{found['id']}")

    def part(heading: str) -> str:  # a section of the memory page, found by its heading
        return page.locator("section.part", has=page.locator("h2", has_text=heading)).inner_text()

    assert "Ada Lovelace" not in part("Details")  # the author is the importer, as recorded
    claims = part("Provenance")
    assert "original_author (as the import document claims)" in claims and "Ada Lovelace, CTO" in claims
    assert "original_store (as the import document claims)" in claims
    audit = part("Audit trail")
    assert "memory.imported" in audit and "as the import document claims: original_id" in audit
    page.goto(f"{ui.origin}/sessions")
    listed = page.inner_text("main")
    assert "started" in listed and "2001" in listed  # shown in local time, the exact value on hover
    assert page.locator('main time[datetime="2001-02-03T04:05:06.000Z"]').count() == 1
    assert "an imported session keeps the start its import document claimed" in listed
