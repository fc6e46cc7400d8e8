"""Every reply fits a frame (docs/protocol.md): lists page, and each verb's largest answer stays under 4 MiB."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import apsw
import pytest

from conftest import Home, client_token, fails, isolated_home
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from test_wire import MAX_FRAME, Raw, owner_key

SPACES = 26_000
LONG = "s" * 116  # with `team/NNNNNN-`, a name of 128 bytes: the longest a space may have


def reply_line(raw: Raw, verb: str, params: dict[str, Any]) -> bytes:
    """The raw reply line of one request; the reader accepts lines of any length."""
    raw.next_id += 1
    raw.send({"id": raw.next_id, "verb": verb, "params": params})
    return raw.line()


def bulk_spaces(path: str, count: int) -> None:
    """Copy the one memory already in the store into `count` spaces of 128-byte names, in one transaction.

    Only the `memories` rows that space.list reads are written (26,000 writes through the API take a
    minute on a loaded machine); every column is copied, so the rows are whatever the write path makes.
    """
    db = apsw.Connection(path)
    try:
        columns = [r[1] for r in db.execute("PRAGMA table_info(memories)") if r[1] not in ("id", "space")]
        names = ", ".join(columns)
        with db:
            db.execute(
                "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
                f"INSERT INTO memories(space, {names}) SELECT printf('team/%06d-', i) || ?, {names} "
                "FROM memories, k WHERE memories.id = 1",
                (count, LONG),
            )
    finally:
        db.close()


@pytest.fixture(scope="module")
def crowded() -> Iterator[Home]:
    """A store with 26,001 spaces whose unpaged space.list would be about 4.9 MB."""
    with isolated_home() as home:
        home.ok("memory", "add", "--space", "user", "--content", "the template memory")
        home.stop_daemon()
        bulk_spaces(home.paths.store, SPACES)
        home.ok("whoami")
        yield home


def test_space_list_of_26000_long_names_pages_and_every_page_fits(crowded: Home) -> None:
    raw = Raw(crowded.paths.socket)
    try:
        raw.hello(owner_key(crowded))
        seen: list[str] = []
        total = 0
        after: str | None = None
        while True:
            line = reply_line(raw, "space.list", {"limit": 1000, **({"after": after} if after else {})})
            assert len(line) <= MAX_FRAME
            page = json.loads(line)["ok"]
            total += sum(len(json.dumps(s, separators=(",", ":"))) + 1 for s in page["spaces"])
            seen += [s["space"] for s in page["spaces"]]
            after = page["next"]
            if after is None:
                break
            assert after == seen[-1] and len(page["spaces"]) == 1000
        assert len(seen) == SPACES + 1 and seen == sorted(seen) and len(set(seen)) == len(seen)
        assert total > MAX_FRAME, "the unpaged answer would not fit a frame"
        default = json.loads(reply_line(raw, "space.list", {}))["ok"]
        assert len(default["spaces"]) == 200 and default["next"] == default["spaces"][-1]["space"]
    finally:
        raw.close()
    result = crowded.cli("space", "list", "--json")  # failed.protocol for everyone before paging
    assert result.code == 0 and len(result.json["spaces"]) == 200 and result.json["next"]
    human = crowded.cli("space", "list", "--after", f"team/025999-{LONG}")
    assert human.code == 0 and f"team/026000-{LONG}" in human.out and "user" in human.out


def test_space_list_pages_readable_spaces_by_name(home: Home) -> None:
    home.ok("whoami")
    owner = home.client()
    try:
        for space in ("b", "a", "c/x", "c", "hidden/one", "d", "a/b", "hidden/two"):
            owner.call("memory.add", space=space, content=f"in {space}")
        owner.call("memory.add", space="c", content="second in c")
        token = client_token(owner, "pager", [("read", "space:a"), ("read", "space:a/*"), ("read", "space:c"),
                                              ("read", "space:d"), ("read", "space:c/*")])  # fmt: skip
    finally:
        owner.close()
    reader = home.client(token)
    try:
        pages: list[list[str]] = []
        after = None
        while True:
            page = reader.call("space.list", limit=2, **({"after": after} if after else {}))
            pages.append([s["space"] for s in page["spaces"]])
            after = page["next"]
            if after is None:
                break
        assert pages == [["a", "a/b"], ["c", "c/x"], ["d"]]
        counts = {s["space"]: s["memories"] for s in reader.call("space.list", after="b")["spaces"]}
        assert counts == {"c": 2, "c/x": 1, "d": 1}  # `after` need not name an existing space
        assert reader.call("space.list", after="d") == {"spaces": [], "next": None}
        for params, code in (({"limit": 0}, "invalid_params.range"), ({"limit": 1001}, "invalid_params.range"),
                             ({"after": "Not A Space"}, "invalid_params.space")):  # fmt: skip
            with pytest.raises(HivememError) as caught:
                reader.call("space.list", **params)
            assert caught.value.code == code
    finally:
        reader.close()


def test_forget_pages_by_limit_and_after(home: Home) -> None:
    home.ok("whoami")
    owner = home.client()
    try:
        ids = [owner.call("memory.add", space="agent/scratch", content=f"note {i}")["id"] for i in range(5)]
        dry = owner.call("memory.forget", spaces=["agent/scratch"], dry_run=True, limit=2)
        assert [d["id"] for d in dry["deleted"]] == [ids[4], ids[3]] and dry["next"] == ids[3]
        rest = owner.call("memory.forget", spaces=["agent/scratch"], dry_run=True, limit=2, after=dry["next"])
        assert [d["id"] for d in rest["deleted"]] == [ids[2], ids[1]] and rest["next"] == ids[1]
        real = owner.call("memory.forget", spaces=["agent/scratch"], limit=3)
        assert [d["id"] for d in real["deleted"]] == [ids[4], ids[3], ids[2]] and real["next"] == ids[2]
        assert owner.call("store.status")["memories"] == 2
        last = owner.call("memory.forget", spaces=["agent/scratch"])
        assert [d["id"] for d in last["deleted"]] == [ids[1], ids[0]] and last["next"] is None
        assert owner.call("memory.forget", spaces=["agent/scratch"]) == {"deleted": [], "failed": [], "next": None}
    finally:
        owner.close()
    fails(home, "memory", "forget", "--spaces", "x", "--limit", "50001", code="invalid_params.range", exit_code=2)


def test_client_list_pages_oldest_first(home: Home) -> None:
    home.ok("whoami")
    owner = home.client()
    try:
        for name in ("zed", "amy", "kim"):
            client_token(owner, name, [("read", "*")])
        first = owner.call("client.list", limit=2)
        assert [c["name"] for c in first["clients"]] == ["zed", "amy"] and first["next"] == "g2"
        rest = owner.call("client.list", limit=2, after=first["next"])
        assert [c["name"] for c in rest["clients"]] == ["kim"] and rest["next"] is None
        with pytest.raises(HivememError) as caught:
            owner.call("client.add", name="wide", grants=[{"right": "read", "scope": f"space:s{i}"} for i in range(65)])
        assert (caught.value.code, caught.value.data["param"]) == ("invalid_params.range", "grants")
    finally:
        owner.close()


# The largest answer each list verb can give, built from values at their bounds.

EMOJI = "\U0001f600"  # 4 bytes of UTF-8, 12 on the wire (an escaped surrogate pair)


@contextlib.contextmanager
def owner_socket(home: Home) -> Iterator[Raw]:
    """An owner connection on a raw socket to the home's daemon (started with the config written so far)."""
    home.ok("whoami")
    raw = Raw(home.paths.socket)
    try:
        raw.hello(owner_key(home))
        yield raw
    finally:
        raw.close()


def widest(client: DaemonClient, space: str, i: int, content: str) -> str:
    """A memory with every listed field at its bound, in characters that cost the most on the wire."""
    provenance = {"kind": "cli", "host": EMOJI * 16, "path": EMOJI * 128, "thread_id": EMOJI * 32,
                  "action": EMOJI * 16, "reason": EMOJI * 125}  # fmt: skip
    memory_id = client.call("memory.add", space=space, content=content, title=EMOJI * 49 + f"{i:04d}",
                            tags=[f"{i:04d}" + "t" * 60, *(f"t{n:02d}" + "t" * 61 for n in range(15))],
                            source=EMOJI * 31 + f"{i:04d}", provenance=provenance)["id"]  # fmt: skip
    assert isinstance(memory_id, str)
    return memory_id


def test_a_full_page_of_the_widest_memories_fits(home: Home) -> None:
    with owner_socket(home) as raw:
        client = home.client()
        try:
            for i in range(100):
                # One FTS5 token as long as the content bound allows: its snippet was the whole token, and
                # 100 of them made a 6.5 MB reply.
                widest(client, "wide", i, f"zebra{i} zebra " + "a" * 65500)
        finally:
            client.close()
        search = reply_line(raw, "memory.search", {"query": "zebra", "limit": 100})
        assert len(search) <= MAX_FRAME
        hits = json.loads(search)["ok"]["results"]
        assert len(hits) == 100 and all(len(h["snippet"].encode()) <= 2048 for h in hits)
        for verb, params in (("memory.list", {"limit": 200}), ("space.list", {"limit": 1000})):
            assert len(reply_line(raw, verb, params)) <= MAX_FRAME


def test_the_largest_recall_fits(home: Home) -> None:
    home.config("[memory]\nmax_content_bytes = 262144\n[recall]\nmax_record_chars = 100000\nmax_total_chars = 300000\n")
    with owner_socket(home) as raw:
        for i in range(6):
            reply_line(raw, "memory.add", {"space": "user", "kind": "lesson", "content": f"m{i} " + EMOJI * 65534})
        line = reply_line(raw, "memory.recall", {"spaces": ["user"], "limit": 100})
    assert len(line) <= MAX_FRAME
    result = json.loads(line)["ok"]
    assert result["count"] >= 3 and result["truncated"] is True  # the budget, not the frame, is what cut it


def test_the_longest_session_chain_fits(home: Home) -> None:
    with owner_socket(home) as raw:
        parent = None
        for i in range(257):
            params = {"harness": EMOJI * 16, "harness_session": f"{i:04d}" + EMOJI * 63, "cwd": "/" + EMOJI * 1023,
                      **({"parent": parent, "relation": "continue"} if parent else {})}  # fmt: skip
            parent = json.loads(reply_line(raw, "session.start", params))["ok"]["session"]
        line = reply_line(raw, "session.chain", {"session": parent})
        assert len(line) <= MAX_FRAME
        chain = json.loads(line)["ok"]
        assert len(chain["chain"]) == 256 and chain["truncated"] is True
        assert len(reply_line(raw, "session.list", {"limit": 200})) <= MAX_FRAME


def test_the_client_refuses_a_request_over_the_frame_and_keeps_its_connection(home: Home) -> None:
    """One check, in `DaemonClient.request`, for the CLI and the MCP adapter (docs/decisions.md D349): a line over
    the frame is never sent, so the connection the daemon would have closed still serves the next request."""
    client = home.client()
    try:
        client.connect()
        with pytest.raises(HivememError) as refused:
            client.request("memory.add", {"space": "user", "content": "x", "source": "s" * MAX_FRAME})
        assert refused.value.code == "invalid_params.frame" and refused.value.data == {"max_bytes": MAX_FRAME}
        at_bound = "q" * (MAX_FRAME - len(b'{"id":2,"verb":"memory.search","params":{"query":""}}'))
        with pytest.raises(HivememError) as fits:  # exactly MAX_FRAME bytes before the newline: sent, and judged
            client.request("memory.search", {"query": at_bound})
        assert fits.value.code == "invalid_params.range"
        assert client.request("store.status", {})["memories"] == 0
    finally:
        client.close()
