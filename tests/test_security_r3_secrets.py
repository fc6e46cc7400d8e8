"""Security round 3, the secret scan: space names are scanned like every other stored string (docs/security.md,
"Secrets"). Every secret-shaped value is generated at run time (secret_corpus.py)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from conftest import Home
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from secret_corpus import SHAPES, Gen

CODE = "invalid_params.secret_content"


def space_shaped() -> dict[str, str]:
    """Credentials that are valid space names (lowercase, digits, `.`, `-`, `_`): the three an attacker stored."""
    g = Gen(2611)
    token = SHAPES["hivemem-client-token"](g).lower()
    gitlab = ("glpat-" + g.pick("abcdefghijklmnopqrstuvwxyz0123456789", 20)).lower()
    return {"mailchimp": SHAPES["mailchimp"](g), "hivemem-token": token, "gitlab": gitlab}


def refused(client: DaemonClient, verb: str, **params: Any) -> HivememError:
    with pytest.raises(HivememError) as caught:
        client.call(verb, **params)
    return caught.value


def check(error: HivememError, value: str, param: str) -> None:
    assert (error.code, error.data.get("param")) == (CODE, param), (error.code, error.data)
    assert value not in error.message + json.dumps(error.data)


def test_item11_space_names_are_scanned_in_add_capture_and_move(home: Home, owner: DaemonClient) -> None:
    moved = owner.call("memory.add", space="user", content="a memory to move")
    for name, value in space_shaped().items():
        check(refused(owner, "memory.add", space=value, content=f"stored in a {name} space"), value, "space")
        check(refused(owner, "memory.capture", space=value, content=f"inferred in a {name} space"), value, "space")
        check(refused(owner, "memory.move", id=moved["id"], revision=1, space=value), value, "space")
    cli = home.cli("memory", "add", "--space", space_shaped()["gitlab"], "--content", "on the command line", "--json")
    assert (cli.code, cli.json["error"]["code"]) == (2, CODE)
    spaces = [s["space"] for s in owner.call("space.list")["spaces"]]
    assert spaces == ["user"] and owner.call("store.status")["memories"] == 1
    # the scan looks at the name only: an ordinary name still works in each verb
    assert owner.call("memory.move", id=moved["id"], revision=1, space="team/platform-2")["id"]
    assert owner.call("memory.capture", space="team/platform-2", content="an ordinary draft")["id"]


def test_item11_space_names_in_grant_scopes_and_client_names_are_scanned(owner: DaemonClient) -> None:
    for name, value in space_shaped().items():
        grants = [{"right": "read", "scope": f"space:{value}"}]
        check(refused(owner, "client.add", name=f"agent-{name}", grants=grants), value, "grants")
        if len(value) <= 64 and value.replace("-", "").isalnum():  # a key that is also a valid client name
            check(refused(owner, "client.add", name=value, grants=[{"right": "read", "scope": "*"}]), value, "name")
    assert owner.call("client.list")["clients"] == []
    assert owner.call("client.add", name="agent-2", grants=[{"right": "read", "scope": "space:team/platform-2"}])


def test_item11_space_names_in_an_import_are_scanned(home: Home, owner: DaemonClient) -> None:
    owner.call("memory.add", space="user", content="one memory to carry over")
    path = os.path.join(home.base, "out.json")
    owner.call("store.export", path=path)
    for name, value in space_shaped().items():
        error = refused(owner, "store.import", path=path, space_map={"user": value})
        check(error, value, "space_map")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc["memories"][0]["space"] = value  # the document's own space name
        crafted = os.path.join(home.base, f"crafted-{name}.json")
        with open(crafted, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        error = refused(owner, "store.import", path=crafted)
        assert (error.code, error.data.get("at")) == (CODE, "/memories/0/space"), (error.code, error.data)
        assert value not in error.message + json.dumps(error.data)
    assert [s["space"] for s in owner.call("space.list")["spaces"]] == ["user"]
    assert owner.call("store.status")["memories"] == 1
    assert owner.call("store.import", path=path, space_map={"user": "carried"})["applied"]


def test_item11_a_space_names_scan_is_remembered_for_names_only() -> None:
    """The scan of a space name is cached (D365): a secret stays refused however often it comes, and a value
    longer than a name, which may be anything since the grammar check comes after, is scanned without a copy."""
    from hivemem import params

    value = space_shaped()["gitlab"]
    first, again = params.name_scan(value), params.name_scan(value)
    assert first is not None and again == first
    assert params._remembered_scan.cache_info().hits >= 1
    kept = params._remembered_scan.cache_info().currsize
    long = "x" * params.NAME_CACHE_CHARS + " " + value
    assert params.name_scan(long) is not None
    assert params._remembered_scan.cache_info().currsize == kept
    assert params.name_scan("team/platform") is None
