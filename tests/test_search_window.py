"""Search and list by time, author and page (docs/verbs.md memory.search, docs/decisions.md D290-D294).

`since`/`until` are a half-open window [since, until) on `updated` (on `created` with `by_created`); `authors`
match who created a memory, by principal or label; filters apply before ranking and `limit`. `after` is the
opaque `next` of a ranked search: following it returns each hit once, in rank order, and never reveals a
memory the caller cannot read. Runs on both backends."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Clients, Home, client_token, fails, mcp_session, raises, wait_for
from embedstub import running
from hivemem.client import DaemonClient
from hivemem.dates import resolve
from hivemem.store.clock import format_time, now


def add(client: DaemonClient, space: str, content: str, **params: Any) -> str:
    memory_id = client.call("memory.add", space=space, content=content, **params)["id"]
    assert isinstance(memory_id, str)
    return memory_id


def boundary(client: DaemonClient, memory: str) -> str:
    """A time after `memory` was last written and before anything written next (the clock has moved past it)."""
    updated = client.call("memory.get", id=memory)["updated"]
    assert wait_for(lambda: now() > updated)
    return now()


def ids(result: dict[str, Any], key: str = "results") -> list[str]:
    return [h["id"] for h in result[key]]


def test_window_on_updated_and_on_created_is_half_open(home: Home, owner: DaemonClient) -> None:
    old = add(owner, "project/api", "deploy the zig build with the old runner")
    t1 = boundary(owner, old)
    new = add(owner, "project/api", "deploy the zig build with the new runner")
    t2 = boundary(owner, new)
    revision = owner.call("memory.get", id=old)["revision"]
    owner.call("memory.update", id=old, revision=revision, content="deploy the zig build with the old runner, fixed")
    found = owner.call("memory.search", query="deploy zig", since=t1)
    assert sorted(ids(found)) == sorted([old, new]) and found["window"] == {"since": t1, "on": "updated"}
    assert ids(owner.call("memory.search", query="deploy zig", since=t1, until=t2)) == [new]
    created = owner.call("memory.search", query="deploy zig", since=t1, by_created=True)
    assert ids(created) == [new] and created["window"] == {"since": t1, "on": "created"}
    assert ids(owner.call("memory.search", query="deploy zig", until=t1, by_created=True)) == [old]
    assert ids(owner.call("memory.search", query="deploy zig", until=t1)) == []  # both updated since
    stamp = owner.call("memory.get", id=new)["updated"]
    exact = owner.call("memory.search", query="deploy zig", since=stamp, until=t2)
    assert new in ids(exact)  # since is inclusive
    assert new not in ids(owner.call("memory.search", query="deploy zig", until=stamp, by_created=True))  # until is not
    listed = owner.call("memory.list", spaces=["project/api"], since=t1, until=t2)
    assert ids(listed, "memories") == [new] and listed["window"] == {"since": t1, "until": t2, "on": "updated"}
    assert "window" not in owner.call("memory.search", query="deploy zig")
    assert "window" not in owner.call("memory.list")


def test_an_empty_or_reversed_window_is_a_range_error(home: Home, owner: DaemonClient) -> None:
    t = now()
    for verb, extra in (("memory.search", {"query": "zig"}), ("memory.list", {})):
        for until in (t, format_time(datetime.now(UTC) - timedelta(days=1))):
            error = raises(owner, verb, since=t, until=until, **extra)
            assert (error.code, error.data["param"]) == ("invalid_params.range", "until")
        error = raises(owner, verb, since="last tuesday", **extra)
        assert (error.code, error.data["param"]) == ("invalid_params.type", "since")
    fails(home, "memory", "search", "--query", "zig", "--since", "today", "--until", "yesterday",
          code="invalid_params.range", exit_code=2)  # fmt: skip


def test_authors_match_the_creator_by_principal_or_label(home: Home, owner: DaemonClient, clients: Clients) -> None:
    token = client_token(owner, "codex", [("read", "*"), ("write", "*")])
    codex = clients(token)
    principal = codex.call("whoami")["principal"]
    by_codex = add(codex, "project/api", "the deploy key rotates monthly")
    by_owner = add(owner, "project/api", "the deploy script lives in ops")
    owner.call("memory.update", id=by_codex, revision=1, content="the deploy key rotates every month")  # owner edits
    assert ids(owner.call("memory.search", query="deploy", authors=["codex"])) == [by_codex]
    assert ids(owner.call("memory.search", query="deploy", authors=[principal])) == [by_codex]
    assert ids(owner.call("memory.search", query="deploy", authors=["owner"])) == [by_owner]
    assert sorted(ids(owner.call("memory.search", query="deploy", authors=["owner", "codex"]))) == sorted(
        [by_codex, by_owner])  # fmt: skip
    assert ids(owner.call("memory.list", authors=["codex"]), "memories") == [by_codex]
    assert ids(owner.call("memory.search", query="deploy", authors=["nobody"])) == []
    cli = home.ok("memory", "search", "--query", "deploy", "--authors", f"codex,{principal}")
    assert ids(cli) == [by_codex]


def test_filters_apply_before_limit(home: Home, owner: DaemonClient) -> None:
    """Twelve newer memories rank above the old one for the words; the filtered search still finds it."""
    old = add(owner, "user", "a kestrel was seen once at dawn over the long grey estuary by the old pier")
    t = boundary(owner, old)
    for n in range(12):
        add(owner, "user", f"kestrel kestrel kestrel {n}")
    assert old not in ids(owner.call("memory.search", query="kestrel", limit=3))
    assert ids(owner.call("memory.search", query="kestrel", until=t, limit=3)) == [old]
    assert ids(owner.call("memory.list", until=t, limit=1), "memories") == [old]


def test_cli_relative_forms_resolve_in_the_local_time_zone(home: Home, owner: DaemonClient) -> None:
    memory = add(owner, "user", "standup moved to ten")
    env_tz = "Pacific/Auckland"
    result = home.cli("memory", "search", "--query", "standup", "--since", "7d", "--json")
    assert result.code == 0 and ids(result.json) == [memory], result
    since = datetime.fromisoformat(result.json["window"]["since"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - timedelta(days=7) - since).total_seconds()) < 60
    home.env["TZ"] = env_tz
    try:
        shown = home.ok("memory", "search", "--query", "standup", "--since", "2026-11-30", "--until", "today")
    finally:
        del home.env["TZ"]
    # Local midnight of 2026-11-30 in Auckland (UTC+13 in summer) is 11:00 UTC the day before.
    assert shown["window"]["since"] == "2026-11-29T11:00:00.000Z"
    assert shown["window"]["until"].endswith(":00:00.000Z") and shown["window"]["on"] == "updated"
    yesterday = home.ok("memory", "list", "--since", "yesterday", "--by-created")
    assert ids(yesterday, "memories") == [memory] and yesterday["window"]["on"] == "created"
    shown_text = home.cli("memory", "search", "--query", "standup", "--since", "2026-11-30T10:00:00Z").out
    assert "window: updated from 2026-11-30T10:00:00.000Z to before now" in shown_text and memory in shown_text
    fails(home, "memory", "search", "--query", "standup", "--since", "fortnight", code="invalid_params.type",
          exit_code=2)  # fmt: skip


def test_mcp_search_takes_relative_times_and_pages(home: Home, owner: DaemonClient) -> None:
    """The default tool set's search: the adapter resolves `7d` in the local time zone; `next` pages."""
    made = [add(owner, "user", f"ferry timetable {n}") for n in range(5)]

    async def main() -> None:
        async with mcp_session(home) as s:
            first = await s.call_tool("memory_search", {"query": "ferry", "since": "7d", "limit": 3})
            assert not first.is_error, first.content
            page = first.structured_content
            assert page["window"]["on"] == "updated" and page["window"]["since"].endswith("Z")
            rest = await s.call_tool("memory_search", {"query": "ferry", "since": "7d", "after": page["next"]})
            assert not rest.is_error, rest.content
            shown = [h["id"] for h in page["results"] + rest.structured_content["results"]]
            assert sorted(shown) == sorted(made) and "next" not in rest.structured_content

    anyio.run(main)


def test_resolve_forms() -> None:
    at = datetime(2026, 12, 5, 9, 30, tzinfo=UTC)
    assert resolve("7d", at) == "2026-11-28T09:30:00.000Z"
    assert resolve("2w", at) == "2026-11-21T09:30:00.000Z"
    assert resolve("12h", at) == "2026-12-04T21:30:00.000Z"
    assert resolve("2026-12-05T10:00:00+01:00", at) == "2026-12-05T10:00:00+01:00"  # sent as given
    assert resolve("2026-02-30", at) == "2026-02-30"  # not a date: the daemon refuses it


def pages(client: DaemonClient, limit: int, **params: Any) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    after = None
    for _ in range(200):
        found = client.call("memory.search", limit=limit, **params, **({"after": after} if after else {}))
        out.append(found["results"])
        after = found.get("next")
        if after is None:
            return out
        assert found["results"], "a page with a next is never empty"
    raise AssertionError("paging did not end")


def test_next_pages_a_ranked_search_in_order(home: Home, owner: DaemonClient) -> None:
    made = [add(owner, "project/web", f"heron {'heron ' * (n % 5)}at pond {n}") for n in range(23)]
    whole = owner.call("memory.search", query="heron pond", limit=100)
    assert "next" not in whole and len(whole["results"]) == 23
    got = pages(owner, 5, query="heron pond")
    assert [len(p) for p in got] == [5, 5, 5, 5, 3]
    flat = list(itertools.chain.from_iterable(got))
    assert [h["id"] for h in flat] == ids(whole) and sorted(h["id"] for h in flat) == sorted(made)
    assert [h["score"] for h in flat] == [h["score"] for h in whole["results"]]
    assert [h["fts_rank"] for h in flat] == list(range(1, 24))


def test_a_write_between_pages_never_fails_a_page(home: Home, owner: DaemonClient) -> None:
    for n in range(8):
        add(owner, "user", f"lantern festival note {n}")
    first = owner.call("memory.search", query="lantern", limit=3)
    seen = ids(first)
    owner.call("memory.delete", id=seen[-1], revision=1)  # the page's last hit is gone
    add(owner, "user", "lantern lantern lantern lantern festival, new and ranked first")
    second = owner.call("memory.search", query="lantern", limit=3, after=first["next"])
    assert len(second["results"]) == 3 and not set(ids(second)) & set(seen)
    rest = owner.call("memory.search", query="lantern", limit=50, after=second["next"])
    assert "next" not in rest and len(ids(rest)) == 2


def test_a_cursor_from_another_search_or_a_forged_one_is_refused(home: Home, owner: DaemonClient,
                                                                  clients: Clients) -> None:  # fmt: skip
    for n in range(4):
        add(owner, "user", f"osprey nest {n}")
    cursor = owner.call("memory.search", query="osprey", limit=2)["next"]
    for params in ({"query": "nest"}, {"query": "osprey", "kinds": ["fact"]}, {"query": "osprey", "mode": "fts"},
                   {"query": "osprey", "after": cursor[:-3]}, {"query": "osprey", "after": "m3"}):  # fmt: skip
        error = raises(owner, "memory.search", limit=2, **{"after": cursor, **params})
        assert (error.code, error.data["param"]) == ("invalid_params.after", "after"), params
    other = clients(client_token(owner, "reader", [("read", "*")]))
    assert raises(other, "memory.search", query="osprey", after=cursor).code == "invalid_params.after"
    # Every page keeps the first page's window, whatever since comes with after (`--since 7d` moves).
    t = format_time(datetime.now(UTC) - timedelta(days=1))
    first = owner.call("memory.search", query="osprey", limit=2, since=t)
    later = owner.call("memory.search", query="osprey", limit=2, since=now(), after=first["next"])
    assert len(later["results"]) == 2 and later["window"] == first["window"]


def test_grants_hold_through_filters_and_pages(home: Home, owner: DaemonClient, clients: Clients) -> None:
    """A client reading one space pages through exactly its own search: no count, gap or cursor shows a memory
    of another space, even when unreadable ones rank between its hits."""
    mine: list[str] = []
    for n in range(9):
        mine.append(add(owner, "team/ml", f"gradient notes {n}"))
        add(owner, "team/secret", f"gradient gradient gradient gradient secret {n}")
    reader = clients(client_token(owner, "ml-reader", [("read", "space:team/ml")]))
    whole = reader.call("memory.search", query="gradient", limit=100, since="2000-01-01T00:00:00Z")
    assert sorted(ids(whole)) == sorted(mine)
    got = list(itertools.chain.from_iterable(pages(reader, 4, query="gradient", since="2000-01-01T00:00:00Z")))
    assert [h["id"] for h in got] == ids(whole)
    assert [h["fts_rank"] for h in got] == list(range(1, 10))  # ranks count readable hits only: no gaps
    first = reader.call("memory.search", query="gradient", limit=4)
    assert set(first["next"]) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    assert ids(reader.call("memory.list", authors=["owner"]), "memories") == sorted(mine, key=lambda m: -int(m[1:]))
    assert raises(reader, "memory.search", query="gradient", spaces=["team/secret"]).code == "denied.read"


WORDS = ("alpha", "beta", "gamma", "delta", "kappa")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=30),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
    limit=st.integers(min_value=1, max_value=7),
    readable=st.booleans(),
)
def test_property_pages_concatenated_are_one_big_search(home: Home, owner: DaemonClient, clients: Clients,
                                                        docs: list[list[str]], query: list[str], limit: int,
                                                        readable: bool) -> None:  # fmt: skip
    """Over random stores (a fresh pair of spaces each example) and queries: following `next` returns the one big
    search's hits, each once, in order; a one-space reader sees only its space, in the same way."""
    run = now().replace(":", "").replace(".", "").replace("-", "").lower()
    space, hidden = f"prop/a{run}", f"prop/b{run}"
    for n, words in enumerate(docs):
        add(owner, space if n % 3 else hidden, " ".join(words) + f" row{n}")
    caller = clients(client_token(owner, f"r{run}", [("read", f"space:{space}")])) if readable else owner
    params: dict[str, Any] = {"query": " ".join(query), "spaces": [space, hidden] if not readable else [space]}
    whole = caller.call("memory.search", limit=100, **params)
    got = list(itertools.chain.from_iterable(pages(caller, limit, **params)))
    assert [h["id"] for h in got] == ids(whole)
    assert len({h["id"] for h in got}) == len(got)
    if readable:
        assert all(h["space"] == space for h in got)


@pytest.mark.sqlite_only
def test_hybrid_search_pages_the_fused_list(home: Home) -> None:
    """With embeddings on, pages follow the fused order (full text and vectors), each hit once, and a window
    filters the vector list too."""
    with running() as stub:
        home.config(stub.config(extra="[search]\nvector_weight = 1.0\nmin_similarity = 0.0\n"))
        home.ok("whoami")
        client = home.client()
        try:
            made = [add(client, "user", f"otter {'otter ' * (n % 4)}holt number {n}") for n in range(6)]
            t = boundary(client, made[-1])
            made += [add(client, "user", f"otter {'otter ' * (n % 4)}holt number {n}") for n in range(6, 12)]
            assert wait_for(lambda: client.call("store.status")["pending"] == 0, timeout=30)
            whole = client.call("memory.search", query="otter holt", limit=100)
            assert whole["mode"] == "hybrid" and "next" not in whole
            got = list(itertools.chain.from_iterable(pages(client, 5, query="otter holt")))
            assert [h["id"] for h in got] == ids(whole) and len(got) == len(set(ids(whole))) >= 12
            assert [h["score"] for h in got] == [h["score"] for h in whole["results"]]
            late = client.call("memory.search", query="otter holt", limit=100, until=t)
            assert sorted(ids(late)) == sorted(made[:6]) and late["mode"] == "hybrid"
            assert all("vector_rank" in h for h in late["results"])
        finally:
            client.close()


@pytest.mark.sqlite_only
def test_a_narrow_window_reads_only_its_stretch_of_ids(home: Home, owner: DaemonClient) -> None:
    """The window's ids bound MATCH (search.id_range); the hits and their order are those of the unbounded
    search filtered by the window."""
    early = [add(owner, "user", f"walrus {'walrus ' * (n % 3)}count {n}") for n in range(6)]
    t = boundary(owner, early[-1])
    late = [add(owner, "user", f"walrus {'walrus ' * (n % 3)}later {n}") for n in range(6)]
    revision = owner.call("memory.get", id=early[0])["revision"]
    owner.call("memory.update", id=early[0], revision=revision, content="walrus walrus walrus walrus revisited")
    everything = ids(owner.call("memory.search", query="walrus", limit=100))
    windowed = ids(owner.call("memory.search", query="walrus", limit=100, since=t))
    assert windowed == [m for m in everything if m in {*late, early[0]}]
