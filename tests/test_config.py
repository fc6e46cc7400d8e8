"""Config (docs/operations.md, D27, D28): `config get` and `config set` work on the file, never start the
daemon; set is the owner's, validates, writes 0600 and reloads a running daemon; a bad file is
`invalid_params.config` naming the key."""

from __future__ import annotations

import os
import stat
import tomllib
from typing import TYPE_CHECKING

import pytest

from conftest import Home, fails
from hivemem.config import SETTINGS
from hivemem.errors import HivememError

if TYPE_CHECKING:
    from hivemem.config import Value


def config_bytes(home: Home) -> bytes | None:
    try:
        with open(home.paths.config, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def no_daemon(home: Home) -> bool:
    return home.daemon_pid() is None and not os.path.exists(home.paths.socket)


def test_get_works_without_a_daemon_and_never_starts_one(home: Home) -> None:
    values = home.ok("config", "get")
    assert list(values) == [s.key for s in SETTINGS]
    assert values["daemon.idle_timeout_ms"] == 300000
    assert values["grants.unknown"] == [{"right": "read", "scope": "*"}]
    assert values["governance.review_days"] == {"decision": 180, "task": 7}
    assert home.ok("config", "get", "--key", "memory.max_versions") == {"key": "memory.max_versions", "value": 20}
    error = fails(home, "config", "get", "--key", "memory.nope", code="invalid_params.config", exit_code=2)
    assert error["data"]["key"] == "memory.nope"
    home.config('[memory]\nmax_versions = 7\n[recall]\nteam_spaces = ["team/x"]\n')
    assert home.ok("config", "get", "--key", "memory.max_versions", token=None)["value"] == 7
    assert home.ok("config", "get", token=None)["recall.team_spaces"] == ["team/x"]
    human = home.cli("config", "get")
    assert human.code == 0 and "memory.max_versions" in human.out
    assert no_daemon(home)
    assert not os.path.exists(home.paths.store)


def test_set_as_owner_validates_writes_0600_and_reloads_the_daemon(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "readable by unknown at first")
    pid = home.daemon_pid()
    assert pid is not None
    assert home.ok("config", "set", "--key", "grants.unknown", "--value", "[]") == {"key": "grants.unknown",
                                                                                    "value": []}  # fmt: skip
    assert stat.S_IMODE(os.stat(home.paths.config).st_mode) == 0o600
    with open(home.paths.config, "rb") as f:
        assert tomllib.load(f) == {"grants": {"unknown": []}}
    assert home.daemon_pid() == pid
    assert home.ok("memory", "search", "--query", "readable", token=None)["results"] == []
    value = '[{ right = "read", scope = "space:user" }]'
    assert home.ok("config", "set", "--key", "grants.unknown", "--value", value)["value"] == [
        {"right": "read", "scope": "space:user"}
    ]
    assert len(home.ok("memory", "search", "--query", "readable", token=None)["results"]) == 1
    startup = home.ok("config", "set", "--key", "daemon.startup", "--value", "explicit")
    assert startup == {"key": "daemon.startup", "value": "explicit"}
    assert home.ok("config", "set", "--key", "memory.max_versions", "--value", "5")["value"] == 5
    assert home.ok("config", "get", "--key", "grants.unknown")["value"] == [{"right": "read", "scope": "space:user"}]
    with open(home.paths.config, "rb") as f:
        assert tomllib.load(f) == {
            "grants": {"unknown": [{"right": "read", "scope": "space:user"}]},
            "daemon": {"startup": "explicit"},
            "memory": {"max_versions": 5},
        }
    assert home.daemon_pid() == pid
    assert stat.S_IMODE(os.stat(home.paths.config).st_mode) == 0o600


def test_set_with_no_daemon_running_writes_the_file_and_starts_nothing(home: Home) -> None:
    home.ok("whoami")  # the first start creates the owner key
    home.stop_daemon()
    assert home.ok("config", "set", "--key", "daemon.idle_timeout_ms", "--value", "1000")["value"] == 1000
    assert no_daemon(home)
    assert home.ok("config", "get", "--key", "daemon.idle_timeout_ms")["value"] == 1000


def test_set_without_the_owner_token_is_denied_and_changes_nothing(home: Home) -> None:
    home.config("[memory]\nmax_versions = 9\n")
    token = home.ok("client", "add", "--name", "codex", "--grants", '[{"right":"read","scope":"*"}]')["token"]
    before = config_bytes(home)
    for who in (None, token, "hm1.owner." + "A" * 43):
        error = fails(home, "config", "set", "--key", "grants.unknown", "--value", "[]", code="denied.admin",
                      exit_code=4, token=who)  # fmt: skip
        assert error["data"]["right"] == "admin"
        assert config_bytes(home) == before
    assert home.ok("config", "get", "--key", "grants.unknown")["value"] == [{"right": "read", "scope": "*"}]


BAD_SETTINGS = [
    ("memory.nope", "1"),
    ("nosection.key", "1"),
    ("daemon", "1"),
    ("daemon.idle_timeout_ms", "5"),
    ("daemon.idle_timeout_ms", "86400001"),
    ("daemon.idle_timeout_ms", "abc"),
    ("daemon.idle_timeout_ms", "true"),
    ("daemon.startup", "sometimes"),
    ("grants.unknown", '[{ right = "admin", scope = "*" }]'),
    ("grants.unknown", '[{ right = "read", scope = "space:*" }]'),
    ("grants.unknown", '"*"'),
    ("recall.team_spaces", '["Not A Space"]'),
    ("store.path", "relative/store.db"),
    ("governance.review_days", "{ decision = 0 }"),
    ("store.url", "mysql://db.example.com/hivemem"),  # a team store's URL is PostgreSQL's, or libpq's key=value
    ("store.url", "db.example.com"),
]


def test_bad_key_or_value_is_refused_and_the_file_is_unchanged(home: Home) -> None:
    home.config("[memory]\nmax_versions = 9\n")
    before = config_bytes(home)
    home.ok("whoami")
    for key, value in BAD_SETTINGS:
        error = fails(home, "config", "set", "--key", key, "--value", value, code="invalid_params.config",
                      exit_code=2)  # fmt: skip
        assert error["data"]["key"] == key, (key, value, error)
        assert config_bytes(home) == before


BAD_FILES = [
    ("[daemon\nidle_timeout_ms = 1000\n", ""),
    ("[daemon]\nidle_timeout_ms = 1000\nidle_timeout_ms = 2000\n", ""),
    ("[daemon]\nnot_a_setting = 1\n", "daemon.not_a_setting"),
    ('[daemon]\nidle_timeout_ms = "soon"\n', "daemon.idle_timeout_ms"),
    ("[daemon]\nidle_timeout_ms = 10\n", "daemon.idle_timeout_ms"),
    ('[grants]\nunknown = [{ right = "write", scope = "nowhere" }]\n', "grants.unknown"),
    ("daemon = 5\n", "daemon"),
]


def test_a_hand_written_invalid_file_fails_the_next_call_and_no_daemon_starts(home: Home) -> None:
    for text, key in BAD_FILES:
        home.config(text)
        error = fails(home, "memory", "search", "--query", "x", code="invalid_params.config", exit_code=2, token=None)
        assert error["data"]["key"] == key, (text, error)
        error = fails(home, "config", "get", code="invalid_params.config", exit_code=2)
        assert error["data"]["key"] == key, (text, error)
        assert no_daemon(home), text
        with open(home.paths.config, encoding="utf-8") as f:
            assert f.read() == text
    for text, key in BAD_FILES[2:4]:
        home.config(text)
        fails(home, "whoami", code="invalid_params.config", exit_code=2)
        fails(home, "config", "set", "--key", "memory.max_versions", "--value", "3", code="invalid_params.config",
              exit_code=2)  # fmt: skip
        served = home.cli("serve", timeout=30)
        assert served.code == 2, served
        assert "invalid_params.config" in served.err and key in served.err
        assert no_daemon(home)
        with open(home.paths.config, encoding="utf-8") as f:
            assert f.read() == text


def test_reload_of_a_bad_file_keeps_the_old_config(home: Home) -> None:
    home.config("[grants]\nunknown = []\n")
    home.ok("memory", "add", "--space", "user", "--content", "kept hidden")
    pid = home.daemon_pid()
    home.config("[grants]\nunknown = 5\n")
    owner = home.client()
    try:
        with pytest.raises(HivememError) as caught:
            owner.call("config.reload")
        assert caught.value.code == "invalid_params.config"
        assert caught.value.data["key"] == "grants.unknown"
        assert owner.call("whoami")["principal"] == "owner"
    finally:
        owner.close()
    assert home.daemon_pid() == pid
    unknown = home.client("")
    try:
        assert unknown.call("whoami")["grants"] == []
        assert unknown.call("memory.search", query="hidden")["results"] == []
    finally:
        unknown.close()
    home.config('[grants]\nunknown = [{ right = "read", scope = "*" }]\n')
    owner = home.client()
    try:
        assert owner.call("config.reload") == {"reloaded": True}
    finally:
        owner.close()
    unknown = home.client("")
    try:
        assert len(unknown.call("memory.search", query="hidden")["results"]) == 1
    finally:
        unknown.close()
    client = home.client("")
    try:
        with pytest.raises(HivememError) as caught:
            client.call("config.reload")
        assert caught.value.code == "denied.admin"
    finally:
        client.close()


def test_configs_share_no_mutable_default() -> None:
    from hivemem.config import BY_KEY, Config

    first = Config()
    first["recall.team_spaces"].append("team/x")
    first["grants.unknown"][0]["right"] = "write"
    first["governance.review_days"]["task"] = 1
    second = Config()
    assert second["recall.team_spaces"] == [] == BY_KEY["recall.team_spaces"].default
    assert second["grants.unknown"] == [{"right": "read", "scope": "*"}] == BY_KEY["grants.unknown"].default
    assert second["governance.review_days"] == {"decision": 180, "task": 7} == BY_KEY["governance.review_days"].default


def test_store_url_takes_libpqs_key_value_form(home: Home) -> None:
    """`store.url` is any connection string libpq reads (docs/team.md, docs/decisions.md D345)."""
    value = "host=db.example.com port=5433 dbname=hivemem sslmode=verify-full"
    assert home.ok("config", "set", "--key", "store.url", "--value", value)["value"] == value
    assert home.ok("config", "get", "--key", "store.url")["value"] == value


def test_the_typed_key_groups_hold_every_setting_by_its_defaults_type() -> None:
    import ast
    import pathlib

    import hivemem.config as config_mod

    tree = ast.parse(pathlib.Path(config_mod.__file__).read_text(encoding="utf-8"))
    groups = {
        node.targets[0].id: {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.endswith("Key")
    }
    by_type = {"StrKey": str, "IntKey": int, "FloatKey": float}
    assert set(groups) == set(by_type)
    for group, keys in groups.items():
        assert keys == {s.key for s in SETTINGS if type(s.default) is by_type[group]}, group


def test_embedding_settings_read_every_embeddings_key() -> None:
    import dataclasses

    from hivemem.config import Config
    from hivemem.daemon.main import embedding_settings

    values: dict[str, Value] = {
        "embeddings.provider": "http", "embeddings.base_url": "https://e.example", "embeddings.model": "m",
        "embeddings.dimensions": 3, "embeddings.api_key": "k", "embeddings.max_input_bytes": 300,
        "embeddings.query_timeout_ms": 11, "embeddings.batch_timeout_ms": 101,
    }  # fmt: skip
    settings = embedding_settings(Config(dict(values)))
    assert {f"embeddings.{k}": v for k, v in dataclasses.asdict(settings).items()} == values
