"""Files the daemon reads and writes, and the importers, against a client with narrow grants, another local user's
files and crafted ones (docs/security.md, "Files"). Each test is named after the attack it closes: a real daemon
on a real socket, real CLI processes, real files, FIFOs and symbolic links.

Item 2: only the owner names a path; a client's export goes under exports/ with a name the daemon picks; clients
cannot import; every file the daemon writes is created new. Item 4: the daemon reads only a regular file of the
user's, not through a link, never blocking and within import.max_bytes. Item 5: restore refuses foreign schema
objects; every connection is defensive with untrusted schema. Item 6: importers stay in their folder and bound
what they read. Item 7: an export holds only the sessions its caller may read. Item 14: config is written by a
TOML writer and read back. Item 15: the owner key is read when presented; `hivemem stop` needs no owner key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from conftest import Home, client_token, fails, isolated_home, raises, wait_for

CREDENTIAL = "admin:hunter2"  # a password as it appears in a shell history or .netrc line
EXPORT_NAME = re.compile(r"hivemem-export-\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{8}\.json")


def document(memories: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    return {"format": "hivemem.export", "version": 1, "exported": "2026-11-01T10:00:00.000Z",
            "store_id": "11111111-2222-3333-4444-555555555555", "memories": memories, **rest}  # fmt: skip


def write(home: Home, name: str, doc: Any) -> str:
    path = os.path.join(home.base, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def token_for(home: Home, name: str, grants: list[tuple[str, str]]) -> str:
    owner = home.client()
    try:
        return client_token(owner, name, grants)
    finally:
        owner.close()


# --- item 2: paths are the owner's; files are created new ---------------------------------------------------------


def test_item2_a_client_or_no_token_cannot_name_an_export_path(home: Home) -> None:
    home.ok("memory", "add", "--space", "notes", "--content", "echo $(touch pwned)")
    writer = token_for(home, "writer", [("write", "space:notes"), ("read", "space:notes")])
    profile = os.path.join(home.base, ".bash_profile")
    for token in (writer, None):
        error = fails(home, "store", "export", "--path", profile, code="denied.admin", exit_code=4, token=token)
        assert error["data"]["resource"] == "path", error
        assert not os.path.lexists(profile)
    assert home.ok("store", "export", "--path", profile)["memories"] == 1, "the owner still names a path"


def test_item2_a_clients_export_goes_under_exports_with_a_name_the_daemon_picks(home: Home) -> None:
    home.ok("memory", "add", "--space", "notes", "--content", "shared note")
    reader = token_for(home, "reader", [("read", "space:notes")])
    made = [home.ok("store", "export", token=reader)["path"] for _ in range(2)]
    for path in made:
        assert os.path.dirname(path) == home.paths.exports and EXPORT_NAME.fullmatch(os.path.basename(path)), path
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert json.loads(Path(path).read_text(encoding="utf-8"))["memories"][0]["content"] == "shared note"
    assert made[0] != made[1]


def test_item2_a_client_cannot_import_even_into_its_own_space(home: Home) -> None:
    home.ok("memory", "add", "--space", "private", "--content", "the owner's private plan")
    exported = home.ok("store", "export", "--path", os.path.join(home.base, "owner-export.json"))["path"]
    writer = token_for(home, "writer", [("write", "space:mine"), ("read", "space:mine")])
    before = home.ok("store", "status")
    mapped = '{"private": "mine"}'
    error = fails(home, "store", "import", "--path", exported, "--space-map", mapped, code="denied.admin",
                  exit_code=4, token=writer)  # fmt: skip
    assert error["data"]["resource"] == "store.import"
    notes = os.path.join(home.base, "notes")
    os.mkdir(notes)
    Path(notes, "a.md").write_text("# A\n\nA note.\n", encoding="utf-8")
    fails(home, "import", "--from", "markdown", "--path", notes, "--space", "mine", code="denied.admin", exit_code=4,
          token=writer)  # fmt: skip
    assert home.ok("store", "status") == before
    assert home.ok("import", "--from", "markdown", "--path", notes, "--space", "mine")["applied"] is True


def test_item2_a_backup_never_writes_through_a_link_left_at_a_temporary_name(home: Home) -> None:
    home.ok("memory", "add", "--space", "notes", "--content", "kept")
    pid = home.daemon_pid()
    assert pid is not None
    dest = os.path.join(home.base, "copy.db")
    target = os.path.join(home.base, "planted.db")
    os.symlink(target, f"{dest}.tmp-{pid}")  # the name a temporary file had: the destination and the daemon's pid
    result = home.ok("store", "backup", "--path", dest)
    assert result["path"] == dest and os.path.isfile(dest) and not os.path.islink(dest)
    assert not os.path.lexists(target), "VACUUM INTO followed the link"
    assert os.stat(dest).st_mode & 0o777 == 0o600


def test_item2_an_export_never_writes_through_a_link_left_at_a_temporary_name(home: Home) -> None:
    home.ok("memory", "add", "--space", "notes", "--content", "kept")
    pid = home.daemon_pid()
    dest = os.path.join(home.base, "out.json")
    target = os.path.join(home.base, "planted.json")
    Path(target).write_text("", encoding="utf-8")
    os.link(target, f"{dest}.tmp-{pid}")  # a hard link: O_NOFOLLOW alone would not notice it
    assert home.ok("store", "export", "--path", dest)["memories"] == 1
    assert Path(target).read_text(encoding="utf-8") == ""
    assert json.loads(Path(dest).read_text(encoding="utf-8"))["memories"][0]["content"] == "kept"


def test_item2_no_backup_or_export_into_a_folder_another_user_can_change(home: Home) -> None:
    home.ok("memory", "add", "--space", "notes", "--content", "a memory worth stealing")
    shared = os.path.join(home.base, "shared")  # writable by everyone, no sticky bit: they could swap the
    os.mkdir(shared)  # temporary file for one of theirs before VACUUM INTO and read the copy
    os.chmod(shared, 0o777)
    theirs = os.path.join(home.base, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, 65534, 65534)
    for folder in (shared, theirs):
        for verb in ("backup", "export"):
            dest = os.path.join(folder, f"copy-{verb}")
            error = fails(home, "store", verb, "--path", dest, code="denied.path", exit_code=4)
            assert error["data"]["path"] == folder
        assert os.listdir(folder) == [], "nothing was written there"
    sticky = os.path.join(home.base, "sticky")  # like /tmp: others cannot rename or remove our files
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    assert home.ok("store", "backup", "--path", os.path.join(sticky, "copy.db"))["bytes"] > 0


# --- item 4: what the daemon reads ----------------------------------------------------------------------------------


def test_item4_a_fifo_is_refused_without_holding_the_writer(home: Home) -> None:
    home.ok("whoami")
    fifo = os.path.join(home.base, "doc.json")
    os.mkfifo(fifo, 0o600)
    answers: list[Any] = []

    def importing() -> None:
        client = home.client()
        try:
            answers.append(raises(client, "store.import", path=fifo))
        finally:
            client.close()

    thread = threading.Thread(target=importing, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: bool(answers), 10), "the daemon blocked opening or reading a FIFO"
    finally:
        if not answers:  # let a blocked daemon go, so the home can be cleaned up
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        thread.join(10)
    assert answers[0].code == "invalid_params.path" and "regular file" in answers[0].message
    assert home.ok("memory", "add", "--space", "notes", "--content", "the writer is free")["changed"] is True


def test_item4_a_device_or_a_link_is_never_read(home: Home) -> None:
    doc = write(home, "real.json", document([{"id": "m1", "space": "notes", "content": "through a link"}]))
    link = os.path.join(home.base, "link.json")
    os.symlink(doc, link)
    fails(home, "store", "import", "--path", link, code="denied.path", exit_code=4)
    error = fails(home, "store", "import", "--path", "/dev/null", code="invalid_params.path", exit_code=2)
    assert "regular file" in error["message"]
    assert home.ok("store", "status")["memories"] == 0


def test_item4_a_directory_is_refused_and_its_descriptor_closed(home: Home) -> None:
    folder = os.path.join(home.base, "exports-folder")
    os.mkdir(folder)
    client = home.client()
    try:
        refused = raises(client, "store.import", path=folder)
        pid = home.daemon_pid()
        assert pid is not None
        before = len(os.listdir(f"/proc/{pid}/fd"))
        for _ in range(20):
            raises(client, "store.import", path=folder)
        after = len(os.listdir(f"/proc/{pid}/fd"))
    finally:
        client.close()
    assert refused.code == "invalid_params.path" and "regular file" in refused.message
    assert after - before < 20, "each refused import of a directory left a descriptor open in the daemon"


def test_item4_a_file_of_another_user_is_refused(home: Home) -> None:
    doc = write(home, "theirs.json", document([{"id": "m1", "space": "notes", "content": "someone else's"}]))
    os.chown(doc, 65534, 65534)  # nobody's (the tests run as root in CI's container; as a user, it would be theirs)
    fails(home, "store", "import", "--path", doc, code="denied.path", exit_code=4)
    assert home.ok("store", "status")["memories"] == 0


def test_item4_import_reads_at_most_import_max_bytes(home: Home) -> None:
    home.config("[import]\nmax_bytes = 1000\n")
    small = write(home, "small.json", document([{"id": "m1", "space": "notes", "content": "small"}]))
    big = write(home, "big.json", document([{"id": "m1", "space": "notes", "content": "x" * 2000}]))
    error = fails(home, "store", "import", "--path", big, code="invalid_params.path", exit_code=2)
    assert error["data"]["max_bytes"] == 1000
    assert home.ok("store", "status")["memories"] == 0
    assert home.ok("store", "import", "--path", small)["applied"] is True


# --- item 7: an export holds only what its caller can read -------------------------------------------------------


def test_item7_a_clients_export_holds_no_session_it_cannot_read(home: Home) -> None:
    agent = token_for(home, "agent", [("write", "*"), ("read", "*")])
    reader = token_for(home, "reader", [("read", "space:notes")])
    a = home.client(agent)
    try:
        session = a.call("session.start", harness="claude-code", harness_session="secret-thread",
                         cwd="/home/someone/secret-project")["session"]  # fmt: skip
        child = a.call("session.start", harness="claude-code", parent=session, relation="continue")["session"]
        a.call("memory.add", space="notes", content="written in a session", session=child)
    finally:
        a.close()
    exported = home.ok("store", "export", token=reader)["path"]
    doc = json.loads(Path(exported).read_text(encoding="utf-8"))
    assert [m["content"] for m in doc["memories"]] == ["written in a session"]
    assert doc["sessions"] == [], doc["sessions"]
    text = Path(exported).read_text(encoding="utf-8")
    assert "secret-project" not in text and "secret-thread" not in text
    own = home.client(agent)
    try:
        mine = own.call("store.export")["path"]
    finally:
        own.close()
    sessions = json.loads(Path(mine).read_text(encoding="utf-8"))["sessions"]
    assert [s["session"] for s in sessions] == [session, child], "a reporter still exports its own sessions"


# --- item 5: restore refuses foreign schema objects; no connection trusts the schema ---------------------------


def file_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


def test_item5_restore_refuses_a_backup_holding_a_trigger_a_view_a_table_or_an_index(home: Home) -> None:
    kept = home.ok("memory", "add", "--space", "notes", "--content", "the store as it is")["id"]
    copy = os.path.join(home.base, "copy.db")
    home.ok("store", "backup", "--path", copy)
    home.stop_daemon()
    planted = apsw.Connection(copy)
    planted.execute(
        "CREATE TABLE stash (content TEXT);"
        "CREATE TRIGGER forge AFTER INSERT ON memories BEGIN "
        "  UPDATE memories SET principal = 'owner', label = 'owner' WHERE id = new.id; END;"
        "CREATE TRIGGER keep BEFORE DELETE ON memories BEGIN INSERT INTO stash VALUES (old.content); END;"
        "CREATE VIEW everything AS SELECT content FROM memories;"
        "CREATE INDEX by_kind ON memories(kind);"
    )
    planted.close()
    before = file_bytes(home.paths.store)
    error = fails(home, "store", "restore", "--path", copy, code="unsupported.store_schema", exit_code=10)
    assert error["data"]["objects"] == [{"type": "index", "name": "by_kind"}, {"type": "table", "name": "stash"},
                                        {"type": "trigger", "name": "forge"}, {"type": "trigger", "name": "keep"},
                                        {"type": "view", "name": "everything"}]  # fmt: skip
    assert file_bytes(home.paths.store) == before, "nothing was replaced"
    assert not os.path.exists(home.paths.backups) or os.listdir(home.paths.backups) == []
    assert home.ok("memory", "get", "--id", kept)["content"] == "the store as it is"


def test_item5_restore_refuses_a_backup_whose_index_keeps_purged_text(home: Home) -> None:
    gone = home.ok("memory", "add", "--space", "notes", "--content", "purged before the backup")["id"]
    home.ok("memory", "purge", "--id", gone)  # FTS5 raises its own `version` setting after a secure delete
    kept = home.ok("memory", "add", "--space", "notes", "--content", "the store as it is")["id"]
    good = os.path.join(home.base, "good.db")
    home.ok("store", "backup", "--path", good)
    home.stop_daemon()
    bad = os.path.join(home.base, "bad.db")
    Path(bad).write_bytes(Path(good).read_bytes())
    planted = apsw.Connection(bad)  # with secure-delete off, a purge leaves the text's tokens in the index
    planted.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 0)")
    planted.close()
    before = file_bytes(home.paths.store)
    error = fails(home, "store", "restore", "--path", bad, code="unsupported.store_schema", exit_code=10)
    assert error["data"]["objects"] == [{"type": "setting", "name": "memory_fts.secure-delete"}]
    assert file_bytes(home.paths.store) == before, "nothing was replaced"
    home.ok("store", "restore", "--path", good)  # a backup hivemem made restores, whatever FTS5's version
    assert home.ok("memory", "get", "--id", kept)["content"] == "the store as it is"
    home.stop_daemon()
    planted = apsw.Connection(home.paths.store)
    planted.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 0)")
    planted.close()
    findings = home.ok("store", "check")["findings"]
    assert any(f["check"] == "schema.unexpected" and "memory_fts.secure-delete" in f["detail"] for f in findings)


def test_item5_no_connection_trusts_the_schema_and_all_are_defensive(home: Home) -> None:
    from hivemem.store.sqlite.db import connect

    home.ok("memory", "add", "--space", "notes", "--content", "first")
    home.stop_daemon()
    conn = connect(home.paths.store)
    try:
        assert conn.config(apsw.SQLITE_DBCONFIG_DEFENSIVE, -1) == 1
        assert conn.execute("PRAGMA trusted_schema").fetchall() == [(0,)]
        with pytest.raises(apsw.Error):  # defensive: the schema cannot be written, even with writable_schema
            conn.execute("PRAGMA writable_schema = ON; DELETE FROM sqlite_master WHERE name = 'events_memory'")
    finally:
        conn.close()
    # A trigger someone put in the file calls a function that is not innocuous: with an untrusted schema SQLite
    # refuses to run it, so the write fails whole instead of running the trigger.
    planted = apsw.Connection(home.paths.store)
    planted.execute("CREATE TRIGGER probe AFTER INSERT ON memories BEGIN SELECT fts5(NULL); END")
    planted.close()
    error = fails(home, "memory", "add", "--space", "notes", "--content", "second", code="failed.store", exit_code=1)
    assert "fts5" in error["message"]
    assert home.ok("store", "status")["memories"] == 1


# --- item 14: config is written by a TOML writer and read back ------------------------------------------------


def test_item14_config_set_of_an_astral_character_writes_toml_that_reads_back(home: Home) -> None:
    home.ok("whoami")
    assert home.ok("config", "set", "--key", "embeddings.model", "--value", "model-😀")["value"] == "model-😀"
    assert home.ok("config", "get", "--key", "embeddings.model")["value"] == "model-😀"
    grants = '[{right = "read", scope = "space:team/x"}]'
    assert home.ok("config", "set", "--key", "grants.unknown", "--value", grants)["value"]
    assert home.ok("config", "get", "--key", "grants.unknown")["value"] == [{"right": "read", "scope": "space:team/x"}]
    assert home.ok("whoami")["principal"] == "owner", "every command still reads the config"
    assert os.stat(home.paths.config).st_mode & 0o777 == 0o600


def test_item14_a_value_that_cannot_be_written_as_toml_is_refused_and_nothing_written(home: Home) -> None:
    home.ok("config", "set", "--key", "embeddings.model", "--value", "before")
    before = Path(home.paths.config).read_bytes()
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    args = [sys.executable, "-m", "hivemem", "config", "set", "--key", "embeddings.model", "--json", "--value"]
    proc = subprocess.run([*args, b"model-\xff"], env=env, capture_output=True, check=False)  # not UTF-8
    assert proc.returncode == 2, proc
    assert json.loads(proc.stdout)["error"]["code"] == "invalid_params.config"
    assert Path(home.paths.config).read_bytes() == before
    assert home.ok("config", "get", "--key", "embeddings.model")["value"] == "before"


# --- item 15: the owner key is read when presented; stop needs no owner key ----------------------------------


def test_item15_stop_needs_no_owner_key_and_the_verb_stays_the_owners(home: Home) -> None:
    home.ok("whoami")
    reader = token_for(home, "reader", [("read", "*")])
    client = home.client(reader)
    try:
        assert raises(client, "daemon.stop").code == "denied.admin"
    finally:
        client.close()
    first = home.daemon_pid()
    assert first is not None
    assert home.ok("stop", token=reader) == {"stopping": True}
    assert home.daemon_pid() is None, "stop returns once the daemon is gone"
    home.ok("whoami", token=None)
    assert home.daemon_pid() not in (None, first)
    assert home.ok("stop", token=None) == {"stopping": True}
    assert home.ok("stop", token=None) == {"stopping": False}, "nothing left to stop"


def test_item15_an_owner_key_replaced_after_start_is_the_one_accepted(home: Home) -> None:
    home.ok("whoami")
    pid = home.daemon_pid()
    old = Path(home.paths.owner_key).read_text(encoding="ascii").strip()
    os.unlink(home.paths.owner_key)
    fd = os.open(home.paths.owner_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, ("hm1.owner." + "A" * 43 + "\n").encode())
    os.close(fd)
    assert home.ok("whoami")["principal"] == "owner", "the key in the file now"
    assert home.daemon_pid() == pid, "the same daemon"
    fails(home, "whoami", code="denied.token", exit_code=4, token=old)


def test_item15_a_team_machine_started_before_the_owner_key_was_copied_accepts_it(backend: str) -> None:
    from test_postgres import machine, share_owner

    with isolated_home("postgresql") as a, machine(a.store_url) as b:
        a.ok("store", "init")
        assert b.ok("whoami", token=None)["principal"] == "unknown"  # b's daemon starts with no owner.key
        assert b.daemon_pid() is not None and not os.path.exists(b.paths.owner_key)
        share_owner(a, b)
        assert b.ok("whoami")["principal"] == "owner"
        assert b.ok("stop", token=None) == {"stopping": True}


# --- item 6: importers stay inside the folder they are given and bound what they read ---------------------------


def put(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")
    return path


def test_item6_claude_code_import_never_follows_a_link_out_of_the_project(home: Home) -> None:
    person = os.path.join(home.base, "person")
    project = os.path.join(person, "src", "api")
    os.makedirs(project)
    home.env["HOME"] = person
    for moved in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        home.env.pop(moved, None)
    history = put(os.path.join(person, ".bash_history"), "curl -u " + CREDENTIAL + " https://internal.example\n")
    password = CREDENTIAL.split(":")[1]
    netrc = put(os.path.join(person, ".netrc"), "machine internal.example login admin password " + password + "\n")
    os.symlink(history, os.path.join(project, "CLAUDE.md"))
    os.symlink(netrc, os.path.join(project, "CLAUDE.local.md"))
    put(os.path.join(project, "docs", "rules.md"), "# Rules\n\n- Keep the build green.\n")
    os.makedirs(os.path.join(project, ".claude"))
    os.symlink(os.path.join(project, "docs", "rules.md"), os.path.join(project, ".claude", "CLAUDE.md"))
    result = home.ok("import", "--from", "claude-code", "--space", "project/api", "--dry-run", cwd=project)
    assert [i["content"] for i in result["items"]] == ["Keep the build green."], "a link inside the folder is read"
    assert {s["path"] for s in result["skipped"]} == {"CLAUDE.md", "CLAUDE.local.md"}
    assert all("outside" in s["why"] for s in result["skipped"])
    assert "hunter2" not in json.dumps(result)
    home.ok("import", "--from", "claude-code", "--space", "project/api", "--active", cwd=project)
    stored = home.ok("memory", "list", "--spaces", "project/api")["memories"]
    assert len(stored) == 1 and "hunter2" not in json.dumps(stored)


def test_item6_a_folder_with_a_fifo_a_device_link_and_a_link_loop_is_read_and_ends(home: Home) -> None:
    notes = os.path.join(home.base, "notes")
    put(os.path.join(notes, "a.md"), "---\ntitle: A\n---\nThe note that counts.\n")
    os.mkfifo(os.path.join(notes, "pipe.md"))
    os.symlink("/dev/zero", os.path.join(notes, "zero.md"))
    os.symlink(".", os.path.join(notes, "x"))  # a loop: x -> . -> x -> ...
    os.symlink("loop.md", os.path.join(notes, "loop.md"))  # a link to itself
    home.ok("whoami")
    result = home.cli("import", "--from", "markdown", "--path", notes, "--space", "notes", "--dry-run", "--json",
                      timeout=30)  # fmt: skip
    assert result.code == 0, result
    assert [i["content"] for i in result.json["items"]] == ["The note that counts."]
    skipped = {os.path.basename(s["path"]): s["why"] for s in result.json["skipped"]}
    assert set(skipped) == {"pipe.md", "zero.md", "loop.md"}, skipped
    assert skipped["pipe.md"] == "not a regular file"


def test_item6_a_link_to_a_folder_inside_the_project_is_skipped_not_a_traceback(home: Home) -> None:
    project = os.path.join(home.base, "cloned")
    put(os.path.join(project, "docs", "a.md"), "- A rule in the docs.\n")
    os.symlink(".", os.path.join(project, "CLAUDE.md"))  # a crafted repository: CLAUDE.md -> .
    os.symlink("docs", os.path.join(project, "linked"))
    home.ok("whoami")
    result = home.cli("import", "--from", "claude-code", "--space", "project/c", "--dry-run", "--json", cwd=project)
    assert result.code == 0, result
    assert result.json["items"] == [] and result.json["skipped"] == [{"path": "CLAUDE.md", "why": "not a regular file"}]
    given = home.cli("import", "--from", "markdown", "--path", os.path.join(project, "linked"), "--space", "notes",
                     "--dry-run", "--json")  # fmt: skip
    assert given.code == 0, given
    assert [s["why"] for s in given.json["skipped"]] == ["not a regular file"]


def test_item6_every_file_is_bounded(home: Home) -> None:
    graph = os.path.join(home.base, "memory.jsonl")
    with open(graph, "w", encoding="utf-8") as f:
        f.write(json.dumps({"type": "entity", "name": "Big", "entityType": "x", "observations": ["y" * 1000]}) + "\n")
        f.truncate(17 << 20)  # a sparse file past the 16 MiB bound
    home.ok("whoami")
    result = home.ok("import", "--from", "mcp-memory", "--path", graph, "--space", "notes", "--dry-run")
    assert result["items"] == [] and result["skipped"][0]["why"] == f"larger than {16 << 20} bytes"


def test_item6_deep_nesting_and_observations_that_are_not_a_list_are_clear_errors(home: Home) -> None:
    home.ok("whoami")
    deep = put(os.path.join(home.base, "deep.jsonl"), "[" * 200_000 + "]" * 200_000 + "\n")
    error = fails(home, "import", "--from", "mcp-memory", "--path", deep, "--space", "notes",
                  code="invalid_params.import", exit_code=2)  # fmt: skip
    assert error["data"]["line"] == 1 and "nested too deeply" in error["message"]
    entity = {"type": "entity", "name": "Word", "entityType": "x", "observations": "not-a-list"}
    flat = put(os.path.join(home.base, "flat.jsonl"), json.dumps(entity) + "\n")
    error = fails(home, "import", "--from", "mcp-memory", "--path", flat, "--space", "notes",
                  code="invalid_params.import", exit_code=2)  # fmt: skip
    assert error["data"]["line"] == 1 and "not a list" in error["message"]
    assert home.ok("store", "status")["memories"] == 0
