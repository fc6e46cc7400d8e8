"""The walking skeleton end to end: the real CLI starts a real daemon and round-trips a memory."""

from __future__ import annotations

from conftest import Home


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
