"""C08 sessions (docs/verbs.md, D24, D25): start, repeat, parent and relation, end, list, chain, purge, and
search along a chain; unreadable and purged ancestors give `truncated` and reveal nothing.

The CLI is used where its exit codes and output are under test; bulk calls go through in-process
clients on the real socket."""

from __future__ import annotations

import json
import re
from typing import Any

from conftest import Clients, Home, client_token, fails, raises
from hivemem.client import DaemonClient

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
OWNER = {"principal": "owner", "label": "owner"}


def start(client: DaemonClient, harness: str = "codex", **params: Any) -> str:
    result = client.call("session.start", harness=harness, **params)
    assert result["changed"] is True, result
    session = result["session"]
    assert isinstance(session, str)
    return session


def names(items: list[dict[str, Any]], key: str = "session") -> list[str]:
    return [str(i[key]) for i in items]


def session_count(owner: DaemonClient) -> int:
    return int(owner.call("store.status")["sessions"])


def test_start_needs_write_on_session_star(home: Home, owner: DaemonClient, clients: Clients) -> None:
    no_sessions = client_token(owner, "spaces-only", [("read", "*"), ("write", "space:user")])
    one_session = client_token(owner, "one-session", [("read", "*"), ("write", "session:s1")])
    starter = client_token(owner, "starter", [("write", "session:*")])
    everything = client_token(owner, "everything", [("write", "*")])
    error = fails(home, "session", "start", "--harness", "codex", code="denied.write", exit_code=4, token=no_sessions)
    assert (error["data"]["right"], error["data"]["resource"], error["data"]["principal"]) == ("write", "session:*",
                                                                                               "g1")  # fmt: skip
    fails(home, "session", "start", "--harness", "codex", code="denied.write", exit_code=4, token=None)
    refused = raises(clients(one_session), "session.start", harness="codex")
    assert (refused.code, refused.data["resource"]) == ("denied.write", "session:*")
    assert session_count(owner) == 0
    assert start(clients(starter)) == "s1"
    assert start(clients(everything)) == "s2"
    assert start(owner) == "s3"
    got = clients(starter).call("session.get", session="s1")
    assert got["reported_by"] == {"principal": "g3", "label": "starter"}
    # a reporter reads and ends its own sessions without any read grant, and nothing else
    assert clients(starter).call("session.end", session="s1")["changed"] is True
    assert raises(clients(starter), "session.get", session="s2").code == "not_found.session"
    assert names(clients(starter).call("session.list")["sessions"]) == ["s1"]
    # starting under a parent needs read on it: an unreadable parent answers like an absent one
    hidden = raises(clients(starter), "session.start", harness="codex", parent="s2", relation="fork")
    absent = raises(clients(starter), "session.start", harness="codex", parent="s9", relation="fork")
    assert (hidden.code, hidden.data) == ("not_found.session", {})
    assert hidden.message.replace("s2", "<s>") == absent.message.replace("s9", "<s>")
    assert start(clients(starter), parent="s1", relation="continue") == "s4"


def test_repeat_start_returns_the_same_session_and_ignores_other_params(home: Home, owner: DaemonClient) -> None:
    first = home.ok("session", "start", "--harness", "codex", "--harness-session", "0199a", "--cwd", "/home/dev/a")
    assert first == {"session": "s1", "changed": True}
    parent = start(owner, "claude-code")
    again = home.ok("session", "start", "--harness", "codex", "--harness-session", "0199a", "--cwd", "/elsewhere",
                    "--parent", parent, "--relation", "fork")  # fmt: skip
    assert again == {"session": "s1", "changed": False}
    got = owner.call("session.get", session="s1")
    assert got["cwd"] == "/home/dev/a"
    assert "parent" not in got and "relation" not in got
    assert start(owner, "claude-code", harness_session="0199a") == "s3"
    assert start(owner) == "s4"
    assert start(owner) == "s5"
    assert session_count(owner) == 5


def test_parent_and_relation_are_recorded(owner: DaemonClient) -> None:
    root = start(owner, harness_session="root", cwd="/home/dev/api")
    children = {relation: start(owner, parent=root, relation=relation) for relation in ("continue", "fork", "subagent")}
    for relation, child in children.items():
        got = owner.call("session.get", session=child)
        assert got["parent"] == root
        assert got["relation"] == relation
        assert got["reported_by"] == OWNER
        assert TS.match(got["started"])
        assert "ended" not in got
    got = owner.call("session.get", session=root)
    assert set(got) == {"session", "harness", "harness_session", "cwd", "reported_by", "started"}
    assert (got["harness"], got["harness_session"], got["cwd"]) == ("codex", "root", "/home/dev/api")


def test_invalid_lineage_params(home: Home, owner: DaemonClient) -> None:
    root = start(owner)
    error = fails(home, "session", "start", "--harness", "codex", "--parent", root, code="invalid_params.missing",
                  exit_code=2)  # fmt: skip
    assert error["data"]["param"] == "relation"
    fails(home, "session", "start", "--harness", "codex", "--relation", "fork", code="invalid_params.relation",
          exit_code=2)  # fmt: skip
    error = fails(home, "session", "start", "--harness", "codex", "--parent", "s99", "--relation", "fork",
                  code="not_found.session", exit_code=3)  # fmt: skip
    assert "s99" in error["message"]
    for args in (("--cwd", "relative/path"), ("--cwd", "/" + "a" * 4096), ("--harness", "h" * 65)):
        result = home.cli("session", "start", "--harness", "codex", *args, "--json")
        assert result.code == 2, (args, result)
        assert result.json["error"]["code"].startswith("invalid_params."), result
    for params, code, param in (
        ({"relation": "clone", "parent": root}, "invalid_params.relation", "relation"),
        ({"relation": "continue"}, "invalid_params.relation", "relation"),
        ({"parent": root}, "invalid_params.missing", "relation"),
        ({"parent": "x1", "relation": "fork"}, "invalid_params.type", "parent"),
        ({"cwd": ""}, None, "cwd"),
        ({"cwd": "~/x"}, None, "cwd"),
        ({"cwd": "/a\nb"}, None, "cwd"),
        ({"cwd": "/" + "é" * 2048}, None, "cwd"),
        ({"harness_session": "h" * 257}, None, "harness_session"),
        ({"harness": "é" * 33}, None, "harness"),
        ({"harness": ""}, None, "harness"),
        ({"harness": "tab\there"}, None, "harness"),
        ({"harness": 5}, "invalid_params.type", "harness"),
    ):
        invalid = raises(owner, "session.start", **{"harness": "codex", **params})
        assert invalid.code.startswith("invalid_params."), (params, invalid.code)
        assert code is None or invalid.code == code, (params, invalid.code)
        assert invalid.data["param"] == param, (params, invalid.data)
    assert session_count(owner) == 1
    assert start(owner, "h" * 64, cwd="/" + "a" * 4095) == "s2"


def test_end_then_end_again(home: Home, owner: DaemonClient) -> None:
    session = start(owner)
    ended = home.ok("session", "end", "--session", session)
    assert set(ended) == {"session", "ended", "changed"}
    assert ended["session"] == session and ended["changed"] is True and TS.match(ended["ended"])
    again = home.ok("session", "end", "--session", session)
    assert again == {"session": session, "ended": ended["ended"], "changed": False}
    assert owner.call("session.get", session=session)["ended"] == ended["ended"]
    fails(home, "session", "end", "--session", "s9", code="not_found.session", exit_code=3)


def test_end_needs_write_on_the_session(home: Home, owner: DaemonClient, clients: Clients) -> None:
    other = start(owner)
    mine = start(owner)
    reader = client_token(owner, "reader", [("read", "*")])
    ender = client_token(owner, "ender", [("read", f"session:{mine}"), ("write", f"session:{mine}")])
    error = fails(home, "session", "end", "--session", other, code="denied.write", exit_code=4, token=reader)
    assert error["data"]["resource"] == f"session:{other}"
    assert raises(clients(""), "session.end", session=other).code == "denied.write"
    assert raises(clients(ender), "session.end", session=other).code == "not_found.session"
    assert clients(ender).call("session.end", session=mine)["changed"] is True
    assert "ended" not in owner.call("session.get", session=other)


def test_get_and_list_with_filters_and_paging(home: Home, owner: DaemonClient) -> None:
    s1 = start(owner, harness_session="a")
    s2 = start(owner, "claude-code", harness_session="a")
    s3 = start(owner, harness_session="b", parent=s1, relation="continue")
    s4 = start(owner, parent=s1, relation="subagent")
    s5 = start(owner, "opencode")

    def listed(**params: Any) -> list[str]:
        return names(owner.call("session.list", **params)["sessions"])

    everything = home.ok("session", "list")
    assert names(everything["sessions"]) == [s5, s4, s3, s2, s1]
    assert everything["next"] is None
    assert everything["sessions"][2] == home.ok("session", "get", "--session", s3)
    assert names(home.ok("session", "list", "--harness", "codex")["sessions"]) == [s4, s3, s1]
    assert listed(harness_session="a") == [s2, s1]
    assert listed(harness="codex", harness_session="a") == [s1]
    assert listed(parent=s1) == [s4, s3]
    assert listed(parent=s5) == []
    assert listed(harness="nobody") == []
    page = home.ok("session", "list", "--limit", "2")
    assert (names(page["sessions"]), page["next"]) == ([s5, s4], s4)
    page = owner.call("session.list", limit=2, after=page["next"])
    assert (names(page["sessions"]), page["next"]) == ([s3, s2], s2)
    page = owner.call("session.list", limit=2, after=page["next"])
    assert (names(page["sessions"]), page["next"]) == ([s1], None)
    fails(home, "session", "get", "--session", "s77", code="not_found.session", exit_code=3)
    fails(home, "session", "get", "--session", "x1", code="invalid_params.type", exit_code=2)


def test_list_and_get_show_only_readable_sessions(owner: DaemonClient, clients: Clients) -> None:
    token = client_token(owner, "partial", [("read", "session:s2"), ("write", "session:*")])
    for _ in range(3):
        start(owner)
    own = start(clients(token), "mine")
    assert names(clients(token).call("session.list")["sessions"]) == [own, "s2"]
    assert names(clients(token).call("session.list", harness="codex")["sessions"]) == ["s2"]
    assert raises(clients(token), "session.get", session="s1").code == "not_found.session"
    assert raises(clients(token), "session.chain", session="s3").code == "not_found.session"


def test_chain_is_oldest_first_and_complete(home: Home, owner: DaemonClient) -> None:
    s1 = start(owner)
    s2 = start(owner, parent=s1, relation="continue")
    s3 = start(owner, parent=s2, relation="subagent")
    chain = home.ok("session", "chain", "--session", s3)
    assert chain["truncated"] is False
    assert names(chain["chain"]) == [s1, s2, s3]
    assert chain["chain"] == [owner.call("session.get", session=s) for s in (s1, s2, s3)]
    assert owner.call("session.chain", session=s1) == {"chain": [owner.call("session.get", session=s1)],
                                                       "truncated": False}  # fmt: skip
    fails(home, "session", "chain", "--session", "s9", code="not_found.session", exit_code=3)


def test_chain_through_an_unreadable_ancestor_is_truncated_and_reveals_nothing(
    home: Home, owner: DaemonClient, clients: Clients
) -> None:
    alice = client_token(owner, "alice", [("write", "session:*")])
    secret_root = start(clients(alice), "alice-secret-harness", cwd="/home/alice/secret")
    middle = start(owner, parent=secret_root, relation="fork")
    leaf = start(owner, parent=middle, relation="subagent")
    carol = client_token(owner, "carol", [("read", f"session:{middle}"), ("read", f"session:{leaf}")])
    full = owner.call("session.chain", session=leaf)
    assert (names(full["chain"]), full["truncated"]) == ([secret_root, middle, leaf], False)
    result = home.cli("session", "chain", "--session", leaf, "--json", token=carol)
    assert result.code == 0, result
    chain = result.json
    assert chain["truncated"] is True
    assert names(chain["chain"]) == [middle, leaf]
    assert "alice" not in result.out and "/home/" not in result.out
    assert '"g1"' not in result.out  # alice's principal
    only_middle = clients(carol).call("session.chain", session=middle)
    assert (names(only_middle["chain"]), only_middle["truncated"]) == ([middle], True)
    hidden = raises(clients(carol), "session.get", session=secret_root)
    absent = raises(clients(carol), "session.get", session="s9")
    assert hidden.code == absent.code == "not_found.session"
    assert hidden.message.replace(secret_root, "<s>") == absent.message.replace("s9", "<s>")
    assert json.dumps(hidden.data).replace(secret_root, "<s>") == json.dumps(absent.data).replace("s9", "<s>")
    assert raises(clients(carol), "session.chain", session=secret_root).code == "not_found.session"
    # a readable root above an unreadable middle: the chain stops at the gap
    dave = client_token(owner, "dave", [("read", f"session:{secret_root}"), ("read", f"session:{leaf}")])
    gap = clients(dave).call("session.chain", session=leaf)
    assert (names(gap["chain"]), gap["truncated"]) == ([leaf], True)


def test_purge_of_a_middle_session(home: Home, owner: DaemonClient, clients: Clients) -> None:
    s1 = start(owner)
    s2 = start(owner, parent=s1, relation="continue")
    s3 = start(owner, parent=s2, relation="fork")
    memory = owner.call("memory.add", space="user", content="kept after purge", session=s2)["id"]
    assert owner.call("memory.get", id=memory)["session"] == s2
    token = client_token(owner, "codex", [("read", "*"), ("write", "*")])
    fails(home, "session", "purge", "--session", s2, code="denied.admin", exit_code=4, token=token)
    assert home.ok("session", "purge", "--session", s2) == {"session": s2}
    assert raises(owner, "session.get", session=s2).code == "not_found.session"
    assert raises(owner, "session.purge", session=s2).code == "not_found.session"
    child = owner.call("session.get", session=s3)
    assert child["relation"] == "fork"
    assert "parent" not in child
    for client in (owner, clients(token)):
        chain = client.call("session.chain", session=s3)
        assert (names(chain["chain"]), chain["truncated"]) == ([s3], True)
    assert owner.call("session.chain", session=s1)["truncated"] is False
    kept = owner.call("memory.get", id=memory)
    assert kept["content"] == "kept after purge"
    assert "session" not in kept
    assert kept["revision"] == 1
    assert owner.call("memory.list", session=s3, lineage=True)["memories"] == []
    assert owner.call("session.list", parent=s1)["sessions"] == []


def test_memory_add_with_an_unreadable_session_is_not_found(home: Home, owner: DaemonClient, clients: Clients) -> None:
    alice = client_token(owner, "alice", [("write", "session:*")])
    bob = client_token(owner, "bob", [("read", "space:b"), ("write", "space:b"), ("write", "session:*")])
    alices = start(clients(alice))
    bobs = start(clients(bob))
    before = owner.call("store.status")["memories"]
    error = fails(home, "memory", "add", "--space", "b", "--content", "with a session", "--session", alices,
                  code="not_found.session", exit_code=3, token=bob)  # fmt: skip
    assert error["data"] == {}
    absent = raises(clients(bob), "memory.add", space="b", content="with a session", session="s99")
    assert (absent.code, absent.data) == ("not_found.session", {})
    assert absent.message.replace("s99", "<s>") == error["message"].replace(alices, "<s>")
    assert owner.call("store.status")["memories"] == before
    memory = clients(bob).call("memory.add", space="b", content="with my session", session=bobs)
    assert clients(bob).call("memory.get", id=memory["id"])["session"] == bobs


def test_search_and_list_along_a_session_chain(home: Home, owner: DaemonClient, clients: Clients) -> None:
    s1 = start(owner)
    s2 = start(owner, parent=s1, relation="continue")
    s3 = start(owner, parent=s2, relation="subagent")
    s4 = start(owner)
    by_session = {s: owner.call("memory.add", space="user", content=f"lineage note {s}", session=s)["id"]
                  for s in (s1, s2, s3, s4)}  # fmt: skip
    loose = owner.call("memory.add", space="user", content="lineage note without session")["id"]

    def searched(client: DaemonClient, **params: Any) -> set[str]:
        return set(names(client.call("memory.search", query="lineage note", **params)["results"], "id"))

    def listed(client: DaemonClient, **params: Any) -> set[str]:
        return set(names(client.call("memory.list", **params)["memories"], "id"))

    assert searched(owner) == set(by_session.values()) | {loose}
    for view in (searched, listed):
        assert view(owner, session=s3) == {by_session[s3]}
        assert view(owner, session=s3, lineage=True) == {by_session[s] for s in (s1, s2, s3)}
        assert view(owner, session=s3, lineage=False) == {by_session[s3]}
        assert view(owner, session=s2, lineage=True) == {by_session[s] for s in (s1, s2)}
        assert view(owner, session=s4, lineage=True) == {by_session[s4]}
    cli = home.ok("memory", "search", "--query", "lineage", "--session", s3, "--lineage")["results"]
    assert sorted(names(cli, "id")) == sorted(by_session[s] for s in (s1, s2, s3))
    assert [h["fts_rank"] for h in cli] == [1, 2, 3]
    cli = home.ok("memory", "list", "--session", s3)["memories"]
    assert names(cli, "id") == [by_session[s3]]
    carol = client_token(owner, "carol", [("read", "space:user"), ("read", f"session:{s2}"), ("read", f"session:{s3}")])
    for view in (searched, listed):
        assert view(clients(carol), session=s3, lineage=True) == {by_session[s2], by_session[s3]}
    error = fails(home, "memory", "search", "--query", "lineage", "--session", s1, code="not_found.session",
                  exit_code=3, token=carol)  # fmt: skip
    assert error["data"] == {}
    for session in (s1, "s99"):
        for verb, params in (("memory.search", {"query": "lineage"}), ("memory.list", {})):
            error_obj = raises(clients(carol), verb, session=session, lineage=True, **params)
            assert (error_obj.code, error_obj.data) == ("not_found.session", {})
