"""The walking skeleton end to end: the real CLI starts a real daemon and round-trips a memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Home
from hivemem.client import LocalClient
from hivemem.errors import HivememError


def test_add_then_search_through_cli(home: Home) -> None:
    added = home.ok("memory", "add", "--space", "user", "--content", "Prefers small pull requests")
    assert added == {"id": "m1", "revision": 1, "changed": True}
    found = home.ok("memory", "search", "--query", "small pull requests", token=None)
    assert [h["id"] for h in found["results"]] == ["m1"]
    assert found["mode"] == "fts"
    assert home.daemon_pid() is not None


def test_in_process_client_reaches_same_daemon(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "one")
    client = home.client()
    try:
        assert client.call("memory.get", id="m1")["content"] == "one"
        assert client.hello["principal"] == "owner"
    finally:
        client.close()


def test_local_client_runs_the_same_verbs_in_process(tmp_path: Path) -> None:
    """LocalClient: the same dispatch as the daemon, on a store this process opens (no socket, owner)."""
    local = LocalClient(str(tmp_path / "store.db"))
    try:
        assert local.call("memory.add", space="user", content="in-process memory") == {
            "id": "m1",
            "revision": 1,
            "changed": True,
        }
        hits = local.call("memory.search", query="in-process")["results"]
        assert [h["id"] for h in hits] == ["m1"]
        assert hits[0]["author"] == {"principal": "owner", "label": "owner"}
        with pytest.raises(HivememError) as caught:
            local.call("memory.get", id="m2")
        assert caught.value.code == "not_found.memory"
    finally:
        local.close()
