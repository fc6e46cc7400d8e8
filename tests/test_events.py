"""The audit log (docs/governance.md, D26): `hivemem events` output, visibility per principal, filters,
`--follow` streaming, and the tamper-evident hash chain."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import apsw
import pytest

from conftest import Home, client_token, wait_for
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store.sqlite import db
from hivemem.store.sqlite.audit import verify_chain

KEYS = {"id", "ts", "type", "principal", "label", "space", "memory", "session", "revision", "data"}
REQUIRED = {"id", "ts", "type", "principal", "data"}


def events(home: Home, *args: str, token: str | None = "@owner") -> list[dict[str, Any]]:
    """`hivemem events --json ARGS`: one JSON object per line."""
    result = home.cli("events", *args, "--json", token=token)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert all(line.strip() for line in lines), result.out
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(e, dict) for e in parsed)
    return parsed


def test_events_print_one_object_per_line_without_text(home: Home, owner: DaemonClient) -> None:
    content_marker, query_marker = "zqxcontentmarker", "zqxquerymarker"
    session = owner.call("session.start", harness="codex")["session"]
    token = client_token(owner, "codex", [("read", "*"), ("write", "*")])
    first = owner.call("memory.add", space="user", content=f"secret text {content_marker} one", session=session)
    owner.call("memory.update", id=first["id"], revision=1, content=f"changed {content_marker} two", title="a title")
    owner.call("memory.add", space="project/api", content=f"another {content_marker}")
    hits = owner.call("memory.search", query=f"{query_marker} {content_marker}", record_usage=True)["results"]
    assert len(hits) == 2
    owner.call("memory.delete", id=first["id"], revision=2)
    owner.call("session.end", session=session)
    owner.call("client.remove", name="codex")
    assert token
    printed = events(home)
    assert [e["id"] for e in printed] == sorted(e["id"] for e in printed)  # oldest first (D26)
    assert [e["type"] for e in printed] == ["session.started", "client.added", "memory.added", "memory.updated",
                                            "memory.added", "memory.recalled", "memory.recalled", "memory.deleted",
                                            "session.ended", "client.removed"]  # fmt: skip
    for event in printed:
        assert REQUIRED <= set(event) <= KEYS, event
        assert None not in event.values(), event
        assert isinstance(event["data"], dict)
    added = printed[2]
    assert (added["space"], added["memory"], added["session"], added["revision"]) == ("user", first["id"], session, 1)
    assert (added["principal"], added["label"]) == ("owner", "owner")
    recalled = printed[5]
    assert set(recalled["data"]) == {"query_sha256", "hash", "score", "space"}
    for args in ((), ("--limit", "1000")):
        for json_flag in ("--json", None):
            result = home.cli("events", *args, *([json_flag] if json_flag else []))
            assert result.code == 0
            for text in (content_marker, query_marker, "secret text", "a title"):
                assert text not in result.out and text not in result.err, text
    header, *human = home.cli("events").out.splitlines()
    assert header.split()[:4] == ["ID", "TIME", "TYPE", "BY"] and len(human) == len(printed)
    assert "memory.added" in human[2] and first["id"] in human[2]


def test_client_events_are_for_the_owner_only(home: Home, owner: DaemonClient) -> None:
    reader = client_token(owner, "reader", [("read", "*")])
    client_token(owner, "other", [("read", "space:user")])
    owner.call("client.remove", name="other")
    owner.call("memory.add", space="user", content="a visible change")
    assert [e["type"] for e in events(home)] == ["client.added", "client.added", "client.removed", "memory.added"]
    for token in (reader, None):
        assert [e["type"] for e in events(home, token=token)] == ["memory.added"]
        assert events(home, "--types", "client.added", token=token) == []
    client = home.client(reader)
    try:
        assert [e["type"] for e in client.call("events.list")["events"]] == ["memory.added"]
    finally:
        client.close()


def test_a_client_sees_only_events_it_can_read(home: Home, owner: DaemonClient) -> None:
    token = client_token(owner, "a-reader", [("read", "space:a"), ("write", "space:a"), ("write", "session:*")])
    hidden_session = owner.call("session.start", harness="codex")["session"]
    mine = home.client(token)
    try:
        own_session = mine.call("session.start", harness="mine")["session"]
    finally:
        mine.close()
    for space in ("a", "b", "a", "b"):
        owner.call("memory.add", space=space, content=f"event in {space} {time.monotonic_ns()}")
    seen = events(home, token=token)
    assert {e.get("space") for e in seen if "space" in e} == {"a"}
    assert [e["type"] for e in seen] == ["session.started", "memory.added", "memory.added"]
    assert seen[0]["session"] == own_session
    assert hidden_session not in json.dumps(seen)
    result = home.cli("events", "--spaces", "b", "--json", token=token)
    assert result.code == 4, result
    error = result.json["error"]
    assert (error["code"], error["data"]["resource"]) == ("denied.read", "space:b")


def test_types_and_spaces_filter(home: Home, owner: DaemonClient) -> None:
    made = [owner.call("memory.add", space=s, content=f"filter {i}")["id"] for i, s in enumerate(("a", "b", "a", "c"))]
    owner.call("memory.delete", id=made[0], revision=1)
    owner.call("memory.update", id=made[1], revision=1, content="filter changed")
    only_added = events(home, "--types", "memory.added")
    assert [e["memory"] for e in only_added] == made
    two = events(home, "--types", "memory.deleted,memory.updated")
    assert [(e["type"], e["memory"]) for e in two] == [("memory.deleted", made[0]), ("memory.updated", made[1])]
    in_a = events(home, "--spaces", "a")
    assert [(e["type"], e["memory"]) for e in in_a] == [("memory.added", made[0]), ("memory.added", made[2]),
                                                        ("memory.deleted", made[0])]  # fmt: skip
    both = events(home, "--spaces", "a,c", "--types", "memory.added")
    assert [e["memory"] for e in both] == [made[0], made[2], made[3]]
    assert events(home, "--spaces", "nowhere") == []
    assert [e["id"] for e in events(home, "--limit", "2")] == [e["id"] for e in events(home)][-2:]
    result = home.cli("events", "--types", "Not A Type", "--json")
    assert result.code == 2, result


class Lines:
    """Lines of a subprocess's stdout, read with a deadline (select), never by sleeping."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""

    def next(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


def test_follow_streams_new_events_and_keeps_the_daemon_up(home: Home) -> None:
    home.config("[daemon]\nidle_timeout_ms = 1000\n")
    home.ok("whoami")
    setup = home.client()
    try:
        token = client_token(setup, "follower", [("read", "space:a")])
        before = setup.call("memory.add", space="a", content="before the follower")
    finally:
        setup.close()
    env = dict(home.env, HIVEMEM_TOKEN=token)
    proc = subprocess.Popen([sys.executable, "-m", "hivemem", "events", "--follow", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=home.base)  # fmt: skip
    lines = Lines(proc)
    writer = home.client()
    try:
        # the follower starts after the newest event: probe until its first line arrives
        first: str | None = None
        probes = 0
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            writer.call("memory.add", space="a", content=f"probe {probes}")
            probes += 1
            first = lines.next(0.2)
        assert first is not None, "the follower printed nothing"
        streamed = [json.loads(first)]
        made = [writer.call("memory.add", space=s, content=f"streamed {s} {i}")["id"]
                for i, s in enumerate(("a", "b", "a", "b", "a"))]  # fmt: skip
        while streamed[-1].get("memory") != made[-1]:
            line = lines.next(10)
            assert line is not None, streamed
            streamed.append(json.loads(line))
        assert all(e["type"] == "memory.added" and e["space"] == "a" for e in streamed), streamed
        assert [e["memory"] for e in streamed[-3:]] == [made[0], made[2], made[4]]
        assert before["id"] not in {e["memory"] for e in streamed}
        assert [e["id"] for e in streamed] == sorted({e["id"] for e in streamed})
        for event in streamed:
            assert REQUIRED <= set(event) <= KEYS
    finally:
        writer.close()
    try:
        pid = home.daemon_pid()
        assert pid is not None
        # idle timeout is 1 s, but a follower is connected: the daemon must stay up
        assert not wait_for(lambda: home.daemon_pid() is None, 2.0)
        assert home.daemon_pid() == pid
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert wait_for(lambda: home.daemon_pid() is None, 15)


@pytest.mark.parametrize("command", [["events", "follow"], ["events", "--follow"]])
def test_both_follow_commands_stream(home: Home, command: list[str]) -> None:
    """`hivemem events follow` (generated from the manifest) streams exactly like `hivemem events --follow`."""
    first = home.ok("memory", "add", "--space", "a", "--content", "written before the follower")["id"]
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    proc = subprocess.Popen([sys.executable, "-m", "hivemem", *command, "--after", "0", "--spaces", "a", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=home.base)  # fmt: skip
    lines = Lines(proc)
    try:
        line = lines.next(30)
        assert line is not None, "the follower printed nothing"
        assert json.loads(line)["memory"] == first, line  # the stream, not the {"following": true} acknowledgement
        later = home.ok("memory", "add", "--space", "a", "--content", "written while it follows")["id"]
        line = lines.next(30)
        assert line is not None and json.loads(line)["memory"] == later, line
        assert json.loads(line)["type"] == "memory.added"
        assert proc.poll() is None, "a follower runs until it is interrupted"
    finally:
        proc.terminate()
        proc.wait(10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()


def test_follow_of_an_unreadable_space_is_denied(home: Home, owner: DaemonClient) -> None:
    token = client_token(owner, "a-reader", [("read", "space:a")])
    result = home.cli("events", "--follow", "--spaces", "b", "--json", token=token)
    assert result.code == 4, result
    assert result.json["error"]["code"] == "denied.read"


def store_connection(home: Home, flags: int) -> db.Connection:
    return db.Connection(home.paths.store, flags=flags)


@pytest.mark.sqlite_only  # edits the store file; tests/test_postgres.py edits the team store
def test_hash_chain_verifies_and_an_edited_event_breaks_it(home: Home, owner: DaemonClient) -> None:
    session = owner.call("session.start", harness="codex")["session"]
    client_token(owner, "codex", [("read", "*")])
    memory = owner.call("memory.add", space="user", content="chained", session=session)["id"]
    owner.call("memory.update", id=memory, revision=1, content="chained twice")
    owner.call("memory.search", query="chained", record_usage=True)
    owner.call("memory.delete", id=memory, revision=2)
    owner.close()
    home.stop_daemon()
    assert home.daemon_pid() is None
    reader = store_connection(home, apsw.SQLITE_OPEN_READONLY)
    try:
        assert verify_chain(reader) is None
        assert reader.execute("SELECT COUNT(*) FROM events").fetchall()[0][0] == 6
    finally:
        reader.close()
    writer = store_connection(home, apsw.SQLITE_OPEN_READWRITE)
    try:
        writer.execute("""UPDATE events SET data = '{"x":1}' WHERE id = 2""")
    finally:
        writer.close()
    reader = store_connection(home, apsw.SQLITE_OPEN_READONLY)
    try:
        assert verify_chain(reader) == 2
    finally:
        reader.close()


@pytest.mark.sqlite_only  # edits the store file; tests/test_postgres.py edits the team store
def test_hash_chain_detects_a_deleted_event(home: Home, owner: DaemonClient) -> None:
    for i in range(4):
        owner.call("memory.add", space="user", content=f"row {i}")
    owner.close()
    home.stop_daemon()
    writer = store_connection(home, apsw.SQLITE_OPEN_READWRITE)
    try:
        assert verify_chain(writer) is None
        writer.execute("DELETE FROM events WHERE id = 3")
        assert verify_chain(writer) == 4
    finally:
        writer.close()


def test_events_list_needs_no_admin_but_pages_per_row(home: Home, owner: DaemonClient) -> None:
    token = client_token(owner, "a-reader", [("read", "space:a")])
    for i in range(6):
        owner.call("memory.add", space="a" if i % 2 else "b", content=f"paged {i}")
    client = home.client(token)
    try:
        page = client.call("events.list", limit=2)
        assert [e["space"] for e in page["events"]] == ["a", "a"]
        rest = client.call("events.list", limit=2, after=page["next"])
        assert [e["space"] for e in rest["events"]] == ["a"]
        assert rest["next"] is None
        with pytest.raises(HivememError) as caught:
            client.call("events.list", spaces=["b"])
        assert caught.value.code == "denied.read"
    finally:
        client.close()
