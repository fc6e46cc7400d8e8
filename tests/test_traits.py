"""Verb behaviour comes from the manifest's traits: no layer keys behaviour on a verb's name.

Checked on the real surfaces: the MCP annotations and schemas of a real session, the writer routing and the
streams of a real daemon on its socket, the CLI's command names, and the source itself (an `ast` walk).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import hivemem
from conftest import Home, client_token, mcp_session
from hivemem import ops, records
from hivemem.cli.main import find_verb, main
from hivemem.cli.reference import command
from hivemem.client import DaemonClient
from hivemem.config import Config
from hivemem.errors import HivememError
from hivemem.manifest import BY_NAME, EFFECTS, TRUST_SENTENCE, VERBS, Verb
from hivemem.mcp.tools import input_schema
from hivemem.spaces import DEFAULTS

SRC = os.path.dirname(hivemem.__file__)
# Where a verb's name may be a key: the one registry of handlers, and the top-level commands' help text.
REGISTRIES = {("ops.py", "HANDLERS"), ("cli/main.py", "TOP")}


def sources() -> Iterator[tuple[str, ast.Module]]:
    for base, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(base, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, SRC).replace(os.sep, "/"), ast.parse(f.read(), path)


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def registry(rel: str, node: ast.AST, up: dict[ast.AST, ast.AST]) -> bool:
    """Whether `node` is a key of a dict assigned to one of the REGISTRIES."""
    owner = up.get(up.get(node, node), node)
    targets = [owner.target] if isinstance(owner, ast.AnnAssign) else getattr(owner, "targets", [])
    return any(isinstance(t, ast.Name) and (rel, t.id) in REGISTRIES for t in targets)


# A hygiene finding's fix is a verb to call, carried as data, and doctor's hygiene check has the verb's name
# as its id: these modules name these verbs as what a finding proposes, not to key a verb's own behaviour.
FINDING_ACTIONS = frozenset({
    ("search/hygiene.py", "memory.purge"),
    ("web/hygiene.py", "memory.relate"), ("web/hygiene.py", "memory.unrelate"), ("web/hygiene.py", "memory.archive"),
    ("web/hygiene.py", "memory.challenge"),
    ("web/health.py", "memory.hygiene"),
    ("web/hygiene.py", "memory.purge"),
    ("web/app.py", "memory.relate"), ("web/app.py", "memory.unrelate"), ("web/app.py", "memory.archive"),
    ("web/app.py", "memory.challenge"),
    # the grouped `hivemem --help` names commands as typed, and the command `whoami` is also the verb's name
    ("cli/main.py", "whoami"),
})  # fmt: skip


def named_for_behaviour(src: Iterator[tuple[str, ast.Module]]) -> list[str]:
    """Verb names in string literals outside the manifest, except as what a call sends or a lookup fetches.

    `client.call("memory.recall", ...)` and `BY_NAME["memory.recall"]` name a verb to use it; `verb ==
    "daemon.stop"`, `{"memory.add", ...}` or `{"memory.delete": ...}` key behaviour on it, which a trait says.
    """
    found = []
    for rel, tree in src:
        if rel == "manifest.py":
            continue
        up = parents(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and node.value in BY_NAME) or registry(rel, node, up):
                continue
            if (rel, node.value) in FINDING_ACTIONS:
                continue
            use: ast.AST = up[node]
            child: ast.AST = node  # the node under `use`: a lookup must have it as its key
            while isinstance(use, ast.IfExp):
                use, child = up[use], use
            if isinstance(use, ast.Call | ast.keyword) or (isinstance(use, ast.Subscript) and use.slice is child):
                continue
            found.append(f"{rel}:{node.lineno} {node.value!r} in {type(use).__name__}")
    return found


def test_no_module_outside_the_manifest_keys_behaviour_on_a_verb_name() -> None:
    assert named_for_behaviour(sources()) == []


def test_the_name_check_catches_comparisons_sets_and_maps() -> None:
    code = (
        'if verb == "daemon.stop": pass\n'
        'DESTRUCTIVE = frozenset({"memory.delete"})\n'
        'EFFECTS = {"config.reload": 1}\n'
        'ok = client.call("memory.recall", spaces=[])\n'
        'v = BY_NAME["events.follow" if follow else "events.list"]\n'
    )
    found = named_for_behaviour(iter([("cli/example.py", ast.parse(code))]))
    assert sorted(f.split()[1] for f in found) == ["'config.reload'", "'daemon.stop'", "'memory.delete'"]


def test_mcp_annotations_and_required_params_are_the_traits(home: Home) -> None:
    async def listed() -> dict[str, Any]:
        async with mcp_session(home) as s:
            return {t.name: t for t in (await s.list_tools()).tools}

    tools = anyio.run(listed)
    exposed = {v.name.replace(".", "_"): v for v in VERBS if v.mcp}
    assert set(tools) == set(exposed)
    for name, tool in tools.items():
        verb = exposed[name]
        traits = {"readOnlyHint": not verb.writes, "destructiveHint": verb.destructive,
                  "idempotentHint": verb.idempotent, "openWorldHint": False}  # fmt: skip
        assert tool.annotations.model_dump(by_alias=True, exclude_none=True) == traits, name
        wanted = [p.name for p in verb.params if p.required and not p.client_default]
        assert tool.input_schema.get("required", []) == wanted, name


def test_client_defaults_are_known_and_optional_for_clients_only() -> None:
    defaulted = [(v, p) for v in VERBS for p in v.params if p.client_default]
    assert defaulted, "the recall read path is a client default"
    for verb, p in defaulted:
        assert p.client_default in DEFAULTS
        assert p.required, f"{verb.name}.{p.name}: the wire requires what clients fill in"
        assert p.name not in input_schema(verb).get("required", [])


def test_memory_text_trait_matches_the_trust_sentence_in_the_summary() -> None:
    for verb in VERBS:
        assert verb.returns_memory_text == (TRUST_SENTENCE in verb.summary), verb.name


def test_writer_routing_is_the_writes_traits() -> None:
    for verb in VERBS:
        assert ops.needs_writer(verb.name, {}) is verb.writes, verb.name
        for p in verb.params:
            if p.writes:
                assert ops.needs_writer(verb.name, {p.name: True}) is True
                assert ops.needs_writer(verb.name, {p.name: False}) is verb.writes
    assert ops.needs_writer("no.such_verb", {}) is False


def test_a_writes_param_runs_a_read_verb_on_the_writer(home: Home, owner: DaemonClient) -> None:
    """Readers are read-only connections: only the writer can record usage events."""
    owner.call("memory.add", space="a", content="usage is recorded by the writer")
    recalled = {"types": ["memory.recalled"]}
    owner.call("memory.search", query="usage recorded")
    assert owner.call("events.list", **recalled)["events"] == []
    owner.call("memory.search", query="usage recorded", record_usage=True)
    assert len(owner.call("events.list", **recalled)["events"]) == 1


def test_effects_are_ones_the_daemon_performs() -> None:
    assert {v.effect for v in VERBS} - {""} <= set(EFFECTS)
    with pytest.raises(ValueError, match="unknown effect"):
        Verb("x.y", "A verb with a typo.", "read", records.Reloaded, effect="restart")


def test_cli_names_come_from_the_trait(capsys: pytest.CaptureFixture[str]) -> None:
    assert len({v.cli_name for v in VERBS}) == len(VERBS)
    assert BY_NAME["daemon.stop"].cli_name == "stop" and BY_NAME["whoami"].cli_name == "whoami"
    for verb in VERBS:
        assert find_verb([*verb.cli_name.split(), "--json"]) == (verb, ["--json"])
        assert command(verb) == f"hivemem {verb.cli_name}"
        assert main([*verb.cli_name.split(), "--help"]) == 0
        assert f"usage: hivemem {verb.cli_name} " in capsys.readouterr().out


def test_stop_help_is_help_and_stops_nothing(home: Home) -> None:
    home.ok("whoami")
    pid = home.daemon_pid()
    result = home.cli("stop", "--help")
    assert result.code == 0 and "usage: hivemem stop " in result.out
    assert home.daemon_pid() == pid is not None


def stream_client(home: Home) -> DaemonClient:
    """An owner connection whose reads give up after 30 s rather than hang a failing test."""
    return DaemonClient(Config(path=home.paths.config), token="@owner", budget=30).connect()


def lines_until(client: DaemonClient, key: str, wanted: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while len(got) < wanted:
        message = client.receive()
        assert set(message) == {key}, message
        got.append(message[key])
    return got


@pytest.mark.parametrize("verb", [v for v in VERBS if v.stream], ids=lambda v: v.name)
def test_every_stream_verb_streams_over_the_socket(home: Home, owner: DaemonClient, verb: Verb) -> None:
    follower = stream_client(home)
    try:
        reply = follower.request(verb.name, {})
        assert "error" not in reply and reply
        owner.call("memory.add", space="a", content=f"a commit while {verb.name} streams")
        [item] = lines_until(follower, verb.stream, 1)
        assert isinstance(item, dict) and item
    finally:
        follower.close()


def test_a_stream_sends_everything_past_one_poll_at_once(home: Home, owner: DaemonClient) -> None:
    """1,100 events are more than one poll's page; a follower from 0 gets all of them without a new commit."""
    owner.connect()
    for n in range(1100):  # pipelined: one write, then the replies
        owner._next_id += 1
        owner.send({"id": owner._next_id, "verb": "memory.add", "params": {"space": "a", "content": f"event {n}"}})
    assert all("ok" in owner.receive() for _ in range(1100))
    verb = BY_NAME["events.follow"]
    follower = stream_client(home)
    try:
        assert follower.request(verb.name, {"after": 0}) == {"following": True, "after": 0}
        events = lines_until(follower, verb.stream, 1100)
        assert [e["id"] for e in events] == sorted(e["id"] for e in events)
        assert len({e["id"] for e in events}) == 1100
    finally:
        follower.close()


def test_a_client_removed_while_it_streams_is_cut_off(home: Home, owner: DaemonClient) -> None:
    verb = BY_NAME["events.follow"]
    token = client_token(owner, "watcher", [("read", "*")])
    follower = DaemonClient(Config(path=home.paths.config), token=token, budget=30).connect()
    try:
        follower.request(verb.name, {})
        owner.call("memory.add", space="a", content="seen while still a client")
        [seen] = lines_until(follower, verb.stream, 1)
        assert seen["type"] == "memory.added"
        owner.call("client.remove", name="watcher")
        owner.call("memory.add", space="a", content="never seen: the client is gone")
        message = follower.receive()
        assert message["error"]["code"] == "denied.token" and message["error"]["data"]["reason"] == "revoked"
        with pytest.raises(HivememError, match="closed"):
            follower.receive()
    finally:
        follower.close()
