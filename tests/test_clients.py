"""C09 clients (docs/security.md): tokens, grants validation, list, remove, expiry, restarts, whoami."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from conftest import Home, fails, wait_for
from hivemem.errors import HivememError

TOKEN = re.compile(r"^hm1\.(g[1-9][0-9]*)\.([A-Za-z0-9_-]{43})$")
TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
READ_ALL = [{"right": "read", "scope": "*"}]
EVERYTHING = [{"right": "read", "scope": "*"}, {"right": "write", "scope": "*"}]


def add_client(home: Home, name: str, grants: list[dict[str, str]] | None = None, *args: str) -> dict[str, Any]:
    result = home.ok("client", "add", "--name", name, "--grants", json.dumps(grants or READ_ALL), *args)
    assert isinstance(result, dict)
    return result


def listed(home: Home) -> list[dict[str, Any]]:
    clients = home.ok("client", "list")["clients"]
    assert isinstance(clients, list)
    return clients


def token_error(home: Home, token: str, verb: str = "whoami", **params: Any) -> HivememError:
    """The error a fresh connection with `token` gets for `verb` (it must fail)."""
    client = home.client(token)
    try:
        with pytest.raises(HivememError) as caught:
            client.call(verb, **params)
        return caught.value
    finally:
        client.close()


def refused(home: Home, token: str) -> str | None:
    """The denied.token reason for `token`, or None when the hello succeeds."""
    client = home.client(token)
    try:
        client.call("whoami")
        return None
    except HivememError as exc:
        assert exc.code == "denied.token", exc.code
        return str(exc.data["reason"])
    finally:
        client.close()


def keys_of(value: Any) -> set[str]:
    """Every object key anywhere in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


# client.add


def test_add_returns_client_principal_token_and_no_expiry(home: Home) -> None:
    grants = [{"right": "read", "scope": "*"}, {"right": "write", "scope": "space:project/*"}]
    added = add_client(home, "codex", grants)
    assert set(added) == {"client", "principal", "token", "expires"}
    assert (added["client"], added["principal"], added["expires"]) == ("codex", "g1", None)
    match = TOKEN.match(added["token"])
    assert match is not None, added["token"]
    assert match.group(1) == "g1"
    who = home.ok("whoami", token=added["token"])
    assert who == {"principal": "g1", "label": "codex", "grants": grants}


def test_ttl_sets_expires_and_an_expired_token_is_denied(home: Home) -> None:
    long = add_client(home, "long", READ_ALL, "--ttl", "3600")
    assert TS.match(long["expires"]), long
    left = datetime.fromisoformat(long["expires"].replace("Z", "+00:00")) - datetime.now(UTC)
    assert 3500 < left.total_seconds() <= 3600
    short = add_client(home, "short", READ_ALL, "--ttl", "1")
    assert TS.match(short["expires"]), short
    assert [c["expires"] for c in listed(home)] == [long["expires"], short["expires"]]
    assert wait_for(lambda: refused(home, short["token"]) == "expired", 10)
    error = fails(home, "memory", "search", "--query", "anything", code="denied.token", exit_code=4,
                  token=short["token"])  # fmt: skip
    assert error["data"]["reason"] == "expired"
    assert refused(home, long["token"]) is None
    fails(home, "client", "add", "--name", "zero", "--grants", json.dumps(READ_ALL), "--ttl", "0",
          code="invalid_params.range", exit_code=2)  # fmt: skip


def test_principal_numbers_increase_and_are_never_reused(home: Home) -> None:
    assert add_client(home, "a")["principal"] == "g1"
    owner = home.client()
    try:
        assert owner.call("client.add", name="b", grants=READ_ALL)["principal"] == "g2"
        assert owner.call("client.remove", name="b") == {"client": "b", "principal": "g2"}
        assert owner.call("client.add", name="c", grants=READ_ALL)["principal"] == "g3"
        owner.call("client.remove", name="a")
        owner.call("client.remove", name="c")
        assert owner.call("client.list") == {"clients": [], "next": None}
        assert owner.call("client.add", name="b", grants=READ_ALL)["principal"] == "g4"
    finally:
        owner.close()
    home.stop_daemon()
    assert add_client(home, "a")["principal"] == "g5"
    fails(home, "client", "remove", "--name", "nobody", code="not_found.client", exit_code=3)


def test_list_shows_metadata_and_never_a_hash_or_token(home: Home) -> None:
    first = add_client(home, "codex", EVERYTHING)
    second = add_client(home, "claude-code", [{"right": "read", "scope": "space:user"}], "--ttl", "600")
    clients = listed(home)
    assert [c["name"] for c in clients] == ["codex", "claude-code"]
    for client, added, grants in ((clients[0], first, EVERYTHING), (clients[1], second, None)):
        assert set(client) == {"name", "principal", "grants", "created", "expires"}
        assert client["principal"] == added["principal"]
        assert client["expires"] == added["expires"]
        assert TS.match(client["created"])
        if grants is not None:
            assert client["grants"] == grants
    assert clients[1]["grants"] == [{"right": "read", "scope": "space:user"}]
    assert not [k for k in keys_of(clients) if "hash" in k.lower() or "token" in k.lower()]
    raw = home.cli("client", "list", "--json")
    human = home.cli("client", "list")
    assert raw.code == 0 and human.code == 0
    assert "codex" in human.out and "claude-code" in human.out
    for added in (first, second):
        secret = added["token"].rsplit(".", 1)[1]
        for text in (raw.out, raw.err, human.out, human.err):
            assert secret not in text
            assert added["token"] not in text


def test_token_works_across_restarts_and_removal_is_revoked_across_restarts(home: Home) -> None:
    token = add_client(home, "codex", EVERYTHING)["token"]
    added = home.ok("memory", "add", "--space", "user", "--content", "written by codex", token=token)
    first = home.daemon_pid()
    home.stop_daemon()
    assert home.daemon_pid() is None
    assert home.ok("memory", "get", "--id", added["id"], token=token)["content"] == "written by codex"
    client = home.client(token)
    try:
        assert client.call("whoami")["principal"] == "g1"
        assert client.hello["principal"] == "g1"
        assert client.hello["label"] == "codex"
    finally:
        client.close()
    assert home.daemon_pid() not in (None, first)
    assert home.ok("client", "remove", "--name", "codex") == {"client": "codex", "principal": "g1"}
    error = fails(home, "memory", "get", "--id", added["id"], code="denied.token", exit_code=4, token=token)
    assert error["data"]["reason"] == "revoked"
    home.stop_daemon()
    error = fails(home, "whoami", code="denied.token", exit_code=4, token=token)
    assert error["data"]["reason"] == "revoked"
    assert refused(home, token) == "revoked"
    memory = home.ok("memory", "get", "--id", added["id"])
    assert memory["author"] == {"principal": "g1", "label": "codex"}


def test_removal_also_cuts_off_a_connection_already_open(home: Home) -> None:
    token = add_client(home, "codex", EVERYTHING)["token"]
    client = home.client(token)
    try:
        assert client.call("whoami")["principal"] == "g1"
        home.ok("client", "remove", "--name", "codex")
        with pytest.raises(HivememError) as caught:
            client.call("memory.add", space="user", content="written after removal")
        assert caught.value.code == "denied.token"
    finally:
        client.close()


def test_client_verbs_as_a_client_or_unknown_are_denied_admin(home: Home) -> None:
    token = add_client(home, "codex", EVERYTHING)["token"]
    for who in (token, None):
        error = fails(home, "client", "add", "--name", "sneaky", "--grants", json.dumps(EVERYTHING),
                      code="denied.admin", exit_code=4, token=who)  # fmt: skip
        assert error["data"]["right"] == "admin"
        assert set(error["data"]) == {"right", "resource", "principal", "fix"}
        fails(home, "client", "list", code="denied.admin", exit_code=4, token=who)
        fails(home, "client", "remove", "--name", "codex", code="denied.admin", exit_code=4, token=who)
    assert [c["name"] for c in listed(home)] == ["codex"]
    assert refused(home, token) is None


def test_rights_beyond_read_and_write_are_refused_and_nothing_is_created(home: Home) -> None:
    add_client(home, "first")
    before = listed(home)
    owner = home.client()
    try:
        events = owner.call("events.list", limit=1000)
        for right in ("spawn", "admin", "READ", "", "read,write", "*"):
            grants = [{"right": "read", "scope": "*"}, {"right": right, "scope": "*"}]
            if right in ("spawn", "admin"):
                error = fails(home, "client", "add", "--name", "second", "--grants", json.dumps(grants),
                              code="invalid_params.client_right", exit_code=2)  # fmt: skip
                assert error["data"]["param"] == "grants"
            with pytest.raises(HivememError) as caught:
                owner.call("client.add", name="second", grants=grants)
            assert (caught.value.code, caught.value.data["param"]) == ("invalid_params.client_right", "grants")
        assert owner.call("client.list")["clients"] == before
        assert owner.call("events.list", limit=1000) == events
    finally:
        owner.close()
    assert add_client(home, "third")["principal"] == "g2"


BAD_GRANTS = [
    ('[{"right":"read","scope":"space:../x"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"space:a/*/b"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"space:*"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"space:"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"space:Upper"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"spaces:x"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"memory:x1"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"memory:m0"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"session:s0"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":"**"}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":""}]', "invalid_params.grant_scope"),
    ('[{"right":"read","scope":5}]', None),
    ('[{"right":"read","scope":null}]', None),
    ('[{"right":"read"}]', None),
    ('[{"right":"read","scope":"*","extra":1}]', None),
    ('[["read","*"]]', None),
    ('["read:*"]', None),
    ('{"right":"read","scope":"*"}', None),
    ("read", None),
]


def test_bad_grants_are_refused_with_exit_2_and_nothing_created(home: Home) -> None:
    add_client(home, "first")
    before = listed(home)
    through_cli = {'[{"right":"read","scope":"space:../x"}]', '[{"right":"read","scope":"space:*"}]',
                   '[{"right":"read","scope":"session:s0"}]', '[{"right":"read"}]', '["read:*"]',
                   '{"right":"read","scope":"*"}', "read"}  # fmt: skip
    owner = home.client()
    try:
        for grants, code in BAD_GRANTS:
            codes = (code,) if code else ("invalid_params.grant_scope", "invalid_params.type")
            if grants in through_cli:
                result = home.cli("client", "add", "--name", "second", "--grants", grants, "--json")
                assert result.code == 2, (grants, result)
                error = result.json["error"]
                assert error["code"] in codes, (grants, error)
                assert error["data"]["param"] == "grants"
            try:
                value = json.loads(grants)
            except ValueError:
                continue
            with pytest.raises(HivememError) as caught:
                owner.call("client.add", name="second", grants=value)
            assert caught.value.code in codes, (grants, caught.value.code)
            assert caught.value.data["param"] == "grants"
        for value in ("*", 5, [{"right": "read", "scope": 1.5}], [None], [{"right": "read", "scope": ["*"]}]):
            with pytest.raises(HivememError) as caught:
                owner.call("client.add", name="second", grants=value)
            assert caught.value.code in ("invalid_params.type", "invalid_params.grant_scope"), value
            assert caught.value.data["param"] == "grants"
        assert owner.call("client.list")["clients"] == before
    finally:
        owner.close()
    assert add_client(home, "third")["principal"] == "g2"


def test_good_selectors_are_accepted(home: Home) -> None:
    grants = [{"right": r, "scope": s} for r in ("read", "write")
              for s in ("*", "space:user", "space:project/*", "space:a.b/c_d-e", "memory:m7", "session:s3",
                        "session:*")]  # fmt: skip
    added = add_client(home, "wide", grants)
    assert listed(home)[0]["grants"] == grants
    assert home.ok("whoami", token=added["token"])["grants"] == grants


def test_duplicate_name_is_a_conflict_and_keeps_the_old_token(home: Home) -> None:
    first = add_client(home, "codex")
    error = fails(home, "client", "add", "--name", "codex", "--grants", json.dumps(EVERYTHING),
                  code="conflict.client_exists", exit_code=5)  # fmt: skip
    assert error["data"]["client"] == "codex"
    assert [(c["name"], c["principal"], c["grants"]) for c in listed(home)] == [("codex", "g1", READ_ALL)]
    assert refused(home, first["token"]) is None
    assert add_client(home, "other")["principal"] == "g2"


def test_malformed_and_wrong_tokens_are_invalid_and_never_unknown(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "readable by unknown")
    token = add_client(home, "codex")["token"]
    secret = token.rsplit(".", 1)[1]
    other = "A" * 43 if secret != "A" * 43 else "B" * 43
    bad = [
        "hm1.g1.",
        "hm1.g1",
        "hm2.g1." + secret,
        "HM1.g1." + secret,
        "hm1.g1." + secret[:42],
        "hm1.g1." + secret + "A",
        "hm1.g1." + secret[:42] + "+",
        "hm1.g1." + secret[:42] + "=",
        "hm1.g1." + secret[:21] + "." + secret[22:],
        " " + token,
        token + "\n",
        "hm1.g01." + secret,
        "hm1.g0." + secret,
        "hm1.x1." + secret,
        "hm1.g1." + other,
        "hm1.g99." + secret,
        "hm1.owner." + secret,
        "owner",
        "garbage",
    ]
    for wrong in bad:
        for verb, params in (("whoami", {}), ("memory.search", {"query": "readable"}), ("memory.get", {"id": "m1"})):
            error = token_error(home, wrong, verb, **params)
            assert error.code == "denied.token", (wrong, verb, error.code)
            assert error.data["reason"] == "invalid", (wrong, error.data)
    for wrong in ("hm1.g1.", "hm1.g1." + other, "hm1.g1." + secret[:42]):
        shown = fails(home, "memory", "search", "--query", "readable", code="denied.token", exit_code=4, token=wrong)
        assert shown["data"]["reason"] == "invalid"
        assert "readable by unknown" not in json.dumps(shown)
    assert refused(home, token) is None


def test_whoami_for_owner_client_and_unknown(home: Home) -> None:
    owner = home.ok("whoami")
    assert owner["principal"] == "owner"
    assert owner["label"] == "owner"
    assert sorted((g["right"], g["scope"]) for g in owner["grants"]) == [("admin", "*"), ("read", "*"), ("write", "*")]
    grants = [{"right": "read", "scope": "space:user"}, {"right": "write", "scope": "session:*"}]
    token = add_client(home, "codex", grants)["token"]
    assert home.ok("whoami", token=token) == {"principal": "g1", "label": "codex", "grants": grants}
    assert home.ok("whoami", token=None) == {"principal": "unknown", "grants": READ_ALL}
    human = home.cli("whoami", token=token)
    assert human.code == 0
    assert "g1" in human.out and "codex" in human.out and "space:user" in human.out
