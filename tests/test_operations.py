"""Export and import (docs/operations.md; conformance C14): real daemons on real stores, driven through the CLI.

A document is written and read by the daemon, never sent over the socket; import validates the whole document
first and applies it in one transaction, so a bad document leaves the store exactly as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Home, client_token, fails, on_a_terminal

SPEC_FIELDS = ("space", "kind", "title", "content", "tags", "status", "source", "confidence", "confidence_state",
               "review_after", "expires_at")  # fmt: skip

PAT_BODY = "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # the body of a GitHub PAT, joined to its prefix below


@pytest.fixture
def other() -> Iterator[Home]:
    """A second, empty hivemem home: the store an export is carried to."""
    h = Home(tempfile.mkdtemp(prefix="hm-", dir="/tmp"))
    try:
        yield h
    finally:
        # Home.stop_daemon finds a daemon through this process's environment, which points at `home`:
        # the second home's daemon is stopped through its own CLI, and waited for.
        h.cli("stop")
        shutil.rmtree(h.base, ignore_errors=True)


def document(memories: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    return {"format": "hivemem.export", "version": 1, "exported": "2026-11-01T10:00:00.000Z",
            "store_id": "11111111-2222-3333-4444-555555555555", "memories": memories, **rest}  # fmt: skip


def write(home: Home, name: str, doc: Any) -> str:
    path = os.path.join(home.base, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def read(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


RICH = document(
    [
        {"id": "m4", "space": "project/api", "kind": "decision", "title": "Pin Zig", "content": "api pins Zig 0.13",
         "tags": ["zig", "build"], "status": "active", "source": "codex:remember",
         "provenance": {"kind": "file", "path": "docs/adr.md", "line": 3}, "confidence": 0.9,
         "confidence_state": "user_confirmed", "review_after": "2027-05-01T00:00:00.000Z",
         "expires_at": "2028-01-01T00:00:00.000Z", "revision": 3, "author": {"principal": "g2", "label": "codex"},
         "updated_by": {"principal": "owner", "label": "owner"}, "session": "s2",
         "created": "2026-10-01T10:00:00.000Z", "updated": "2026-10-02T10:00:00.000Z"},
        {"id": "m5", "space": "user", "kind": "preference", "content": "Prefers small PRs.", "tags": [],
         "status": "draft", "confidence": 0.7, "confidence_state": "inferred", "revision": 1,
         "author": {"principal": "g1", "label": "claude-code"},
         "updated_by": {"principal": "g1", "label": "claude-code"},
         "created": "2026-10-01T10:00:00.000Z", "updated": "2026-10-01T10:00:00.000Z"},
        {"id": "m7", "space": "project/api", "kind": "fact", "title": "Old pin", "content": "api pins Zig 0.12",
         "tags": ["zig"], "status": "archived", "confidence": 1.0, "revision": 2,
         "author": {"principal": "owner", "label": "owner"}, "updated_by": {"principal": "owner", "label": "owner"},
         "created": "2026-09-01T10:00:00.000Z", "updated": "2026-09-05T10:00:00.000Z"},
    ],
    relations=[{"source": "m4", "target": "m7", "relation": "supersedes", "reason": "newer pin",
                "author": {"principal": "owner", "label": "owner"}, "created": "2026-10-02T10:00:00.000Z"}],
    sessions=[
        {"session": "s1", "harness": "codex", "harness_session": "0199a", "cwd": "/src/api",
         "reported_by": {"principal": "g2", "label": "codex"}, "started": "2026-10-01T09:00:00.000Z"},
        {"session": "s2", "harness": "codex", "harness_session": "0199b", "parent": "s1", "relation": "continue",
         "reported_by": {"principal": "g2", "label": "codex"}, "started": "2026-10-01T09:30:00.000Z",
         "ended": "2026-10-01T11:00:00.000Z"},
    ],
)  # fmt: skip


def events(home: Home, *types: str) -> list[dict[str, Any]]:
    """The audit log, newest first (up to 1000), through an owner connection."""
    owner = home.client()
    try:
        found: list[dict[str, Any]] = owner.call(
            "events.list", limit=1000, **({"types": list(types)} if types else {})
        )["events"]
        return found
    finally:
        owner.close()


def by_content(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["content"]: m for m in doc["memories"]}


def spec_fields(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: memory.get(k) for k in SPEC_FIELDS}


def relations_by_content(doc: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    text = {m["id"]: m["content"] for m in doc["memories"]}
    return sorted((text[r["source"]], text[r["target"]], r["relation"], r.get("reason")) for r in doc["relations"])


def sessions_shape(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Sessions as harness facts and lineage (ids are new on import)."""
    by_id = {s["session"]: s for s in doc["sessions"]}
    return sorted((s["harness"], s.get("harness_session"), s.get("cwd"), s.get("relation"),
                   by_id[s["parent"]]["harness_session"] if s.get("parent") else None, s["started"], s.get("ended"))
                  for s in doc["sessions"])  # fmt: skip


def test_round_trip_keeps_every_field_with_relations_and_sessions(home: Home, other: Home) -> None:
    """Import a document into a store, export it, import that into an empty store, export again: equal."""
    assert home.ok("store", "import", "--path", write(home, "rich.json", RICH))["planned"] == {
        "add": 3, "duplicate": 0, "skip": 0}  # fmt: skip
    a = home.ok("memory", "add", "--space", "user", "--content", "native relation source")["id"]
    b = home.ok("memory", "add", "--space", "user", "--content", "native relation target")["id"]
    home.ok("memory", "relate", "--source", a, "--target", b, "--relation", "derived_from", "--reason", "made here")
    first = read(home.ok("store", "export", "--path", os.path.join(home.base, "first.json"))["path"])
    assert other.ok("store", "import", "--path", os.path.join(home.base, "first.json")) == {
        "planned": {"add": 5, "duplicate": 0, "skip": 0}, "applied": True}  # fmt: skip
    second_path = os.path.join(other.base, "second.json")
    result = other.ok("store", "export", "--path", second_path)
    second = read(second_path)
    assert result == {"path": second_path, "memories": 5, "bytes": os.path.getsize(second_path)}
    original, once, twice = by_content(RICH), by_content(first), by_content(second)
    assert set(once) == set(twice) == {*original, "native relation source", "native relation target"}
    for content in once:
        assert spec_fields(once[content]) == spec_fields(twice[content]), content
    for content in original:
        assert spec_fields(once[content]) == spec_fields(original[content]), content
    assert relations_by_content(first) == relations_by_content(second)
    assert relations_by_content(second) == [
        ("api pins Zig 0.13", "api pins Zig 0.12", "supersedes", "newer pin"),
        ("native relation source", "native relation target", "derived_from", "made here"),
    ]
    assert sessions_shape(first) == sessions_shape(second) == sessions_shape(RICH)
    assert twice["api pins Zig 0.13"]["session"] in {s["session"] for s in second["sessions"]}
    assert {k for m in second["memories"] for k in m} <= {
        *SPEC_FIELDS,
        "id",
        "provenance",
        "review",
        "revision",
        "author",
        "updated_by",
        "session",
        "created",
        "updated",
    }
    assert "embedding" not in json.dumps(second)


def test_import_records_provenance_and_the_importer_as_author(home: Home, other: Home) -> None:
    home.ok("store", "import", "--path", write(home, "rich.json", RICH))
    memory = home.ok("memory", "list", "--spaces", "project/api", "--status", "archived")["memories"][0]
    got = home.ok("memory", "get", "--id", memory["id"])
    assert got["author"] == got["updated_by"] == {"principal": "owner", "label": "owner"}, "the importer, always"
    assert got["revision"] == 1 and got["created"] > "2026-11-30"
    assert got["provenance"] == {"kind": "import", "surface": "import", "original_store": RICH["store_id"],
                                 "original_id": "m7", "original_author": "owner"}  # fmt: skip
    rich = home.ok("memory", "get", "--id", home.ok("memory", "search", "--query", "Pin Zig")["results"][0]["id"])
    assert rich["provenance"]["path"] == "docs/adr.md" and rich["provenance"]["original_author"] == "codex"
    imported = events(home, "memory.imported")
    assert len(imported) == 3 and {e["data"]["original_id"] for e in imported} == {"m4", "m5", "m7"}
    assert home.ok("memory", "history", "--id", got["id"])["versions"][0]["action"] == "import"
    # An export is the one read that is audited; it records counts, never text.
    home.ok("store", "export")
    exported = events(home, "memory.exported")
    assert len(exported) == 1 and exported[0]["data"]["memories"] == 3
    assert "Zig" not in json.dumps(exported)


def test_reimport_adds_nothing_dry_run_writes_nothing_and_space_map_renames(home: Home) -> None:
    path = write(home, "rich.json", RICH)
    assert home.ok("store", "import", "--path", path, "--dry-run") == {
        "planned": {"add": 3, "duplicate": 0, "skip": 0}, "applied": False}  # fmt: skip
    assert home.ok("store", "status")["memories"] == 0 and events(home) == []
    home.ok("store", "import", "--path", path)
    before = events(home)
    assert home.ok("store", "import", "--path", path) == {
        "planned": {"add": 0, "duplicate": 3, "skip": 0}, "applied": True}  # fmt: skip
    assert events(home) == before, "a repeat writes nothing"
    mapped = home.ok("store", "import", "--path", path, "--space-map", '{"project/api": "project/renamed"}')
    assert mapped["planned"] == {"add": 2, "duplicate": 1, "skip": 0}
    listed = home.ok("memory", "list", "--spaces", "project/renamed", "--status", "active")["memories"]
    assert [m["title"] for m in listed] == ["Pin Zig"]


def test_deleted_memories_export_with_include_deleted_and_are_skipped_on_import(home: Home, other: Home) -> None:
    kept = home.ok("memory", "add", "--space", "user", "--content", "kept")
    gone = home.ok("memory", "add", "--space", "user", "--content", "gone")
    home.ok("memory", "delete", "--id", gone["id"], "--revision", "1")
    assert home.ok("store", "export", "--path", os.path.join(home.base, "live.json"))["memories"] == 1
    path = os.path.join(home.base, "all.json")
    assert home.ok("store", "export", "--path", path, "--include-deleted")["memories"] == 2
    assert {m["id"]: "deleted" in m for m in read(path)["memories"]} == {kept["id"]: False, gone["id"]: True}
    assert other.ok("store", "import", "--path", path)["planned"] == {"add": 1, "duplicate": 0, "skip": 1}


def store_state(home: Home) -> tuple[Any, Any]:
    status = home.ok("store", "status")
    return {k: status[k] for k in ("memories", "drafts", "archived", "deleted", "versions", "sessions")}, events(home)


def with_items(*bad: dict[str, Any], **rest: Any) -> dict[str, Any]:
    """A document whose first memory is fine and whose later items are not."""
    good = {"id": "m1", "space": "user", "content": "a fine memory"}
    return document([good, *bad], **rest)


BAD: list[tuple[str, Any, str, str]] = [
    ("truncated", json.dumps(RICH)[:300], "invalid_params.import", ""),
    ("not json", "hello", "invalid_params.import", ""),
    ("not an object", "[1, 2]", "invalid_params.import", ""),
    ("wrong format", {**RICH, "format": "other.export"}, "invalid_params.import", "/format"),
    ("newer version", {**RICH, "version": 2}, "invalid_params.import", "/version"),
    ("version as text", {**RICH, "version": "1"}, "invalid_params.import", "/version"),
    ("no memories", {k: v for k, v in RICH.items() if k != "memories"}, "invalid_params.import", "/memories"),
    ("wrong type deep", with_items({"id": "m2", "space": "user", "content": "x", "tags": ["ok", 3]}),
     "invalid_params.import", "/memories/1/tags"),
    ("confidence as text", with_items({"id": "m2", "space": "user", "content": "x", "confidence": "high"}),
     "invalid_params.import", "/memories/1/confidence"),
    ("duplicate id", with_items({"id": "m1", "space": "user", "content": "other text"}),
     "invalid_params.import", "/memories/1/id"),
    ("unknown member", with_items({"id": "m2", "space": "user", "content": "x", "owner": "me"}),
     "invalid_params.import", "/memories/1/owner"),
    ("bad space", with_items({"id": "m2", "space": "Not A Space", "content": "x"}),
     "invalid_params.import", "/memories/1/space"),
    ("missing content", with_items({"id": "m2", "space": "user"}), "invalid_params.import", "/memories/1/content"),
    ("daemon-only author label bad", with_items({"id": "m2", "space": "user", "content": "x",
                                                 "author": {"principal": 5}}),
     "invalid_params.import", "/memories/1/author/principal"),
    ("relation to nowhere", with_items(relations=[{"source": "m1", "target": "m9", "relation": "related"}]),
     "invalid_params.import", "/relations/0/target"),
    ("session not in document", with_items({"id": "m2", "space": "user", "content": "x", "session": "s4"}),
     "invalid_params.import", "/memories/1/session"),
    ("secret in content", with_items({"id": "m2", "space": "user",
                                      "content": "deploy with AKIA" + "IOSFODNN7EXAMPLF and go"}),
     "invalid_params.secret_content", "/memories/1/content"),
    ("secret deep in provenance", with_items({"id": "m2", "space": "user", "content": "x",
                                              "provenance": {"kind": "file", "reason": "token ghp_" + PAT_BODY}}),
     "invalid_params.secret_content", "/memories/1/provenance"),
    ("secret in a session", with_items(sessions=[{"session": "s1", "harness": "codex",
                                                  "started": "2026-10-01T09:00:00Z",
                                                  "cwd": "/x/pass" + "word=hunter2hunter2"}]),
     "invalid_params.secret_content", "/sessions/0/cwd"),
    ("secret in a relation reason", with_items({"id": "m2", "space": "user", "content": "x"}, relations=[
        {"source": "m1", "target": "m2", "relation": "related",
         "reason": "Authorization: " + "Bearer abcdefghijklmnop1234"}]),
     "invalid_params.secret_content", "/relations/0/reason"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "doc", "code", "at"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_document_is_refused_whole_with_a_pointer(home: Home, name: str, doc: Any, code: str, at: str) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "already here")
    before = store_state(home)
    error = fails(home, "store", "import", "--path", write(home, "bad.json", doc), code=code, exit_code=2)
    assert error["data"]["at"] == at, error
    if code == "invalid_params.secret_content":
        assert "AKIA" not in json.dumps(error) and "hunter2" not in json.dumps(error), "never echoed"
    assert store_state(home) == before, "nothing half-written"


def test_a_200_mb_document_is_refused_with_nothing_written(home: Home) -> None:
    path = os.path.join(home.base, "huge.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(document([{"id": "m1", "space": "user", "content": "first"}]))[:-2])
        f.write(',{"id":"m2","space":"user","content":"')
        chunk = "word " * 200_000  # 1 MB
        for _ in range(200):
            f.write(chunk)
        f.write('"}]}')
    assert os.path.getsize(path) > 200_000_000
    before = store_state(home)
    error = fails(home, "store", "import", "--path", path, code="invalid_params.import", exit_code=2)
    assert error["data"]["at"] == "/memories/1/content"
    assert store_state(home) == before
    assert home.ok("whoami")["principal"] == "owner", "the daemon serves on"


def test_missing_file_and_a_client_cannot_import(home: Home) -> None:
    fails(home, "store", "import", "--path", "no-such.json", code="invalid_params.path", exit_code=2)
    owner = home.client()
    try:
        token = client_token(owner, "narrow", [("read", "*"), ("write", "*")])
    finally:
        owner.close()
    before = store_state(home)
    path = write(home, "rich.json", RICH)
    error = fails(home, "store", "import", "--path", path, code="denied.admin", exit_code=4, token=token)
    assert error["data"]["resource"] == "store.import", "agents write through the memory verbs (docs/security.md)"
    assert store_state(home) == before


def test_export_covers_only_what_the_caller_reads(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "mine")
    home.ok("memory", "add", "--space", "project/secret", "--content", "hidden plans")
    owner = home.client()
    try:
        token = client_token(owner, "reader", [("read", "space:user")])
    finally:
        owner.close()
    made = home.ok("store", "export", token=token)
    assert made["memories"] == 1
    assert "hidden plans" not in Path(made["path"]).read_text(encoding="utf-8")
    fails(home, "store", "export", "--spaces", "project/secret", code="denied.read", exit_code=4, token=token)
    assert os.listdir(home.paths.exports) == [os.path.basename(made["path"])]


def test_export_paths_resolve_against_the_cli_and_never_replace_or_follow(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "x")
    work = os.path.join(home.base, "work")
    os.mkdir(work)
    result = home.ok("store", "export", "--path", "rel.json", cwd=work)
    assert result["path"] == os.path.join(work, "rel.json") and os.path.isfile(result["path"])
    assert os.stat(result["path"]).st_mode & 0o777 == 0o600
    before = Path(result["path"]).read_bytes()
    fails(home, "store", "export", "--path", result["path"], code="conflict.path_exists", exit_code=5)
    assert Path(result["path"]).read_bytes() == before
    target = os.path.join(home.base, "elsewhere.json")
    os.symlink(target, os.path.join(work, "link.json"))
    fails(home, "store", "export", "--path", os.path.join(work, "link.json"), code="denied.path", exit_code=4)
    assert not os.path.exists(target)
    fails(home, "store", "export", "--path", os.path.join(home.base, "no", "dir.json"), code="invalid_params.path",
          exit_code=2)  # fmt: skip
    assert sorted(os.listdir(work)) == ["link.json", "rel.json"], "no temporary file is left behind"
    default = home.ok("store", "export")["path"]
    assert os.path.dirname(default) == home.paths.exports
    assert os.stat(home.paths.exports).st_mode & 0o777 == 0o700 and os.stat(default).st_mode & 0o777 == 0o600


def test_sessions_without_a_harness_id_are_not_added_twice(home: Home) -> None:
    doc = document(
        [{"id": "m1", "space": "user", "content": "said in a session", "session": "s3"}],
        sessions=[{"session": "s3", "harness": "script", "started": "2026-10-01T09:00:00.000Z"},
                  {"session": "s4", "harness": "script", "started": "2026-10-02T09:00:00.000Z"}],
    )  # fmt: skip
    path = write(home, "sessions.json", doc)
    home.ok("store", "import", "--path", path)
    assert home.ok("store", "status")["sessions"] == 1, "only the session a memory names"
    before = store_state(home)
    assert home.ok("store", "import", "--path", path)["planned"] == {"add": 0, "duplicate": 1, "skip": 0}
    assert store_state(home) == before


@pytest.mark.sqlite_only  # store check's progress and store backup are the SQLite file's (D155)
def test_long_work_shows_progress_on_a_terminal_only(home: Home) -> None:
    many = document(
        [{"id": f"m{i}", "space": "user", "content": f"memory number {i} of many"} for i in range(1, 10001)]
    )
    path = write(home, "many.json", many)
    code, out, terminal = on_a_terminal(home, "store", "import", "--path", path, "--dry-run")
    assert code == 0 and "planned" in out
    assert "hivemem store import: " in terminal, terminal
    # a bar with counts, drawn from the daemon's progress frames: the last report of the check is drawn full
    bars = re.findall(r"hivemem store import: checking \[([#-]{24})\] ([\d,]+)/10,000 ", terminal)
    assert bars and bars[-1] == ("#" * 24, "10,000"), terminal
    assert terminal.endswith("\r\x1b[K"), "the line is cleared at the end"
    assert "planned" not in terminal and "{" not in terminal
    code, out, terminal = on_a_terminal(home, "store", "import", "--path", path, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["planned"]["add"] == 10000
    assert terminal == "", "silent with --json"
    code, out, terminal = on_a_terminal(home, "store", "import", "--path", path)
    assert code == 0 and "planned" in out
    assert full_bar(terminal, "hivemem store import: writing", "10,000"), terminal
    code, out, terminal = on_a_terminal(home, "store", "export", "--path", os.path.join(home.base, "out.json"))
    assert code == 0 and "path" in out
    assert full_bar(terminal, "hivemem store export: memories", "10,000"), terminal
    code, out, terminal = on_a_terminal(home, "store", "check")
    assert code == 0 and full_bar(terminal, "hivemem store check: checks", r"\d+"), terminal
    code, out, terminal = on_a_terminal(home, "store", "backup", "--path", os.path.join(home.base, "copy.db"))
    assert code == 0 and full_bar(terminal, "hivemem store backup: copying", r"[\d,]+"), terminal
    assert full_bar(terminal, "hivemem store backup: checking", "1"), terminal


def full_bar(terminal: str, label: str, total: str) -> bool:
    """Whether the last bar drawn after `label` is full, with the count of a finished stage."""
    bars = re.findall(re.escape(label) + r" \[([#-]{24})\] ([\d,]+)/([\d,]+) ", terminal)
    return (
        bool(bars) and bars[-1][0] == "#" * 24 and bars[-1][1] == bars[-1][2] and bool(re.fullmatch(total, bars[-1][2]))
    )


def test_progress_frames_come_only_to_a_request_that_asks_and_before_its_reply(home: Home) -> None:
    """The wire of docs/protocol.md is unchanged for a request without `progress`; with `"progress": true`, frames
    carrying the request's id and {stage, done, total} come before its one reply (D114)."""
    many = document([{"id": f"m{i}", "space": "user", "content": f"note {i}"} for i in range(1, 3001)])
    path = write(home, "many.json", many)
    client = home.client()
    try:
        client.call("whoami")
        plain = raw_lines(client, {"id": 7, "verb": "store.import", "params": {"path": path, "dry_run": True}})
        assert [sorted(m) for m in plain] == [["id", "ok"]]
        asked = raw_lines(client, {"id": "x", "verb": "store.import", "progress": True,
                                   "params": {"path": path, "dry_run": True}})  # fmt: skip
        *frames, last = asked
        assert last["id"] == "x" and last["ok"]["planned"]["add"] == 3000
        assert frames and all(sorted(f) == ["id", "progress"] and f["id"] == "x" for f in frames)
        reports = [(f["progress"]["stage"], f["progress"]["done"], f["progress"]["total"]) for f in frames]
        assert reports[0][1] <= reports[-1][1] and ("checking", 3000, 3000) in reports
        assert all(0 <= done <= total for _, done, total in reports)
        # the client passes them to its callback, and returns the reply
        seen: list[tuple[str, int, int]] = []
        result = client.request("store.import", {"path": path, "dry_run": True}, lambda *r: seen.append(r))
        assert result["planned"]["add"] == 3000 and ("checking", 3000, 3000) in seen
        # a verb that does not report sends none, and an error still ends the request
        assert raw_lines(client, {"id": 9, "verb": "whoami", "progress": True, "params": {}})[0]["id"] == 9
        bad = raw_lines(client, {"id": 10, "verb": "store.import", "progress": True,
                                 "params": {"path": os.path.join(home.base, "absent.json")}})  # fmt: skip
        assert bad[-1]["error"]["code"] == "invalid_params.path"
    finally:
        client.close()


def raw_lines(client: Any, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Send one request line and read every line up to and including its reply."""
    client.send(request)
    lines = [client.receive()]
    while not {"ok", "error"} & lines[-1].keys():
        lines.append(client.receive())
    return lines
