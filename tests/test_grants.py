"""C06 grants (SPEC 4.3): who may read and write what, checked before any handler runs; unreadable
memories answer as absent and never show in search or list results or ranks. Includes the randomized
property test of issue 3: many tokens, many searches, no leaks."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import Home
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

DENIAL_KEYS = {"right", "resource", "principal", "fix"}


def fails(home: Home, *args: str, code: str, exit_code: int, token: str | None = "@owner") -> dict[str, Any]:
    """Run a --json command that must fail with `code`; return the error object."""
    result = home.cli(*args, "--json", token=token)
    assert result.code == exit_code, result
    error = result.json["error"]
    assert error["code"] == code, error
    assert set(error) == {"code", "message", "data"}
    return dict(error)


def add_client(home: Home, name: str, grants: list[tuple[str, str]]) -> str:
    body = json.dumps([{"right": r, "scope": s} for r, s in grants])
    token = home.ok("client", "add", "--name", name, "--grants", body)["token"]
    assert isinstance(token, str)
    return token


def add(home: Home, space: str, content: str, token: str = "@owner", *args: str) -> str:
    memory_id = home.ok("memory", "add", "--space", space, "--content", content, *args, token=token)["id"]
    assert isinstance(memory_id, str)
    return memory_id


def raises(client: DaemonClient, verb: str, **params: Any) -> HivememError:
    with pytest.raises(HivememError) as caught:
        client.call(verb, **params)
    return caught.value


def last_event_id(home: Home) -> int:
    result = home.cli("events", "--json", "--limit", "1")
    assert result.code == 0, result
    lines = [json.loads(line) for line in result.out.splitlines() if line.strip()]
    return int(lines[-1]["id"]) if lines else 0


def found(home: Home, query: str, *args: str, token: str | None = "@owner") -> list[dict[str, Any]]:
    results = home.ok("memory", "search", "--query", query, *args, token=token)["results"]
    assert isinstance(results, list)
    return results


def listed(home: Home, *args: str, token: str | None = "@owner") -> list[str]:
    return [m["id"] for m in home.ok("memory", "list", *args, token=token)["memories"]]


def counts(home: Home) -> dict[str, Any]:
    status = home.ok("store", "status")
    return {k: v for k, v in status.items() if k not in ("bytes",)}


# unknown


def test_unknown_reads_and_is_refused_writes_before_the_handler(home: Home) -> None:
    m1 = add(home, "user", "unknown may read this")
    assert [h["id"] for h in found(home, "unknown", token=None)] == [m1]
    assert home.ok("memory", "get", "--id", m1, token=None)["content"] == "unknown may read this"
    before, events = counts(home), last_event_id(home)
    error = fails(home, "memory", "add", "--space", "user", "--content", "qwzx unknown writes", code="denied.write",
                  exit_code=4, token=None)  # fmt: skip
    assert set(error["data"]) == DENIAL_KEYS
    assert error["data"]["right"] == "write"
    assert error["data"]["resource"] == "space:user"
    assert error["data"]["principal"] == "unknown"
    assert error["data"]["fix"]
    for args in (
        ("memory", "update", "--id", m1, "--revision", "1", "--content", "changed by unknown"),
        ("memory", "delete", "--id", m1, "--revision", "1"),
        ("session", "start", "--harness", "codex"),
    ):
        error = fails(home, *args, code="denied.write", exit_code=4, token=None)
        assert set(error["data"]) == DENIAL_KEYS
    fails(home, "memory", "purge", "--id", m1, code="denied.admin", exit_code=4, token=None)
    # params are validated before authorization: a bad space is invalid_params, not denied
    fails(home, "memory", "add", "--space", "Bad Space", "--content", "x", code="invalid_params.space", exit_code=2,
          token=None)  # fmt: skip
    assert counts(home) == before
    assert last_event_id(home) == events
    assert home.ok("memory", "get", "--id", m1)["content"] == "unknown may read this"
    assert found(home, "qwzx") == []


def test_write_on_one_space_is_refused_on_another(home: Home) -> None:
    token = add_client(home, "a-writer", [("read", "*"), ("write", "space:a")])
    m1 = add(home, "a", "in space a", token)
    m2 = add(home, "b", "in space b")
    home.ok("memory", "update", "--id", m1, "--revision", "1", "--content", "still in a", token=token)
    error = fails(home, "memory", "add", "--space", "b", "--content", "sneaking into b", code="denied.write",
                  exit_code=4, token=token)  # fmt: skip
    assert error["data"] == {**error["data"], "right": "write", "resource": "space:b", "principal": "g1"}
    error = fails(home, "memory", "update", "--id", m2, "--revision", "1", "--content", "x", code="denied.write",
                  exit_code=4, token=token)  # fmt: skip
    assert error["data"]["resource"] == f"memory:{m2}"
    fails(home, "memory", "delete", "--id", m2, "--revision", "1", code="denied.write", exit_code=4, token=token)
    fails(home, "memory", "add", "--space", "a/sub", "--content", "x", code="denied.write", exit_code=4, token=token)
    assert home.ok("memory", "get", "--id", m2)["revision"] == 1
    assert found(home, "sneaking") == []


def test_prefix_grant_covers_spaces_under_it_but_not_the_prefix(home: Home) -> None:
    token = add_client(home, "proj", [("read", "space:project/*"), ("write", "space:project/*")])
    inside = add(home, "project/x", "prefix covered alpha", token)
    deeper = add(home, "project/x/y", "prefix covered beta", token)
    for space in ("project", "projectx", "project-x", "other/project/x"):
        fails(home, "memory", "add", "--space", space, "--content", "prefix refused", code="denied.write",
              exit_code=4, token=token)  # fmt: skip
    bare = add(home, "project", "prefix covered gamma")
    near = add(home, "projectx", "prefix covered delta")
    assert {h["id"] for h in found(home, "prefix covered", token=token)} == {inside, deeper}
    assert set(listed(home, token=token)) == {inside, deeper}
    assert listed(home, "--spaces", "project/x", token=token) == [inside]
    for hidden in (bare, near):
        fails(home, "memory", "get", "--id", hidden, code="not_found.memory", exit_code=3, token=token)
    error = fails(home, "memory", "search", "--query", "prefix", "--spaces", "project", code="denied.read",
                  exit_code=4, token=token)  # fmt: skip
    assert error["data"]["resource"] == "space:project"
    spaces = home.ok("space", "list", token=token)["spaces"]
    assert [s["space"] for s in spaces] == ["project/x", "project/x/y"]


def test_explicit_unreadable_space_is_denied_read(home: Home) -> None:
    token = add_client(home, "reader", [("read", "space:a")])
    add(home, "a", "readable words here")
    add(home, "b", "hidden words here")
    for verb in (("memory", "search", "--query", "words"), ("memory", "list")):
        for spaces in ("b", "a,b", "nonexistent"):
            error = fails(home, *verb, "--spaces", spaces, code="denied.read", exit_code=4, token=token)
            assert set(error["data"]) == DENIAL_KEYS
            assert error["data"]["right"] == "read"
            assert "hidden" not in json.dumps(error)
    assert [h["space"] for h in found(home, "words", "--spaces", "a", token=token)] == ["a"]


def same_but_id(left: HivememError, right: HivememError, left_id: str, right_id: str) -> None:
    assert left.code == right.code
    assert left.message.replace(left_id, "<id>") == right.message.replace(right_id, "<id>")
    assert json.dumps(left.data).replace(left_id, "<id>") == json.dumps(right.data).replace(right_id, "<id>")


def test_a_memory_in_an_unreadable_space_answers_exactly_like_an_absent_one(home: Home) -> None:
    token = add_client(home, "reader", [("read", "space:a"), ("write", "space:a")])
    for i in range(12):
        add(home, "a" if i % 2 else "b", f"filler number {i}")
    hidden = add(home, "b", "hidden in b")  # m13
    absent = "m99"
    assert len(hidden) == len(absent)
    cli_hidden = fails(home, "memory", "get", "--id", hidden, code="not_found.memory", exit_code=3, token=token)
    cli_absent = fails(home, "memory", "get", "--id", absent, code="not_found.memory", exit_code=3, token=token)
    assert cli_hidden["message"].replace(hidden, "<id>") == cli_absent["message"].replace(absent, "<id>")
    assert json.dumps(cli_hidden["data"]).replace(hidden, "<id>") == json.dumps(cli_absent["data"]).replace(
        absent, "<id>"
    )
    client = home.client(token)
    try:
        for verb, extra in (
            ("memory.get", {}),
            ("memory.get", {"revision": 1}),
            ("memory.update", {"revision": 1, "content": "overwrite"}),
            ("memory.delete", {"revision": 1}),
            ("memory.restore", {}),
            ("memory.history", {}),
        ):
            left = raises(client, verb, id=hidden, **extra)
            right = raises(client, verb, id=absent, **extra)
            assert left.code == "not_found.memory", (verb, left.code)
            same_but_id(left, right, hidden, absent)
    finally:
        client.close()
    assert home.ok("memory", "get", "--id", hidden)["revision"] == 1


def test_memory_grants_give_access_to_that_memory_only(home: Home) -> None:
    m1 = add(home, "b", "selector alpha one")
    m2 = add(home, "b", "selector alpha two")
    m3 = add(home, "c", "selector alpha three")
    token = add_client(home, "picky", [("read", f"memory:{m2}"), ("read", f"memory:{m3}"), ("write", f"memory:{m3}")])
    assert home.ok("memory", "get", "--id", m2, token=token)["content"] == "selector alpha two"
    fails(home, "memory", "get", "--id", m1, code="not_found.memory", exit_code=3, token=token)
    results = found(home, "selector alpha", token=token)
    assert sorted(h["id"] for h in results) == sorted([m2, m3])
    assert sorted(h["fts_rank"] for h in results) == [1, 2]
    assert sorted(listed(home, token=token)) == sorted([m2, m3])
    fails(home, "memory", "update", "--id", m2, "--revision", "1", "--content", "x", code="denied.write", exit_code=4,
          token=token)  # fmt: skip
    home.ok("memory", "update", "--id", m3, "--revision", "1", "--content", "selector alpha three bis", token=token)
    assert home.ok("memory", "get", "--id", m3)["updated_by"] == {"principal": "g1", "label": "picky"}
    fails(home, "memory", "add", "--space", "c", "--content", "x", code="denied.write", exit_code=4, token=token)
    # a memory grant is not a grant on its space: naming the space is still denied
    fails(home, "memory", "list", "--spaces", "b", code="denied.read", exit_code=4, token=token)


def test_search_and_list_hide_unreadable_rows_and_ranks_have_no_gaps(home: Home) -> None:
    ids: dict[str, list[str]] = {"open": [], "shut": []}
    for i in range(8):
        for space in ("open", "shut"):
            words = "gap gap gap" if space == "shut" else "gap"  # hidden rows would outrank the readable ones
            ids[space].append(add(home, space, f"{words} ranking row {i} {space}"))
    token = add_client(home, "open-reader", [("read", "space:open")])
    results = found(home, "gap ranking", "--limit", "100", token=token)
    assert sorted(h["id"] for h in results) == sorted(ids["open"])
    assert [h["fts_rank"] for h in results] == list(range(1, 9))
    assert all(h["space"] == "open" for h in results)
    limited = found(home, "gap", "--limit", "3", token=token)
    assert [h["fts_rank"] for h in limited] == [1, 2, 3]
    page = home.ok("memory", "list", "--limit", "5", token=token)
    assert [m["id"] for m in page["memories"]] == sorted(ids["open"], key=lambda m: -int(m[1:]))[:5]
    rest = home.ok("memory", "list", "--limit", "5", "--after", page["next"], token=token)
    assert [m["id"] for m in rest["memories"]] == sorted(ids["open"], key=lambda m: -int(m[1:]))[5:]
    assert rest["next"] is None
    assert home.ok("space", "list", token=token)["spaces"][0]["space"] == "open"
    assert len(home.ok("space", "list", token=token)["spaces"]) == 1


def test_author_cannot_be_set_by_params(home: Home) -> None:
    token = add_client(home, "codex", [("read", "*"), ("write", "*")])
    client = home.client(token)
    try:
        for param, value in (("author", {"principal": "owner"}), ("updated_by", {"principal": "owner"}),
                             ("principal", "owner"), ("label", "owner")):  # fmt: skip
            error = raises(client, "memory.add", space="user", content="forged author", **{param: value})
            assert error.code == "invalid_params.unknown"
            assert error.data["param"] == param
        created = client.call("memory.add", space="user", content="honest author")
        error = raises(client, "memory.update", id=created["id"], revision=1, content="x", author={"principal": "g9"})
        assert (error.code, error.data["param"]) == ("invalid_params.unknown", "author")
    finally:
        client.close()
    assert found(home, "forged") == []
    fails(home, "memory", "add", "--space", "user", "--content", "x", "--author", "owner",
          code="invalid_params.usage", exit_code=2, token=token)  # fmt: skip
    memory = home.ok("memory", "get", "--id", created["id"])
    assert memory["author"] == memory["updated_by"] == {"principal": "g1", "label": "codex"}
    home.ok("memory", "update", "--id", created["id"], "--revision", "1", "--content", "honest, edited by owner")
    memory = home.ok("memory", "get", "--id", created["id"])
    assert memory["author"] == {"principal": "g1", "label": "codex"}
    assert memory["updated_by"] == {"principal": "owner", "label": "owner"}
    history = home.ok("memory", "history", "--id", created["id"])["versions"]
    assert [v["by"]["principal"] for v in history] == ["owner", "g1"]


def test_grants_unknown_empty_turns_unknown_off(home: Home) -> None:
    m1 = add(home, "user", "visible until config changes")
    assert [h["id"] for h in found(home, "visible", token=None)] == [m1]
    pid = home.daemon_pid()
    assert home.ok("config", "set", "--key", "grants.unknown", "--value", "[]") == {"key": "grants.unknown",
                                                                                    "value": []}  # fmt: skip
    assert home.daemon_pid() == pid
    assert found(home, "visible", token=None) == []
    assert listed(home, token=None) == []
    assert home.ok("space", "list", token=None)["spaces"] == []
    error = fails(home, "memory", "get", "--id", m1, code="not_found.memory", exit_code=3, token=None)
    assert error["data"] == {"id": m1}
    fails(home, "memory", "search", "--query", "visible", "--spaces", "user", code="denied.read", exit_code=4,
          token=None)  # fmt: skip
    assert home.ok("whoami", token=None) == {"principal": "unknown", "grants": []}
    assert [h["id"] for h in found(home, "visible")] == [m1]


# the randomized property test of issue 3

SPACES = ("project/a", "project/b", "user", "team/x", "agent/y")
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


def test_randomized_no_leak_across_tokens_and_queries(home: Home) -> None:
    rng = random.Random(20240603)
    home.ok("whoami")  # start the daemon through the CLI
    owner = home.client()
    stored: dict[int, Stored] = {}
    try:
        for space in SPACES:
            for i in range(10):
                words = rng.sample(VOCABULARY, rng.randint(2, 5))
                kind, tags = rng.choice(KINDS), rng.sample(TAGS, rng.randint(0, 2))
                content = " ".join(words) + f" item{len(stored)}"
                memory = owner.call("memory.add", space=space, content=content, kind=kind, tags=tags)
                n = int(memory["id"][1:])
                stored[n] = Stored(n, space, kind, frozenset(tags), frozenset(words))
        for n in rng.sample(sorted(stored), 4):  # deleted rows must never come back either
            owner.call("memory.delete", id=f"m{n}", revision=1)
            del stored[n]
        ids = sorted(stored)
        models: list[Grants] = []
        clients: list[DaemonClient] = []
        for index in range(5):
            grants, model = random_grants(rng, index, ids)
            token = owner.call("client.add", name=f"rand{index}", grants=grants)["token"]
            models.append(model)
            clients.append(home.client(token))
    finally:
        owner.close()
    calls = denied = hits = 0
    try:
        for _ in range(1200):
            which = rng.randrange(len(clients))
            client, model = clients[which], models[which]
            params: dict[str, Any] = {}
            if rng.random() < 0.4:
                params["spaces"] = rng.sample(SPACES, rng.randint(1, 3))
            if rng.random() < 0.3:
                params["kinds"] = rng.sample(KINDS, rng.randint(1, 2))
            if rng.random() < 0.3:
                params["tags"] = rng.sample(TAGS, 1)
            if rng.random() < 0.5:
                params["limit"] = rng.randint(1, 60)
            search = rng.random() < 0.6
            if search:
                words = rng.sample(VOCABULARY, rng.randint(1, 3))
                params["query"] = " ".join(words + (["the"] if rng.random() < 0.2 else []))
            elif rng.random() < 0.3:
                params["after"] = f"m{rng.choice(ids)}"
            calls += 1
            if any(not model.space(s) for s in params.get("spaces", ())):
                with pytest.raises(HivememError) as caught:
                    client.call("memory.search" if search else "memory.list", **params)
                assert caught.value.code == "denied.read", (which, params, caught.value.code)
                denied += 1
                continue
            expected = [
                m
                for m in stored.values()
                if model.row(m)
                and ("spaces" not in params or m.space in params["spaces"])
                and ("kinds" not in params or m.kind in params["kinds"])
                and set(params.get("tags", ())) <= m.tags
            ]
            if search:
                wanted = set(params["query"].split()) - {"the"}
                expected = [m for m in expected if m.words & wanted]
                result = client.call("memory.search", **params)["results"]
                limit = params.get("limit", 10)
                assert [h["fts_rank"] for h in result] == list(range(1, len(result) + 1)), (which, params)
            else:
                if "after" in params:
                    expected = [m for m in expected if m.id < int(params["after"][1:])]
                page = client.call("memory.list", **params)
                result = page["memories"]
                limit = params.get("limit", 50)
                newest = sorted((m.id for m in expected), reverse=True)
                assert [int(h["id"][1:]) for h in result] == newest[:limit], (which, params)
                assert page["next"] == (f"m{newest[limit - 1]}" if len(newest) > limit else None)
            got = {int(h["id"][1:]) for h in result}
            assert got <= {m.id for m in expected}, (which, params, got - {m.id for m in expected})
            assert len(result) == min(limit, len(expected)), (which, params)
            for hit in result:
                memory = stored[int(hit["id"][1:])]
                assert model.row(memory), (which, hit)
                assert hit["space"] == memory.space
            hits += len(result)
    finally:
        for client in clients:
            client.close()
    assert calls >= 1000
    assert denied > 50
    assert hits > 1000
