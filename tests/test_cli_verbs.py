"""Every verb through the real CLI with --json: result shapes of docs/protocol.md and the CLI rules of docs/cli.md."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import pytest

from conftest import Home, Result, fails, wait_for
from hivemem import __version__
from hivemem.store.sqlite import fts_index
from hivemem.store.sqlite.db import connect

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
OWNER = {"principal": "owner", "label": "owner"}
LIST_KEYS = {"id", "space", "kind", "tags", "status", "confidence", "revision", "author", "updated_by", "created",
             "updated", "snippet"}  # fmt: skip


def add(home: Home, content: str, space: str = "user", *args: str) -> dict[str, Any]:
    result = home.ok("memory", "add", "--space", space, "--content", content, *args)
    assert isinstance(result, dict)
    return result


def status(home: Home) -> dict[str, Any]:
    result = home.ok("store", "status")
    assert isinstance(result, dict)
    return result


def listed(home: Home, *args: str, token: str | None = "@owner") -> list[str]:
    return [m["id"] for m in home.ok("memory", "list", *args, token=token)["memories"]]


def listed_in(home: Home, cwd: str, *args: str) -> list[str]:
    return [m["id"] for m in home.ok("memory", "list", *args, cwd=cwd)["memories"]]


def found(home: Home, query: str, *args: str) -> list[str]:
    return [h["id"] for h in home.ok("memory", "search", "--query", query, *args)["results"]]


# memory add / get


def test_add_and_get_full_shape(home: Home) -> None:
    assert add(home, "Prefers small pull requests") == {"id": "m1", "revision": 1, "changed": True}
    memory = home.ok("memory", "get", "--id", "m1")
    assert set(memory) == {"id", "space", "kind", "content", "tags", "status", "confidence", "revision", "author",
                           "updated_by", "created", "updated", "embedding", "relations"}  # fmt: skip
    assert memory["id"] == "m1"
    assert memory["space"] == "user"
    assert memory["kind"] == "note"
    assert memory["content"] == "Prefers small pull requests"
    assert memory["tags"] == []
    assert memory["status"] == "active"
    assert memory["confidence"] == 1.0
    assert memory["revision"] == 1
    assert memory["author"] == OWNER
    assert memory["updated_by"] == OWNER
    assert TS.match(memory["created"])
    assert memory["updated"] == memory["created"]
    assert memory["embedding"] == "off"
    assert memory["relations"] == []


def test_add_with_every_field(home: Home) -> None:
    provenance = '{"kind":"file","host":"codex","path":"src/a.py","line":3}'
    add(home, "api pins Zig", "project/api", "--kind", "fact", "--title", "Zig pin", "--tags", "zig,build",
        "--source", "codex:mcp", "--provenance", provenance, "--confidence", "0.5", "--confidence-state", "observed",
        "--review-after", "2030-01-02T03:04:05+02:00", "--expires-at", "2031-01-01T00:00:00Z")  # fmt: skip
    memory = home.ok("memory", "get", "--id", "m1")
    assert memory["space"] == "project/api"
    assert memory["kind"] == "fact"
    assert memory["title"] == "Zig pin"
    assert memory["tags"] == ["zig", "build"]
    assert memory["source"] == "codex:mcp"
    assert memory["provenance"] == {"kind": "file", "host": "codex", "path": "src/a.py", "line": 3}
    assert memory["confidence"] == 0.5
    assert memory["confidence_state"] == "observed"
    assert memory["review_after"] == "2030-01-02T01:04:05.000Z"
    assert memory["expires_at"] == "2031-01-01T00:00:00.000Z"
    assert "review" not in memory


def test_decision_gets_a_default_review_date_and_past_dates_show_review(home: Home) -> None:
    add(home, "we chose sqlite", "user", "--kind", "decision")
    add(home, "old news", "user", "--expires-at", "2001-01-01T00:00:00Z")
    assert TS.match(home.ok("memory", "get", "--id", "m1")["review_after"])
    assert home.ok("memory", "get", "--id", "m2")["review"] == "expired"


def test_duplicate_content_returns_the_same_memory_unchanged(home: Home) -> None:
    add(home, "same text", "user", "--title", "first")
    again = add(home, "same text", "user", "--title", "second", "--kind", "fact", "--tags", "x")
    assert again == {"id": "m1", "revision": 1, "changed": False}
    memory = home.ok("memory", "get", "--id", "m1")
    assert (memory["title"], memory["kind"], memory["tags"], memory["revision"]) == ("first", "note", [], 1)
    assert status(home)["memories"] == 1
    assert add(home, "same text", "project/other") == {"id": "m2", "revision": 1, "changed": True}


def test_duplicate_of_a_deleted_memory_is_a_new_memory(home: Home) -> None:
    add(home, "same text")
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert add(home, "same text") == {"id": "m2", "revision": 1, "changed": True}


@pytest.mark.sqlite_only  # sets the row by hand in the store file
@pytest.mark.parametrize("state", ["archived", "draft"])
def test_duplicate_of_a_non_active_memory_echoes_its_status(home: Home, state: str) -> None:
    add(home, "parked text")
    home.stop_daemon()
    # No verb in this release makes a memory non-active (archive and capture come with governance),
    # so the row is set as those verbs will leave it: not active, and out of the full-text index.
    conn = connect(home.paths.store)
    fts_index.remove(conn, 1)  # while the row is still active: the index reads what to remove from it
    conn.execute("UPDATE memories SET status = ? WHERE id = 1", (state,))
    conn.close()
    assert add(home, "parked text") == {"id": "m1", "revision": 1, "changed": False, "status": state}
    assert add(home, "active text") == {"id": "m2", "revision": 1, "changed": True}


def test_get_unknown_and_malformed_ids(home: Home) -> None:
    add(home, "x")
    error = fails(home, "memory", "get", "--id", "m99", code="not_found.memory", exit_code=3)
    assert "m99" in error["message"]
    fails(home, "memory", "get", "--id", "99", code="invalid_params.type", exit_code=2)


def test_get_revision_returns_that_version_with_its_action(home: Home) -> None:
    add(home, "version one", "user", "--title", "t1")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "version two")
    home.ok("memory", "update", "--id", "m1", "--revision", "2", "--title", "t3")
    first = home.ok("memory", "get", "--id", "m1", "--revision", "1")
    assert (first["content"], first["title"], first["revision"], first["action"]) == ("version one", "t1", 1, "add")
    assert "relations" not in first
    second = home.ok("memory", "get", "--id", "m1", "--revision", "2")
    assert (second["content"], second["title"], second["action"]) == ("version two", "t1", "update")
    assert second["updated_by"] == OWNER
    current = home.ok("memory", "get", "--id", "m1")
    assert (current["content"], current["title"], current["revision"]) == ("version two", "t3", 3)
    fails(home, "memory", "get", "--id", "m1", "--revision", "4", code="not_found.memory_revision", exit_code=3)
    fails(home, "memory", "get", "--id", "m1", "--revision", "0", code="invalid_params.range", exit_code=2)
    home.ok("memory", "delete", "--id", "m1", "--revision", "3")
    fails(home, "memory", "get", "--id", "m1", "--revision", "1", code="not_found.memory", exit_code=3)
    old = home.ok("memory", "get", "--id", "m1", "--revision", "1", "--include-deleted")
    assert (old["content"], old["action"]) == ("version one", "add")


def test_versions_past_the_default_max_of_20_are_pruned(home: Home) -> None:
    add(home, "text 0")
    client = home.client()
    try:
        for revision in range(1, 22):
            client.call("memory.update", id="m1", revision=revision, content=f"text {revision}")
    finally:
        client.close()
    versions = home.ok("memory", "history", "--id", "m1")["versions"]
    assert [v["revision"] for v in versions] == list(range(22, 2, -1))
    for gone in ("1", "2"):
        fails(home, "memory", "get", "--id", "m1", "--revision", gone, code="not_found.memory_revision", exit_code=3)
    assert home.ok("memory", "get", "--id", "m1", "--revision", "3")["content"] == "text 2"


def test_configured_max_versions(home: Home) -> None:
    home.config("[memory]\nmax_versions = 3\n")
    add(home, "text 0")
    for revision in range(1, 5):
        home.ok("memory", "update", "--id", "m1", "--revision", str(revision), "--content", f"text {revision}")
    assert [v["revision"] for v in home.ok("memory", "history", "--id", "m1")["versions"]] == [5, 4, 3]
    fails(home, "memory", "get", "--id", "m1", "--revision", "2", code="not_found.memory_revision", exit_code=3)
    assert home.ok("memory", "get", "--id", "m1", "--revision", "3")["content"] == "text 2"


# memory update


def test_update_changes_fields_and_bumps_revision(home: Home) -> None:
    add(home, "old text", "user", "--title", "T", "--tags", "a")
    result = home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "new text", "--tags", "b,c")
    assert result == {"id": "m1", "revision": 2, "changed": True}
    memory = home.ok("memory", "get", "--id", "m1")
    assert (memory["content"], memory["tags"], memory["title"], memory["revision"]) == ("new text", ["b", "c"], "T", 2)
    assert memory["updated"] >= memory["created"]
    home.ok("memory", "update", "--id", "m1", "--revision", "2", "--title", "")
    assert "title" not in home.ok("memory", "get", "--id", "m1")


def test_update_with_a_stale_revision_is_a_conflict(home: Home) -> None:
    add(home, "text")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "text two")
    error = fails(home, "memory", "update", "--id", "m1", "--revision", "1", "--content", "lost",
                  code="conflict.memory_revision", exit_code=5)  # fmt: skip
    assert error["data"]["current"] == 2
    assert home.ok("memory", "get", "--id", "m1")["content"] == "text two"
    assert len(home.ok("memory", "history", "--id", "m1")["versions"]) == 2


def test_update_to_content_of_another_live_memory_is_a_duplicate(home: Home) -> None:
    add(home, "first")
    add(home, "second")
    error = fails(home, "memory", "update", "--id", "m2", "--revision", "1", "--content", "first",
                  code="conflict.memory_duplicate", exit_code=5)  # fmt: skip
    assert error["data"]["id"] == "m1"
    assert home.ok("memory", "get", "--id", "m2")["revision"] == 1
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert home.ok("memory", "update", "--id", "m2", "--revision", "1", "--content", "first")["changed"] is True


def test_noop_update_changes_nothing(home: Home) -> None:
    add(home, "same", "user", "--title", "T", "--tags", "a,b")
    before = home.ok("memory", "get", "--id", "m1")
    result = home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "same", "--title", "T",
                     "--tags", "a,b")  # fmt: skip
    assert result == {"id": "m1", "revision": 1, "changed": False}
    assert home.ok("memory", "get", "--id", "m1") == before
    assert len(home.ok("memory", "history", "--id", "m1")["versions"]) == 1


def test_update_of_a_deleted_memory_is_not_found(home: Home) -> None:
    add(home, "text")
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    fails(home, "memory", "update", "--id", "m1", "--revision", "2", "--content", "x", code="not_found.memory",
          exit_code=3)  # fmt: skip


# memory delete / restore / history


def test_delete_is_soft_and_hides_the_memory(home: Home) -> None:
    add(home, "zebra to forget")
    add(home, "zebra to keep")
    fails(home, "memory", "delete", "--id", "m1", "--revision", "2", code="conflict.memory_revision", exit_code=5)
    deleted = home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert set(deleted) == {"id", "revision", "deleted"}
    assert (deleted["id"], deleted["revision"]) == ("m1", 2)
    assert TS.match(deleted["deleted"])
    fails(home, "memory", "get", "--id", "m1", code="not_found.memory", exit_code=3)
    shown = home.ok("memory", "get", "--id", "m1", "--include-deleted")
    assert shown["deleted"] == deleted["deleted"]
    assert shown["revision"] == 2
    assert found(home, "zebra") == ["m2"]
    assert listed(home) == ["m2"]
    assert "deleted" not in home.ok("memory", "get", "--id", "m2", "--include-deleted")
    counts = status(home)
    assert (counts["memories"], counts["deleted"]) == (1, 1)


def test_delete_result_carries_the_stored_deleted_stamp(home: Home) -> None:
    home.ok("whoami")
    client = home.client()
    try:
        for i in range(200):  # the two stamps used to come from two clock reads, apart about 1 time in 100
            memory = client.call("memory.add", space="user", content=f"text {i}")["id"]
            stamp = client.call("memory.delete", id=memory, revision=1)["deleted"]
            assert client.call("memory.get", id=memory, include_deleted=True)["deleted"] == stamp
    finally:
        client.close()


def test_restore_brings_a_deleted_memory_back(home: Home) -> None:
    add(home, "zebra back")
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert home.ok("memory", "restore", "--id", "m1") == {"id": "m1", "revision": 3}
    memory = home.ok("memory", "get", "--id", "m1")
    assert "deleted" not in memory
    assert memory["revision"] == 3
    assert found(home, "zebra") == ["m1"]
    assert listed(home) == ["m1"]


def test_restore_refuses_to_create_a_live_duplicate(home: Home) -> None:
    add(home, "twice")
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    add(home, "twice")
    error = fails(home, "memory", "restore", "--id", "m1", code="conflict.memory_duplicate", exit_code=5)
    assert error["data"]["id"] == "m2"
    fails(home, "memory", "get", "--id", "m1", code="not_found.memory", exit_code=3)


def test_history_is_newest_first_with_author_and_utf8_bytes(home: Home) -> None:
    add(home, "héllo wörld ✓")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "日本語")
    home.ok("memory", "delete", "--id", "m1", "--revision", "2")
    home.ok("memory", "restore", "--id", "m1")
    versions = home.ok("memory", "history", "--id", "m1")["versions"]
    assert [v["revision"] for v in versions] == [4, 3, 2, 1]
    assert [v["action"] for v in versions] == ["restore", "delete", "update", "add"]
    assert [v["bytes"] for v in versions] == [9, 9, 9, len("héllo wörld ✓".encode())]
    assert len("héllo wörld ✓".encode()) != len("héllo wörld ✓")
    for v in versions:
        assert set(v) == {"revision", "action", "by", "ts", "bytes"}
        assert v["by"] == OWNER
        assert TS.match(v["ts"])
    assert [v["ts"] for v in versions] == sorted((v["ts"] for v in versions), reverse=True)
    fails(home, "memory", "history", "--id", "m9", code="not_found.memory", exit_code=3)


# memory list


def test_list_is_newest_first_and_pages_with_after(home: Home) -> None:
    for i in range(5):
        add(home, f"memory {i}")
    assert listed(home) == ["m5", "m4", "m3", "m2", "m1"]
    page = home.ok("memory", "list", "--limit", "2")
    assert [m["id"] for m in page["memories"]] == ["m5", "m4"]
    assert page["next"] == "m4"
    page = home.ok("memory", "list", "--limit", "2", "--after", page["next"])
    assert [m["id"] for m in page["memories"]] == ["m3", "m2"]
    page = home.ok("memory", "list", "--limit", "2", "--after", page["next"])
    assert [m["id"] for m in page["memories"]] == ["m1"]
    assert page["next"] is None
    assert home.ok("memory", "list", "--limit", "5")["next"] is None


def test_list_limit_bounds(home: Home) -> None:
    add(home, "x")
    assert listed(home, "--limit", "200") == ["m1"]
    assert listed(home, "--limit", "1") == ["m1"]
    for bad in ("0", "201", "-1"):
        error = fails(home, "memory", "list", f"--limit={bad}", code="invalid_params.range", exit_code=2)
        assert error["data"]["param"] == "limit"
    fails(home, "memory", "list", "--limit", "ten", code="invalid_params.type", exit_code=2)


def test_list_item_shape_and_snippet(home: Home) -> None:
    add(home, "a" + "é" * 200, "user", "--title", "T")
    (item,) = home.ok("memory", "list")["memories"]
    assert set(item) == LIST_KEYS | {"title"}
    assert item["snippet"] == "a" + "é" * 119  # the first 240 bytes, cut at a UTF-8 boundary


def test_list_filters(home: Home) -> None:
    add(home, "one", "project/a", "--kind", "fact", "--tags", "x,y")
    add(home, "two", "project/b", "--kind", "decision", "--tags", "x")
    add(home, "three", "user", "--kind", "fact", "--tags", "y")
    assert listed(home, "--kinds", "fact") == ["m3", "m1"]
    assert listed(home, "--kinds", "fact,decision") == ["m3", "m2", "m1"]
    assert listed(home, "--tags", "x") == ["m2", "m1"]
    assert listed(home, "--tags", "x,y") == ["m1"]
    assert listed(home, "--tags", '["y","x"]') == ["m1"]
    assert listed(home, "--spaces", "project/a,project/b") == ["m2", "m1"]
    assert listed(home, "--spaces", "project/a", "--kinds", "decision") == []
    assert listed(home, "--status", "draft") == []
    assert listed(home, "--status", "archived") == []
    assert listed(home, "--status", "active") == ["m3", "m2", "m1"]
    fails(home, "memory", "list", "--status", "gone", code="invalid_params.range", exit_code=2)
    fails(home, "memory", "list", "--kinds", "fact,bogus", code="invalid_params.range", exit_code=2)


def test_list_include_deleted_shows_the_deleted_stamp(home: Home) -> None:
    add(home, "kept")
    add(home, "gone")
    stamp = home.ok("memory", "delete", "--id", "m2", "--revision", "1")["deleted"]
    assert listed(home) == ["m1"]
    items = home.ok("memory", "list", "--include-deleted")["memories"]
    assert [m["id"] for m in items] == ["m2", "m1"]
    assert items[0]["deleted"] == stamp
    assert "deleted" not in items[1]
    assert listed(home, "--include-deleted=false") == ["m1"]
    assert listed(home, "--include-deleted", "true") == ["m2", "m1"]


# memory search


def test_search_result_shape(home: Home) -> None:
    add(home, "api pins Zig with .zigversion", "project/api", "--kind", "fact", "--title", "Zig pin", "--tags",
        "zig,build")  # fmt: skip
    result = home.ok("memory", "search", "--query", "which zig version", "--spaces", "project/api", "--limit", "3")
    assert set(result) == {"mode", "results"}
    assert result["mode"] == "fts"
    (hit,) = result["results"]
    assert set(hit) == LIST_KEYS | {"title", "score", "fts_rank"}
    assert (hit["id"], hit["space"], hit["kind"], hit["title"]) == ("m1", "project/api", "fact", "Zig pin")
    assert hit["tags"] == ["zig", "build"]
    assert hit["author"] == OWNER
    assert hit["snippet"] == "api pins Zig with .zigversion"
    assert hit["score"] == pytest.approx(1 / 61)
    assert hit["fts_rank"] == 1


def test_search_order_weights_and_ties(home: Home) -> None:
    add(home, "alpha beta", "user", "--title", "zebra")
    add(home, "alpha gamma", "user", "--tags", "zebra")
    add(home, "zebra alpha delta")
    add(home, "zebra kappa delta")
    hits = home.ok("memory", "search", "--query", "zebra")["results"]
    assert [h["id"] for h in hits] == ["m1", "m2", "m4", "m3"]
    assert [h["fts_rank"] for h in hits] == [1, 2, 3, 4]
    assert [h["score"] for h in hits] == pytest.approx([1 / 61, 1 / 62, 1 / 63, 1 / 64])


def test_search_filters_and_limit(home: Home) -> None:
    add(home, "zebra one", "project/a", "--kind", "fact", "--tags", "x")
    add(home, "zebra two", "project/b", "--kind", "lesson", "--tags", "x,y")
    add(home, "zebra three", "user", "--kind", "fact")
    assert sorted(found(home, "zebra", "--spaces", "project/a,project/b")) == ["m1", "m2"]
    assert sorted(found(home, "zebra", "--kinds", "fact")) == ["m1", "m3"]
    assert found(home, "zebra", "--tags", "x,y") == ["m2"]
    assert len(found(home, "zebra", "--limit", "2")) == 2
    fails(home, "memory", "search", "--query", "zebra", "--limit", "101", code="invalid_params.range", exit_code=2)
    fails(home, "memory", "search", "--query", "zebra", "--kinds", "rumour", code="invalid_params.range", exit_code=2)
    fails(home, "memory", "search", "--query", "zebra", "--spaces", "Bad Space", code="invalid_params.space",
          exit_code=2)  # fmt: skip


# memory forget / purge


def test_forget_dry_run_then_real_run(home: Home) -> None:
    add(home, "scratch one", "agent/scratch")
    add(home, "scratch two", "agent/scratch", "--kind", "task")
    add(home, "keep me", "user")
    home.ok("memory", "update", "--id", "m2", "--revision", "1", "--content", "scratch two b")
    before = status(home)
    dry = home.ok("memory", "forget", "--spaces", "agent/scratch", "--dry-run")
    assert set(dry) == {"deleted", "failed", "next"} and dry["next"] is None
    assert sorted((d["id"], d["revision"]) for d in dry["deleted"]) == [("m1", 1), ("m2", 2)]
    assert dry["failed"] == []
    assert status(home) == before
    assert home.ok("memory", "get", "--id", "m1")["revision"] == 1
    real = home.ok("memory", "forget", "--spaces", "agent/scratch")
    assert sorted((d["id"], d["revision"]) for d in real["deleted"]) == [("m1", 2), ("m2", 3)]
    assert real["failed"] == []
    fails(home, "memory", "get", "--id", "m1", code="not_found.memory", exit_code=3)
    fails(home, "memory", "get", "--id", "m2", code="not_found.memory", exit_code=3)
    assert listed(home) == ["m3"]
    assert home.ok("memory", "forget", "--spaces", "agent/scratch") == {"deleted": [], "failed": [], "next": None}


def test_forget_filters_by_kind_and_time(home: Home) -> None:
    add(home, "a task", "agent/x", "--kind", "task")
    add(home, "a note", "agent/x")
    assert home.ok("memory", "forget", "--spaces", "agent/x", "--before", "2000-01-01T00:00:00Z")["deleted"] == []
    result = home.ok("memory", "forget", "--spaces", "agent/x", "--kinds", "task", "--before", "2999-01-01T00:00:00Z")
    assert [d["id"] for d in result["deleted"]] == ["m1"]
    assert listed(home) == ["m2"]
    fails(home, "memory", "forget", "--kinds", "task", code="invalid_params.missing", exit_code=2)


def test_purge_erases_for_good(home: Home) -> None:
    add(home, "zebra secret-ish text")
    add(home, "other")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "zebra second text")
    assert home.ok("memory", "purge", "--id", "m1") == {"id": "m1"}
    fails(home, "memory", "get", "--id", "m1", code="not_found.memory", exit_code=3)
    result = home.cli("memory", "get", "--id", "m1", "--include-deleted", "--json")
    assert (result.code, result.json["error"]["code"]) == (3, "not_found.memory")
    fails(home, "memory", "history", "--id", "m1", code="not_found.memory", exit_code=3)
    assert found(home, "zebra") == []
    counts = status(home)
    assert (counts["memories"], counts["deleted"], counts["versions"]) == (1, 0, 1)
    assert add(home, "zebra second text")["id"] == "m3"  # ids are never reused
    fails(home, "memory", "purge", "--id", "m1", code="not_found.memory", exit_code=3)


def test_purge_of_a_soft_deleted_memory(home: Home) -> None:
    add(home, "x")
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert home.ok("memory", "purge", "--id", "m1") == {"id": "m1"}
    assert status(home)["deleted"] == 0


def test_purge_needs_admin(home: Home) -> None:
    add(home, "x")
    error = fails(home, "memory", "purge", "--id", "m1", code="denied.admin", exit_code=4, token=None)
    assert error["data"]["principal"] == "unknown"
    assert error["data"]["fix"]
    assert home.ok("memory", "get", "--id", "m1")["content"] == "x"


# space list / store status / whoami


def test_space_list_sorted_with_live_counts(home: Home) -> None:
    add(home, "z1", "zeta")
    add(home, "a1", "alpha/x")
    add(home, "a2", "alpha/x")
    add(home, "b1", "beta")
    add(home, "g1", "gone")
    add(home, "a3", "alpha/x")
    home.ok("memory", "delete", "--id", "m5", "--revision", "1")
    home.ok("memory", "delete", "--id", "m6", "--revision", "1")
    spaces = home.ok("space", "list")["spaces"]
    assert [(s["space"], s["memories"]) for s in spaces] == [("alpha/x", 2), ("beta", 1), ("zeta", 1)]
    assert all(set(s) == {"space", "memories", "updated"} for s in spaces)
    assert spaces[0]["updated"] == home.ok("memory", "get", "--id", "m3")["updated"]
    assert home.ok("space", "list", token=None) == {"spaces": spaces, "next": None}


def test_store_status_fields_and_counts(home: Home) -> None:
    add(home, "one")
    add(home, "two")
    home.ok("memory", "delete", "--id", "m2", "--revision", "1")
    result = status(home)
    assert set(result) == {"path", "schema_version", "sqlite_version", "bytes", "memories", "drafts", "archived",
                           "deleted", "versions", "sessions", "vectors", "pending", "embeddings"}  # fmt: skip
    if home.store_url:  # a team store (D156): its URL, its own schema version, the server's name
        from hivemem.store.postgres import schema

        assert result["path"] == home.store_url and result["schema_version"] == schema.VERSION
        assert result["sqlite_version"].startswith("PostgreSQL ")
    else:
        assert os.path.samefile(result["path"], home.paths.store)
        assert result["schema_version"] == 3
        version = tuple(int(x) for x in result["sqlite_version"].split("."))
        assert version >= (3, 42, 0)
    assert result["bytes"] > 0
    assert (result["memories"], result["drafts"], result["archived"], result["deleted"]) == (1, 0, 0, 1)
    assert result["versions"] == 3
    assert (result["sessions"], result["vectors"], result["pending"], result["embeddings"]) == (0, 0, 0, "off")


def test_whoami_owner_and_unknown(home: Home) -> None:
    owner = home.ok("whoami")
    assert (owner["principal"], owner["label"]) == ("owner", "owner")
    assert {g["right"] for g in owner["grants"]} == {"read", "write", "admin"}
    assert home.ok("whoami", token=None) == {"principal": "unknown", "grants": [{"right": "read", "scope": "*"}]}
    home.stop_daemon()
    home.config("[grants]\nunknown = []\n")
    assert home.ok("whoami", token=None) == {"principal": "unknown", "grants": []}


# ping / stop


def test_ping_never_starts_the_daemon(home: Home) -> None:
    result = home.cli("ping", "--json")
    assert result.code == 6
    assert result.json["error"]["code"] == "unavailable.not_running"
    assert home.daemon_pid() is None
    home.ok("whoami")
    assert home.cli("ping").code == 0
    pong = home.ok("ping")
    assert pong["version"] == __version__


def test_stop_stops_and_the_next_call_starts_a_new_daemon(home: Home) -> None:
    add(home, "survives")
    first = home.daemon_pid()
    assert first is not None
    assert home.ok("stop", token=None) == {"stopping": True}  # a signal as this user: no owner key needed
    assert wait_for(lambda: home.daemon_pid() is None, 10)
    assert home.cli("ping").code == 6
    assert home.cli("stop", "--json").code == 0  # nothing to stop is not an error
    assert home.daemon_pid() is None
    assert home.ok("memory", "get", "--id", "m1")["content"] == "survives"
    assert home.daemon_pid() not in (None, first)


# CLI conventions: stdin, arrays, placeholders, denial, human output


def test_dash_reads_stdin_with_one_trailing_newline_removed(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "-", stdin="line one\nline two\n\n")
    assert home.ok("memory", "get", "--id", "m1")["content"] == "line one\nline two\n"
    home.ok("memory", "add", "--space", "user", "--content", "-", stdin="no newline")
    assert home.ok("memory", "get", "--id", "m2")["content"] == "no newline"
    home.ok("memory", "add", "--space", "user", "--content", "x", "--title", "-", stdin="From stdin\n")
    assert home.ok("memory", "get", "--id", "m3")["title"] == "From stdin"
    home.ok("memory", "add", "--space", "user", "--content", "-", stdin="ünï ✓\n".encode())
    assert home.ok("memory", "get", "--id", "m4")["content"] == "ünï ✓"


def test_comma_lists_and_json_arrays_are_equivalent(home: Home) -> None:
    add(home, "one", "user", "--tags", "b,a, c")
    add(home, "two", "user", "--tags", '["b","a","c"]')
    assert home.ok("memory", "get", "--id", "m1")["tags"] == ["b", "a", "c"]
    assert home.ok("memory", "get", "--id", "m2")["tags"] == ["b", "a", "c"]
    fails(home, "memory", "add", "--space", "user", "--content", "x", "--tags", "[broken", code="invalid_params.type",
          exit_code=2)  # fmt: skip


def test_object_and_array_params_from_a_file(home: Home) -> None:
    path = os.path.join(home.base, "prov.json")
    with open(path, "w") as f:
        f.write('{"kind": "cli", "action": "remember"}')
    tags = os.path.join(home.base, "tags.json")
    with open(tags, "w") as f:
        f.write('["from-file"]')
    add(home, "x", "user", "--provenance", f"@{path}", "--tags", f"@{tags}")
    memory = home.ok("memory", "get", "--id", "m1")
    assert memory["provenance"] == {"kind": "cli", "action": "remember"}
    assert memory["tags"] == ["from-file"]


@pytest.mark.parametrize(
    ("directory", "space"),
    [("My Repo!", "project/my-repo-"), ("__Hidden  Name", "project/hidden-name"), ("api.v2_x", "project/api.v2_x")],
)
def test_at_project_uses_the_working_directory_name(home: Home, directory: str, space: str) -> None:
    cwd = os.path.join(home.base, "work", directory)
    os.makedirs(cwd)
    home.ok("memory", "add", "--space", "@project", "--content", "here", cwd=cwd)
    assert home.ok("memory", "get", "--id", "m1")["space"] == space
    assert listed_in(home, cwd, "--spaces", "@project") == ["m1"]
    assert home.ok("memory", "search", "--query", "here", "--spaces", "@project,@user", cwd=cwd)["results"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_at_project_uses_the_git_top_level(home: Home) -> None:
    top = os.path.join(home.base, "Top Proj")
    deep = os.path.join(top, "src", "Deep Dir")
    os.makedirs(deep)
    subprocess.run(["git", "init", "-q", top], check=True, capture_output=True)
    home.ok("memory", "add", "--space", "@project", "--content", "from deep", cwd=deep)
    assert home.ok("memory", "get", "--id", "m1")["space"] == "project/top-proj"


def test_at_user_is_user(home: Home) -> None:
    home.ok("memory", "add", "--space", "@user", "--content", "mine")
    assert home.ok("memory", "get", "--id", "m1")["space"] == "user"


def test_unknown_cannot_write(home: Home) -> None:
    add(home, "existing")
    before = status(home)
    error = fails(home, "memory", "add", "--space", "user", "--content", "sneaky", code="denied.write", exit_code=4,
                  token=None)  # fmt: skip
    assert error["data"]["right"] == "write"
    assert error["data"]["resource"] == "space:user"
    assert error["data"]["principal"] == "unknown"
    assert "HIVEMEM_TOKEN" in error["data"]["fix"]
    fails(home, "memory", "update", "--id", "m1", "--revision", "1", "--content", "changed", code="denied.write",
          exit_code=4, token=None)  # fmt: skip
    fails(home, "memory", "delete", "--id", "m1", "--revision", "1", code="denied.write", exit_code=4, token=None)
    fails(home, "memory", "forget", "--spaces", "user", code="denied.write", exit_code=4, token=None)
    assert status(home) == before
    assert home.ok("memory", "get", "--id", "m1", token=None)["content"] == "existing"
    assert listed(home, token=None) == ["m1"]


def test_human_output_is_readable(home: Home) -> None:
    added = home.cli("memory", "add", "--space", "user", "--title", "Zig pin", "--content", "api pins zig")
    assert added.code == 0, added
    assert "m1" in added.out
    assert not added.out.lstrip().startswith("{")
    listing = home.cli("memory", "list")
    assert listing.code == 0
    assert "m1" in listing.out and "Zig pin" in listing.out and "user" in listing.out
    search = home.cli("memory", "search", "--query", "zig")
    assert search.code == 0
    assert "m1" in search.out and "fts" in search.out
    history = home.cli("memory", "history", "--id", "m1")
    assert history.code == 0 and "add" in history.out
    assert "schema_version" in home.cli("store", "status").out


@pytest.mark.parametrize(
    ("args", "exit_code", "code"),
    [
        (("memory", "get", "--id", "m404"), 3, "not_found.memory"),
        (("memory", "get"), 2, "invalid_params.missing"),
        (("memory", "get", "--id", "m1", "--bogus", "1"), 2, "invalid_params.unknown"),
        (("memory", "nonsense"), 2, "invalid_params.usage"),
        (("memory", "purge", "--id", "m1"), 4, "denied.admin"),
    ],
)
def test_human_errors_go_to_stderr_with_nonzero_exit(home: Home, args: tuple[str, ...], exit_code: int,
                                                     code: str) -> None:  # fmt: skip
    add(home, "x")
    token = None if code == "denied.admin" else "@owner"
    result: Result = home.cli(*args, token=token)
    assert result.code == exit_code, result
    assert result.out == ""
    assert code in result.err


def test_values_may_start_with_a_dash(home: Home) -> None:
    added = home.ok("memory", "add", "--space", "user", "--content", "-zebra leads with a dash", "--title", "-WIP")
    assert home.ok("memory", "get", "--id", added["id"])["title"] == "-WIP"
    hits = home.ok("memory", "search", "--query", "-zebra")["results"]
    assert [h["id"] for h in hits] == [added["id"]]


def test_help_lists_every_command_once_and_never_starts_the_daemon(home: Home) -> None:
    from hivemem.cli.reference import command
    from hivemem.manifest import VERBS

    result = home.cli("--help")
    assert result.code == 0
    listed = [line.split("  ")[1].strip() for line in result.out.splitlines() if line.startswith("  ")]
    assert len(listed) == len(set(listed))
    for verb in VERBS:
        assert command(verb).removeprefix("hivemem ") in listed, verb.name
    assert "store restore" in listed, "a group's command that is not a verb is listed too"
    for group in ("store", "memory", "client", "session"):  # every command each group's own help lists
        group_help = home.cli(group, "--help").out.split("commands:")[1]
        for name in [line.split()[0] for line in group_help.splitlines() if line.startswith("  ")]:
            assert f"{group} {name}" in listed, (group, name)
    detail = home.cli("memory", "add", "--help")
    assert detail.code == 0 and "--content" in detail.out and "--space" in detail.out
    assert home.daemon_pid() is None and not os.path.exists(home.paths.store)


def test_a_request_over_the_frame_is_refused_by_the_client_and_the_connection_kept(home: Home) -> None:
    """Each param fits its own bound, their sum does not: the client refuses the line (docs/decisions.md D349)."""
    from hivemem.protocol import MAX_FRAME

    path = os.path.join(home.base, "provenance.json")
    with open(path, "w") as f:
        f.write('{"kind": "cli", "reason": "' + "r" * (MAX_FRAME - 64) + '"}')
    assert os.path.getsize(path) <= MAX_FRAME  # the file alone is within its bound
    add(home, "before")
    error = fails(home, "memory", "add", "--space", "user", "--content", "c" * 1000, "--provenance", f"@{path}",
                  code="invalid_params.frame", exit_code=2)  # fmt: skip
    assert error["data"] == {"max_bytes": MAX_FRAME}
    assert error["message"] == f"a request is limited to {MAX_FRAME} bytes"  # the client's words, not the daemon's
    assert status(home)["memories"] == 1
