"""Typed results: every verb's real result, from a real daemon, matches the shape the manifest declares for it
(records.py), which is also the MCP outputSchema and the docs."""

from __future__ import annotations

import os
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.validators import extend

from conftest import Home, client_token, wait_for
from embedstub import running
from hivemem import records, schemas
from hivemem.client import DaemonClient
from hivemem.manifest import VERBS

# The published schemas are checked by jsonschema (docs/decisions.md D348). JSON's integer is Python's int here:
# a float such as 1.0 is not one on this wire, though JSON Schema itself would take it.
STRICT = extend(Draft202012Validator, type_checker=Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)))  # fmt: skip


def problems(value: Any, schema: schemas.Schema, where: str = "") -> list[str]:
    """Where `value` breaks `schema`, a valid JSON Schema; [] when it conforms."""
    Draft202012Validator.check_schema(schema)
    return [f"{where}/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in STRICT(schema).iter_errors(value)]


def check(verb: str, result: dict[str, Any], seen: dict[str, int]) -> dict[str, Any]:
    shape = next(v.result for v in VERBS if v.name == verb)
    assert problems(result, schemas.json_schema(shape), verb) == []
    seen[verb] = seen.get(verb, 0) + 1
    return result


def test_the_checker_fails_on_a_wrong_shape() -> None:
    written = schemas.json_schema(records.Written)
    assert problems({"id": "m1", "revision": 1, "changed": True}, written) == []
    assert problems({"id": "m1", "revision": "1", "changed": True}, written) != []
    assert problems({"id": "m1", "revision": 1}, written) != []
    assert problems({"id": "m1", "revision": 1, "changed": True, "extra": 1}, written) != []
    assert problems({"id": "m1", "revision": True, "changed": True}, written) != []
    assert problems({"id": "m1", "revision": 1.0, "changed": True}, written) != []
    hit = schemas.json_schema(records.SearchResult)
    assert problems({"mode": "fts", "results": [{"id": "m1"}]}, hit) != []  # a nested shape is checked too


def test_every_shape_member_has_a_type_the_schema_knows() -> None:
    for shape in records.SHAPES.values():
        assert schemas.json_schema(shape)["type"] == "object"
    assert {v.result for v in VERBS} <= set(records.SHAPES.values())


def test_every_verb_returns_its_declared_shape(home: Home, owner: DaemonClient) -> None:
    seen: dict[str, int] = {}

    def call(verb: str, **params: Any) -> dict[str, Any]:
        return check(verb, owner.call(verb, **params), seen)

    session = call("session.start", harness="claude-code", harness_session="r1", cwd=home.base)["session"]
    child = call("session.start", harness="claude-code", parent=session, relation="fork")["session"]
    first = call("memory.add", space="user", content="records have shapes", title="shapes", tags=["typed"],
                 session=session, provenance={"kind": "cli"}, review_after="2020-01-01T00:00:00Z")  # fmt: skip
    second = call("memory.add", space="project/app", content="shapes are checked", kind="decision")
    call("memory.add", space="user", content="records have shapes")  # an unchanged duplicate
    call("memory.update", id=first["id"], revision=1, content="records have typed shapes")
    call("memory.get", id=first["id"])
    call("memory.get", id=first["id"], revision=1)
    call("memory.history", id=first["id"])
    call("memory.list", spaces=["user"])
    call("memory.search", query="shapes", spaces=["user", "project/app"], record_usage=True)
    call("memory.recall", spaces=["user"], query="shapes")
    call("memory.delete", id=second["id"], revision=1)
    call("memory.restore", id=second["id"])
    draft = call("memory.capture", space="user", content="a captured draft about shapes")
    call("memory.capture", space="user", content="A captured draft, about shapes!")  # its exact duplicate
    call("memory.confirm", id=draft["id"], revision=1)
    call("memory.review", spaces=["user"])
    call("memory.hygiene")
    call("memory.challenge", id=draft["id"], revision=2, outcome="stale")  # a preview
    call("memory.challenge", id=draft["id"], revision=2, outcome="needs_review")
    call("memory.relate", source=first["id"], target=draft["id"], relation="related", reason="both on shapes")
    call("memory.unrelate", source=first["id"], target=draft["id"], relation="related")
    call("memory.archive", id=draft["id"], revision=3)
    call("memory.audit", id=draft["id"])
    call("memory.move", id=second["id"], revision=3, space="project/other")
    call("memory.forget", spaces=["project/app"], dry_run=True)
    call("memory.forget", spaces=["project/app"])
    call("memory.get", id=second["id"], include_deleted=True)
    call("space.list")
    call("store.status")
    call("whoami")
    token = client_token(owner, "reader", [("read", "space:user")])
    reader = DaemonClient(owner.config, token=token)
    try:
        check("whoami", reader.call("whoami"), seen)
        check("store.status", reader.call("store.status"), seen)
    finally:
        reader.close()
    call("client.add", name="writer", grants=[{"right": "write", "scope": "space:user"}], ttl=3600)
    call("client.list")
    call("client.remove", name="writer")
    call("session.get", session=child)
    call("session.list")
    call("session.chain", session=child)
    call("session.end", session=child)
    call("session.end", session=child)  # already ended
    call("session.purge", session=child)
    call("events.list", limit=200)
    follower = DaemonClient(owner.config, token="@owner")
    try:
        check("events.follow", follower.connect().request("events.follow", {}), seen)
    finally:
        follower.close()
    call("config.reload")
    exported = call("store.export", path=os.path.join(home.base, "records-export.json"))
    call("store.import", path=exported["path"], dry_run=True)
    call("store.import", path=exported["path"], space_map={"user": "team/records"})
    call("store.check")
    call("store.repair_fts")
    call("store.repair_fts", apply=True, confirm=True)
    call("store.backup", path=os.path.join(home.base, "records-backup.db"))
    call("memory.purge", id=first["id"])
    call("daemon.stop")
    with running() as stub:  # the same verbs with embeddings on, and the verb that needs them
        home.config(stub.config())
        home.ok("whoami")
        embedded = home.client()
        try:
            embedded.call("memory.add", space="user", content="vectors of shapes")

            def settled() -> bool:
                state = check("store.status", embedded.call("store.status"), seen)
                return bool(state["pending"] == 0 and state["vectors"] > 0)

            assert wait_for(settled), "every memory embedded"
            found = check("memory.search", embedded.call("memory.search", query="shapes", spaces=["user"]), seen)
            assert found["mode"] == "hybrid" and any("vector_rank" in h for h in found["results"])
            got = check("memory.get", embedded.call("memory.get", id=found["results"][0]["id"]), seen)
            assert got["embedding"] == "ready"
            check("memory.recall", embedded.call("memory.recall", spaces=["user"], query="shapes"), seen)
            check("memory.hygiene", embedded.call("memory.hygiene"), seen)
            check("embeddings.reindex", embedded.call("embeddings.reindex"), seen)
        finally:
            embedded.close()
    assert sorted(seen) == sorted(v.name for v in VERBS), "every verb's result is checked"


def test_cli_table_columns_name_members_of_their_records() -> None:
    for name, cols in records.COLUMNS.items():
        members = records.fields(records.SHAPES[name])
        assert [m for _, m in cols if m and m not in members] == [], name
    tabled = {v.name: records.table_member(v.result) for v in VERBS}
    assert tabled["memory.search"] == ("results", records.SearchHit)
    assert tabled["memory.history"] == ("versions", records.VersionEntry)
    assert tabled["store.status"] is None


def test_human_output_is_a_table_with_the_declared_columns(home: Home, owner: DaemonClient) -> None:
    owner.call("memory.add", space="user", content="tables come from records", title="tables")
    printed = home.cli("memory", "list", "--spaces", "user").out.splitlines()
    assert printed[0].split() == [h for h, _ in records.COLUMNS["Hit"]]
    assert printed[1].split()[:4] == ["m1", "r1", "user", "note"] and "tables: tables come from records" in printed[1]
    history = home.cli("memory", "history", "--id", "m1").out.splitlines()
    assert history[0].split() == ["REV", "ACTION", "BY", "TIME", "SIZE"] and history[1].split()[:3] == [
        "r1",
        "add",
        "owner",
    ]
