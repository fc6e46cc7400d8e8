"""C06 grants (docs/security.md): who may read and write what, checked before any handler runs; unreadable
memories answer as absent and never show in search or list results or ranks. Includes the randomized
property test: many tokens, many searches, no leaks."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import Clients, Home, client_token, fails, raises
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

DENIAL_KEYS = {"right", "resource", "principal", "fix"}


def add(client: DaemonClient, space: str, content: str, **params: Any) -> str:
    memory_id = client.call("memory.add", space=space, content=content, **params)["id"]
    assert isinstance(memory_id, str)
    return memory_id


def found(client: DaemonClient, query: str, **params: Any) -> list[dict[str, Any]]:
    results = client.call("memory.search", query=query, **params)["results"]
    assert isinstance(results, list)
    return results


def found_ids(client: DaemonClient, query: str, **params: Any) -> set[str]:
    return {h["id"] for h in found(client, query, **params)}


def listed(client: DaemonClient, **params: Any) -> list[str]:
    return [m["id"] for m in client.call("memory.list", **params)["memories"]]


def counts(owner: DaemonClient) -> dict[str, Any]:
    return {k: v for k, v in owner.call("store.status").items() if k != "bytes"}


def last_event(owner: DaemonClient) -> int:
    events = owner.call("events.list", limit=1)["events"]
    return int(events[0]["id"]) if events else 0


# unknown


def test_unknown_reads_and_is_refused_writes_before_the_handler(home: Home, owner: DaemonClient,
                                                                clients: Clients) -> None:  # fmt: skip
    m1 = add(owner, "user", "unknown may read this")
    unknown = clients("")
    assert [h["id"] for h in found(unknown, "unknown")] == [m1]
    assert unknown.call("memory.get", id=m1)["content"] == "unknown may read this"
    before, events = counts(owner), last_event(owner)
    error = fails(home, "memory", "add", "--space", "user", "--content", "qwzx unknown writes", code="denied.write",
                  exit_code=4, token=None)  # fmt: skip
    assert set(error["data"]) == DENIAL_KEYS
    assert error["data"]["right"] == "write"
    assert error["data"]["resource"] == "space:user"
    assert error["data"]["principal"] == "unknown"
    assert error["data"]["fix"]
    fails(home, "memory", "delete", "--id", m1, "--revision", "1", code="denied.write", exit_code=4, token=None)
    for verb, params in (
        ("memory.update", {"id": m1, "revision": 1, "content": "changed by unknown"}),
        ("memory.restore", {"id": m1}),
        ("memory.forget", {"spaces": ["user"]}),
        ("session.start", {"harness": "codex"}),
    ):
        error_obj = raises(unknown, verb, **params)
        assert error_obj.code == "denied.write", (verb, error_obj.code)
        assert set(error_obj.data) == DENIAL_KEYS
    for verb, params in (("memory.purge", {"id": m1}), ("client.list", {}), ("daemon.stop", {})):
        assert raises(unknown, verb, **params).code == "denied.admin"
    # params are validated before authorization: a bad space is invalid_params, not denied
    fails(home, "memory", "add", "--space", "Bad Space", "--content", "x", code="invalid_params.space", exit_code=2,
          token=None)  # fmt: skip
    assert raises(unknown, "memory.update", id=m1, revision=0, content="x").code == "invalid_params.range"
    assert counts(owner) == before
    assert last_event(owner) == events
    assert owner.call("memory.get", id=m1)["content"] == "unknown may read this"
    assert found(owner, "qwzx") == []


def test_write_on_one_space_is_refused_on_another(home: Home, owner: DaemonClient, clients: Clients) -> None:
    token = client_token(owner, "a-writer", [("read", "*"), ("write", "space:a")])
    writer = clients(token)
    m1 = add(writer, "a", "in space a")
    m2 = add(owner, "b", "in space b")
    writer.call("memory.update", id=m1, revision=1, content="still in a")
    error = fails(home, "memory", "add", "--space", "b", "--content", "sneaking into b", code="denied.write",
                  exit_code=4, token=token)  # fmt: skip
    assert error["data"] == {**error["data"], "right": "write", "resource": "space:b", "principal": "g1"}
    error_obj = raises(writer, "memory.update", id=m2, revision=1, content="x")
    assert (error_obj.code, error_obj.data["resource"]) == ("denied.write", f"memory:{m2}")
    assert raises(writer, "memory.delete", id=m2, revision=1).code == "denied.write"
    assert raises(writer, "memory.add", space="a/sub", content="x").code == "denied.write"
    assert raises(writer, "memory.add", space="ab", content="x").code == "denied.write"
    assert owner.call("memory.get", id=m2)["revision"] == 1
    assert found(owner, "sneaking") == []


def test_prefix_grant_covers_spaces_under_it_but_not_the_prefix(home: Home, owner: DaemonClient,
                                                                clients: Clients) -> None:  # fmt: skip
    token = client_token(owner, "proj", [("read", "space:project/*"), ("write", "space:project/*")])
    proj = clients(token)
    inside = add(proj, "project/x", "prefix covered alpha")
    deeper = add(proj, "project/x/y", "prefix covered beta")
    for space in ("project", "projectx", "project-x", "other/project/x"):
        error = raises(proj, "memory.add", space=space, content="prefix refused")
        assert (error.code, error.data["resource"]) == ("denied.write", f"space:{space}")
    bare = add(owner, "project", "prefix covered gamma")
    near = add(owner, "projectx", "prefix covered delta")
    assert found_ids(proj, "prefix covered") == {inside, deeper}
    assert set(listed(proj)) == {inside, deeper}
    assert listed(proj, spaces=["project/x"]) == [inside]
    for hidden in (bare, near):
        fails(home, "memory", "get", "--id", hidden, code="not_found.memory", exit_code=3, token=token)
    shown = fails(home, "memory", "search", "--query", "prefix", "--spaces", "project", code="denied.read",
                  exit_code=4, token=token)  # fmt: skip
    assert shown["data"]["resource"] == "space:project"
    assert [s["space"] for s in proj.call("space.list")["spaces"]] == ["project/x", "project/x/y"]


def test_explicit_unreadable_space_is_denied_read(home: Home, owner: DaemonClient, clients: Clients) -> None:
    token = client_token(owner, "reader", [("read", "space:a")])
    add(owner, "a", "readable words here")
    add(owner, "b", "hidden words here")
    fails(home, "memory", "list", "--spaces", "a,b", code="denied.read", exit_code=4, token=token)
    for verb, params in (("memory.search", {"query": "words"}), ("memory.list", {}), ("memory.recall", {}),
                         ("memory.recall", {"query": "words"})):  # fmt: skip
        for spaces in (["b"], ["a", "b"], ["nonexistent"]):
            error = raises(clients(token), verb, spaces=spaces, **params)
            assert error.code == "denied.read"
            assert set(error.data) == DENIAL_KEYS
            assert error.data["right"] == "read"
            assert "hidden" not in error.message + json.dumps(error.data)
    assert [h["space"] for h in found(clients(token), "words", spaces=["a"])] == ["a"]


STATUS_COUNTS = ("memories", "drafts", "archived", "deleted", "versions", "sessions", "vectors", "pending")


def test_store_status_shows_a_client_only_what_it_can_read(home: Home, owner: DaemonClient, clients: Clients) -> None:
    """docs/protocol.md: for any principal but the owner, counts cover readable rows only; no path, no size."""
    grants = [("read", "space:team/a"), ("write", "space:team/a"), ("write", "session:*")]
    token = client_token(owner, "narrow", grants)
    narrow = clients(token)
    kept = add(narrow, "team/a", "readable note")
    owner.call("memory.update", id=kept, revision=1, content="readable note, edited")
    gone = add(owner, "team/a", "readable, then deleted")
    owner.call("memory.delete", id=gone, revision=1)
    for i in range(5):
        secret = add(owner, "secret/x", f"hidden note {i}")
        owner.call("memory.update", id=secret, revision=1, content=f"hidden note {i}, edited")
    owner.call("memory.delete", id=secret, revision=2)
    owner.call("session.start", harness="owner-harness")
    full = owner.call("store.status")
    assert (full["memories"], full["deleted"], full["versions"], full["sessions"]) == (5, 2, 15, 1)
    assert full["path"] == (home.store_url or home.paths.store) and full["bytes"] > 0
    seen = narrow.call("store.status")
    assert "path" not in seen and "bytes" not in seen
    assert {k: seen[k] for k in STATUS_COUNTS} == {
        "memories": 1, "drafts": 0, "archived": 0, "deleted": 1, "versions": 4, "sessions": 0, "vectors": 0,
        "pending": 0,
    }  # fmt: skip
    assert (seen["schema_version"], seen["sqlite_version"]) == (full["schema_version"], full["sqlite_version"])
    narrow.call("session.start", harness="narrow-harness")  # a principal reads the sessions it reported
    assert narrow.call("store.status")["sessions"] == 1
    unknown = clients("").call("store.status")  # reads everything by default, and is still not the owner
    assert "path" not in unknown and "bytes" not in unknown
    assert {k: unknown[k] for k in STATUS_COUNTS} == {k: owner.call("store.status")[k] for k in STATUS_COUNTS}
    human = home.cli("store", "status", token=token)
    assert human.code == 0 and (home.store_url or home.paths.store) not in human.out and "bytes" not in human.out


def same_but_id(left: HivememError, right: HivememError, left_id: str, right_id: str) -> None:
    assert left.code == right.code
    assert left.message.replace(left_id, "<id>") == right.message.replace(right_id, "<id>")
    assert json.dumps(left.data).replace(left_id, "<id>") == json.dumps(right.data).replace(right_id, "<id>")


def test_a_memory_in_an_unreadable_space_answers_exactly_like_an_absent_one(home: Home, owner: DaemonClient,
                                                                           clients: Clients) -> None:  # fmt: skip
    token = client_token(owner, "reader", [("read", "space:a"), ("write", "space:a")])
    for i in range(12):
        add(owner, "a" if i % 2 else "b", f"filler number {i}")
    hidden = add(owner, "b", "hidden in b")  # m13
    absent = "m99"
    assert len(hidden) == len(absent)
    cli_hidden = fails(home, "memory", "get", "--id", hidden, code="not_found.memory", exit_code=3, token=token)
    cli_absent = fails(home, "memory", "get", "--id", absent, code="not_found.memory", exit_code=3, token=token)
    assert cli_hidden["message"].replace(hidden, "<id>") == cli_absent["message"].replace(absent, "<id>")
    assert json.dumps(cli_hidden["data"]).replace(hidden, "<id>") == json.dumps(cli_absent["data"]).replace(
        absent, "<id>"
    )
    for verb, extra in (
        ("memory.get", {}),
        ("memory.get", {"revision": 1}),
        ("memory.get", {"include_deleted": True}),
        ("memory.update", {"revision": 1, "content": "overwrite"}),
        ("memory.delete", {"revision": 1}),
        ("memory.restore", {}),
        ("memory.history", {}),
    ):
        left = raises(clients(token), verb, id=hidden, **extra)
        right = raises(clients(token), verb, id=absent, **extra)
        assert left.code == "not_found.memory", (verb, left.code)
        same_but_id(left, right, hidden, absent)
    assert owner.call("memory.get", id=hidden)["revision"] == 1


def test_memory_grants_give_access_to_that_memory_only(home: Home, owner: DaemonClient, clients: Clients) -> None:
    m1 = add(owner, "b", "selector alpha one")
    m2 = add(owner, "b", "selector alpha two")
    m3 = add(owner, "c", "selector alpha three")
    token = client_token(
        owner, "picky", [("read", f"memory:{m2}"), ("read", f"memory:{m3}"), ("write", f"memory:{m3}")]
    )
    picky = clients(token)
    assert home.ok("memory", "get", "--id", m2, token=token)["content"] == "selector alpha two"
    assert raises(picky, "memory.get", id=m1).code == "not_found.memory"
    results = found(picky, "selector alpha")
    assert sorted(h["id"] for h in results) == sorted([m2, m3])
    assert [h["fts_rank"] for h in results] == [1, 2]
    assert sorted(listed(picky)) == sorted([m2, m3])
    assert [s["space"] for s in picky.call("space.list")["spaces"]] == ["b", "c"]
    fails(home, "memory", "update", "--id", m2, "--revision", "1", "--content", "x", code="denied.write", exit_code=4,
          token=token)  # fmt: skip
    picky.call("memory.update", id=m3, revision=1, content="selector alpha three bis")
    assert owner.call("memory.get", id=m3)["updated_by"] == {"principal": "g1", "label": "picky"}
    assert raises(picky, "memory.add", space="c", content="x").code == "denied.write"
    # a memory grant is not a grant on its space: naming the space is still denied
    assert raises(picky, "memory.list", spaces=["b"]).code == "denied.read"


def test_search_and_list_hide_unreadable_rows_and_ranks_have_no_gaps(home: Home, owner: DaemonClient,
                                                                     clients: Clients) -> None:  # fmt: skip
    ids: dict[str, list[str]] = {"open": [], "shut": []}
    for i in range(8):
        for space in ("open", "shut"):
            words = "gap gap gap" if space == "shut" else "gap"  # hidden rows would outrank the readable ones
            ids[space].append(add(owner, space, f"{words} ranking row {i} {space}"))
    token = client_token(owner, "open-reader", [("read", "space:open")])
    results = home.ok("memory", "search", "--query", "gap ranking", "--limit", "100", token=token)["results"]
    assert sorted(h["id"] for h in results) == sorted(ids["open"])
    assert [h["fts_rank"] for h in results] == list(range(1, 9))
    assert all(h["space"] == "open" for h in results)
    reader = clients(token)
    assert [h["fts_rank"] for h in found(reader, "gap", limit=3)] == [1, 2, 3]
    newest = sorted(ids["open"], key=lambda m: -int(m[1:]))
    page = reader.call("memory.list", limit=5)
    assert [m["id"] for m in page["memories"]] == newest[:5]
    rest = reader.call("memory.list", limit=5, after=page["next"])
    assert [m["id"] for m in rest["memories"]] == newest[5:]
    assert rest["next"] is None
    assert reader.call("space.list")["spaces"] == [{**reader.call("space.list")["spaces"][0], "space": "open",
                                                    "memories": 8}]  # fmt: skip


def test_author_cannot_be_set_by_params(home: Home, owner: DaemonClient, clients: Clients) -> None:
    token = client_token(owner, "codex", [("read", "*"), ("write", "*")])
    codex = clients(token)
    for param, value in (("author", {"principal": "owner"}), ("updated_by", {"principal": "owner"}),
                         ("principal", "owner"), ("label", "owner")):  # fmt: skip
        error = raises(codex, "memory.add", space="user", content="forged author", **{param: value})
        assert error.code == "invalid_params.unknown"
        assert error.data["param"] == param
    created = codex.call("memory.add", space="user", content="honest author")
    error = raises(codex, "memory.update", id=created["id"], revision=1, content="x", author={"principal": "g9"})
    assert (error.code, error.data["param"]) == ("invalid_params.unknown", "author")
    assert found(owner, "forged") == []
    fails(home, "memory", "add", "--space", "user", "--content", "x", "--author", "owner",
          code="invalid_params.unknown", exit_code=2, token=token)  # fmt: skip
    memory = owner.call("memory.get", id=created["id"])
    assert memory["author"] == memory["updated_by"] == {"principal": "g1", "label": "codex"}
    owner.call("memory.update", id=created["id"], revision=1, content="honest, edited by owner")
    memory = owner.call("memory.get", id=created["id"])
    assert memory["author"] == {"principal": "g1", "label": "codex"}
    assert memory["updated_by"] == {"principal": "owner", "label": "owner"}
    history = owner.call("memory.history", id=created["id"])["versions"]
    assert [v["by"]["principal"] for v in history] == ["owner", "g1"]
    events = owner.call("events.list", types=["memory.added", "memory.updated"])["events"]
    assert [(e["type"], e["principal"]) for e in events] == [("memory.updated", "owner"), ("memory.added", "g1")]


def test_grants_unknown_empty_turns_unknown_off(home: Home, owner: DaemonClient) -> None:
    m1 = add(owner, "user", "visible until config changes")
    assert [h["id"] for h in home.ok("memory", "search", "--query", "visible", token=None)["results"]] == [m1]
    pid = home.daemon_pid()
    assert home.ok("config", "set", "--key", "grants.unknown", "--value", "[]") == {"key": "grants.unknown",
                                                                                    "value": []}  # fmt: skip
    assert home.daemon_pid() == pid
    assert home.ok("memory", "search", "--query", "visible", token=None)["results"] == []
    error = fails(home, "memory", "get", "--id", m1, code="not_found.memory", exit_code=3, token=None)
    assert error["data"] == {}
    unknown = home.client("")
    try:
        assert listed(unknown) == []
        assert unknown.call("space.list")["spaces"] == []
        assert unknown.call("events.list")["events"] == []
        assert unknown.call("whoami") == {"principal": "unknown", "grants": []}
        assert raises(unknown, "memory.search", query="visible", spaces=["user"]).code == "denied.read"
        assert raises(unknown, "memory.history", id=m1).code == "not_found.memory"
    finally:
        unknown.close()
    assert [h["id"] for h in found(owner, "visible")] == [m1]


# the randomized property test

SPACES = ("project/a", "project/b", "projectx", "team/x", "team")  # prefix selectors must not cover the last
VOCABULARY = ("amber", "basalt", "cedar", "drizzle", "ember", "fjord", "glacier", "harbor", "indigo", "juniper",
              "kelp", "lantern", "meadow", "nectar", "orchid", "pebble")  # fmt: skip
KINDS = ("note", "fact", "lesson")
TAGS = ("red", "green", "blue")


@dataclass(frozen=True)
class Stored:
    id: int
    space: str
    kind: str
    tags: frozenset[str]
    words: frozenset[str]


@dataclass(frozen=True)
class Grants:
    everything: bool
    spaces: frozenset[str]
    prefixes: tuple[str, ...]
    memories: frozenset[int]

    def space(self, space: str) -> bool:
        """May this token name `space` explicitly (read on the whole space)?"""
        return self.everything or space in self.spaces or any(space.startswith(p + "/") for p in self.prefixes)

    def row(self, memory: Stored) -> bool:
        return self.space(memory.space) or memory.id in self.memories


def random_grants(rng: random.Random, index: int, ids: list[int]) -> tuple[list[dict[str, str]], Grants]:
    """Grant sets of different shapes: `*`, memories only, prefixes, spaces, and mixes (writes are noise)."""
    scopes: list[str] = []
    if index == 0:
        scopes = ["*"]
    elif index == 1:
        scopes = [f"memory:m{m}" for m in rng.sample(ids, 8)]
    elif index == 2:
        scopes = ["space:project/*", f"memory:m{rng.choice(ids)}", "space:team"]
    else:
        scopes = [f"space:{s}" for s in rng.sample(SPACES, rng.randint(1, 3))]
        scopes += [f"memory:m{m}" for m in rng.sample(ids, rng.randint(0, 4))]
        scopes += rng.sample(["space:team/*", "space:agent", "space:project", "session:*"], 2)
    grants = [{"right": "read", "scope": s} for s in scopes]
    grants += [{"right": "write", "scope": "*"}, {"right": "write", "scope": f"memory:m{rng.choice(ids)}"}]
    model = Grants(
        everything="*" in scopes,
        spaces=frozenset(s[6:] for s in scopes if s.startswith("space:") and not s.endswith("/*")),
        prefixes=tuple(s[6:-2] for s in scopes if s.startswith("space:") and s.endswith("/*")),
        memories=frozenset(int(s[8:]) for s in scopes if s.startswith("memory:")),
    )
    return grants, model


def fill(owner: DaemonClient, rng: random.Random) -> dict[int, Stored]:
    """Ten memories per space sharing one vocabulary; a few deleted (they must never come back either)."""
    stored: dict[int, Stored] = {}
    for space in SPACES:
        for _ in range(10):
            words = rng.sample(VOCABULARY, rng.randint(2, 5))
            kind, tags = rng.choice(KINDS), rng.sample(TAGS, rng.randint(0, 2))
            content = " ".join(words) + f" item{len(stored)}"
            n = int(owner.call("memory.add", space=space, content=content, kind=kind, tags=tags)["id"][1:])
            stored[n] = Stored(n, space, kind, frozenset(tags), frozenset(words))
    for n in rng.sample(sorted(stored), 4):
        owner.call("memory.delete", id=f"m{n}", revision=1)
        del stored[n]
    return stored


def random_params(rng: random.Random, ids: list[int]) -> tuple[str, dict[str, Any]]:
    """A random memory.search or memory.list call with random optional filters."""
    params: dict[str, Any] = {}
    if rng.random() < 0.4:
        params["spaces"] = rng.sample(SPACES, rng.randint(1, 3))
    if rng.random() < 0.3:
        params["kinds"] = rng.sample(KINDS, rng.randint(1, 2))
    if rng.random() < 0.3:
        params["tags"] = rng.sample(TAGS, 1)
    if rng.random() < 0.5:
        params["limit"] = rng.randint(1, 60)
    if rng.random() < 0.6:
        words = rng.sample(VOCABULARY, rng.randint(1, 3))
        params["query"] = " ".join(words + (["the"] if rng.random() < 0.2 else []))
        return "memory.search", params
    if rng.random() < 0.3:
        params["after"] = f"m{rng.choice(ids)}"
    return "memory.list", params


def expected_rows(stored: dict[int, Stored], model: Grants, verb: str, params: dict[str, Any]) -> list[int]:
    """What the call must return, before the limit: readable rows matching every filter, in list order."""
    rows = [
        m
        for m in stored.values()
        if model.row(m)
        and ("spaces" not in params or m.space in params["spaces"])
        and ("kinds" not in params or m.kind in params["kinds"])
        and set(params.get("tags", ())) <= m.tags
        and ("query" not in params or m.words & (set(params["query"].split()) - {"the"}))
        and ("after" not in params or m.id < int(params["after"][1:]))
    ]
    return sorted((m.id for m in rows), reverse=True)


def check_call(client: DaemonClient, stored: dict[int, Stored], model: Grants, verb: str,
               params: dict[str, Any]) -> int:  # fmt: skip
    """Run one call and check it leaks nothing; returns the number of results."""
    if any(not model.space(s) for s in params.get("spaces", ())):
        with pytest.raises(HivememError) as caught:
            client.call(verb, **params)
        assert caught.value.code == "denied.read", (params, caught.value.code)
        return 0
    expected = expected_rows(stored, model, verb, params)
    answer = client.call(verb, **params)
    if verb == "memory.search":
        result, limit = answer["results"], params.get("limit", 10)
        assert [h["fts_rank"] for h in result] == list(range(1, len(result) + 1)), params
    else:
        result, limit = answer["memories"], params.get("limit", 50)
        assert [int(h["id"][1:]) for h in result] == expected[:limit], params
        assert answer["next"] == (f"m{expected[limit - 1]}" if len(expected) > limit else None)
    got = {int(h["id"][1:]) for h in result}
    assert got <= set(expected), (params, got - set(expected))
    assert len(result) == min(limit, len(expected)), params
    for hit in result:
        memory = stored[int(hit["id"][1:])]
        assert model.row(memory), hit
        assert hit["space"] == memory.space
    return len(result)


def test_randomized_no_leak_across_tokens_and_queries(home: Home, owner: DaemonClient) -> None:
    rng = random.Random(20240603)
    stored = fill(owner, rng)
    ids = sorted(stored)
    models: list[Grants] = []
    clients: list[DaemonClient] = []
    try:
        for index in range(5):
            grants, model = random_grants(rng, index, ids)
            token = owner.call("client.add", name=f"rand{index}", grants=grants)["token"]
            models.append(model)
            clients.append(home.client(token))
        readable = [frozenset(m.id for m in stored.values() if g.row(m)) for g in models]
        assert len(set(readable)) == 5  # five different views of the store
        assert sum(len(r) < len(stored) for r in readable) == 4  # all but `*` have hidden rows
        counted = [0, 0, 0]  # calls, denials, hits
        for _ in range(1200):
            which = rng.randrange(len(clients))
            verb, params = random_params(rng, ids)
            hits = check_call(clients[which], stored, models[which], verb, params)
            denied = any(not models[which].space(s) for s in params.get("spaces", ()))
            counted = [counted[0] + 1, counted[1] + denied, counted[2] + hits]
    finally:
        for client in clients:
            client.close()
    assert counted[0] >= 1000
    assert counted[1] > 50
    assert counted[2] > 1000
