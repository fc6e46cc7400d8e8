"""SPEC statements that a reading of the text checks directly: shapes, codes and defaults at the edges."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from typing import Any

import apsw
import pytest

from conftest import Home
from hivemem.errors import HivememError
from hivemem.store.sqlite import fts_index
from hivemem.store.sqlite.db import connect


def error(home: Home, *args: str, token: str | None = "@owner", cwd: str | None = None) -> tuple[int, dict[str, Any]]:
    result = home.cli(*args, "--json", token=token, cwd=cwd)
    return result.code, result.json["error"]


def test_not_found_matches_the_wire_transcript(home: Home) -> None:
    """docs/protocol.md: {"code":"not_found.memory","message":"m999 not found","data":{}}."""
    home.ok("memory", "add", "--space", "user", "--content", "x")
    code, err = error(home, "memory", "get", "--id", "m999")
    assert (code, err) == (3, {"code": "not_found.memory", "message": "m999 not found", "data": {}})


def test_an_unknown_cli_flag_is_an_unknown_param(home: Home) -> None:
    code, err = error(home, "memory", "add", "--space", "user", "--content", "x", "--bogus-flag", "1")
    assert code == 2
    assert err["code"] == "invalid_params.unknown"
    assert err["data"] == {"param": "bogus_flag"}
    assert home.ok("store", "status")["memories"] == 0


def test_integers_past_sqlite_range_are_range_errors(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "x")
    client = home.client()
    try:
        for verb, params in (("memory.get", {"id": "m1", "revision": 10**23}), ("events.list", {"after": 10**23})):
            with pytest.raises(HivememError) as caught:
                client.call(verb, **params)
            assert caught.value.code == "invalid_params.range"
            assert None not in caught.value.data.values()  # absent members are omitted, never null
        assert client.call("memory.get", id="m1")["content"] == "x"
    finally:
        client.close()


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_times_that_leave_the_calendar_are_type_errors(home: Home, when: str) -> None:
    code, err = error(home, "memory", "add", "--space", "user", "--content", "x", "--review-after", when)
    assert (code, err["code"], err["data"]["param"]) == (2, "invalid_params.type", "review_after")
    code, err = error(home, "memory", "forget", "--spaces", "user", "--before", when)
    assert (code, err["code"]) == (2, "invalid_params.type")


def test_cli_recall_defaults_to_the_fixed_read_path(home: Home) -> None:
    repo = os.path.join(home.base, "Billing API")
    os.makedirs(repo)
    subprocess.run(["git", "init", "-q", repo], check=True)
    home.ok(
        "memory",
        "add",
        "--space",
        "project/billing-api",
        "--kind",
        "convention",
        "--content",
        "Deploys run make release",
    )
    home.ok("memory", "add", "--space", "user", "--kind", "preference", "--content", "Prefers release notes short")
    home.ok("memory", "add", "--space", "project/other", "--content", "Other project release train")
    recalled = home.ok("memory", "recall", "--query", "release", cwd=repo)
    lines = [json.loads(line) for line in recalled["text"].splitlines()[2:-1]]
    assert [r["space"] for r in lines] == ["project/billing-api", "user"]
    assert recalled["count"] == 2


def test_store_status_needs_a_read_right_and_whoami_none(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "x")
    home.ok("config", "set", "--key", "grants.unknown", "--value", "[]")
    code, err = error(home, "store", "status", token=None)
    assert (code, err["code"]) == (4, "denied.read")
    assert home.ok("whoami", token=None) == {"principal": "unknown", "grants": []}


def test_a_repeated_session_start_ignores_other_params(home: Home) -> None:
    first = home.ok("session", "start", "--harness", "codex", "--harness-session", "abc")
    again = home.ok("session", "start", "--harness", "codex", "--harness-session", "abc", "--parent", "s99",
                    "--relation", "fork")  # fmt: skip
    assert again == {"session": first["session"], "changed": False}


def test_a_session_never_names_a_parent_its_reader_cannot_read(home: Home) -> None:
    parent = home.ok("session", "start", "--harness", "owner-tool")["session"]
    grants = json.dumps([{"right": "write", "scope": "session:*"}])
    token = home.ok("client", "add", "--name", "codex", "--grants", grants)["token"]
    code, _ = error(home, "session", "start", "--harness", "codex", "--parent", parent, "--relation", "continue",
                    token=token)  # fmt: skip
    assert code == 3  # the client cannot read the owner's session, so it does not exist for it
    child = home.ok("session", "start", "--harness", "codex", "--parent", parent, "--relation", "continue")["session"]
    home.ok("client", "remove", "--name", "codex")
    grants = json.dumps([{"right": "read", "scope": f"session:{child}"}])
    token = home.ok("client", "add", "--name", "reader", "--grants", grants)["token"]
    seen = home.ok("session", "get", "--session", child, token=token)
    assert "parent" not in seen and seen["relation"] == "continue"
    chain = home.ok("session", "chain", "--session", child, token=token)
    assert chain["truncated"] is True
    assert [s["session"] for s in chain["chain"]] == [child]
    assert parent not in json.dumps(chain)
    assert home.ok("session", "get", "--session", child)["parent"] == parent  # the owner sees it


def test_a_nul_separates_query_tokens(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "zig pins the api")
    client = home.client()
    try:
        hits = client.call("memory.search", query="zig\x00api")["results"]
        assert [h["id"] for h in hits] == ["m1"]
    finally:
        client.close()


def test_restoring_a_deleted_draft_keeps_it_a_draft(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "a draft thought")
    home.stop_daemon()
    conn = connect(home.paths.store)  # no verb makes drafts yet; capture will leave exactly this row
    fts_index.remove(conn, 1)  # while the row is still active: the index reads what to remove from it
    conn.execute("UPDATE memories SET status = 'draft' WHERE id = 1")
    conn.close()
    home.ok("memory", "delete", "--id", "m1", "--revision", "1")
    assert home.ok("memory", "restore", "--id", "m1") == {"id": "m1", "revision": 3}
    assert home.ok("memory", "get", "--id", "m1")["status"] == "draft"
    assert home.ok("memory", "search", "--query", "draft thought")["results"] == []


def test_the_hash_chain_verifies_from_the_rows_alone(home: Home) -> None:
    """docs/governance.md, recomputed here from the formula and the stored columns, not with hivemem's code."""
    home.ok("memory", "add", "--space", "user", "--content", "one")
    home.ok("memory", "update", "--id", "m1", "--revision", "1", "--content", "two")
    home.ok("session", "start", "--harness", "codex")
    home.stop_daemon()
    conn = apsw.Connection(home.paths.store, flags=apsw.SQLITE_OPEN_READONLY)
    rows: list[tuple[Any, ...]] = conn.execute(
        "SELECT id, ts, type, principal, label, space, memory, session, revision, data, chain FROM events ORDER BY id"
    ).fetchall()
    conn.close()
    keys = ("id", "ts", "type", "principal", "label", "space", "memory", "session", "revision", "data")
    previous = bytes(32)
    for row in rows:
        event = dict(zip(keys, row[:10], strict=True))
        event["data"] = json.loads(event["data"])
        canonical = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        previous = hashlib.sha256(previous + canonical).digest()
        assert previous == bytes(row[10]), f"event {row[0]}"
    assert len(rows) == 3


def test_config_set_works_on_a_fresh_home(home: Home) -> None:
    assert not os.path.exists(home.paths.store)
    assert home.ok("config", "set", "--key", "daemon.startup", "--value", "explicit") == {
        "key": "daemon.startup",
        "value": "explicit",
    }
    code, err = error(home, "memory", "list")
    assert (code, err["code"], err["data"]["fix"]) == (6, "unavailable.not_running", "hivemem serve")
    assert home.daemon_pid() is None


def test_tombstones_are_removed_at_daemon_start_after_tombstone_days(home: Home) -> None:
    """docs/memories.md: tombstones and their versions are removed after memory.tombstone_days, at daemon start."""
    home.ok("memory", "add", "--space", "user", "--content", "kept")
    home.ok("memory", "add", "--space", "user", "--content", "tombstoned")
    home.ok("memory", "delete", "--id", "m2", "--revision", "1")
    home.stop_daemon()
    assert home.ok("memory", "get", "--id", "m2", "--include-deleted")["deleted"]  # default 30 days: still there
    home.stop_daemon()
    home.config("[memory]\ntombstone_days = 0\n")
    assert home.ok("store", "status")["deleted"] == 0
    code, err = error(home, "memory", "get", "--id", "m2", "--include-deleted")
    assert (code, err["code"]) == (3, "not_found.memory")
    assert home.ok("memory", "get", "--id", "m1")["content"] == "kept"
    assert home.ok("store", "status")["versions"] == 1
    assert [e["type"] for e in home.ok("events", "list", "--types", "memory.deleted")["events"]] == ["memory.deleted"]
