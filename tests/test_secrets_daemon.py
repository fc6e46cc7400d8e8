"""Secrets never enter the store (docs/security.md; conformance C15): refused on the CLI, the socket and MCP, never
echoed or logged, found by `doctor` and dropped by recall when an older row holds one.

Every secret-shaped value is generated at run time by secret_corpus.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import apsw
import pytest

from conftest import Home, mcp_session
from hivemem.auth import owner as owner_principal
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store import open_store
from hivemem.store.base import NewMemory
from hivemem.store.sqlite import memories
from secret_corpus import ATTACKER, PLACEMENTS, SHAPES, Gen, benign, placed, shapes
from test_docs_run import sh_blocks

CODE = "invalid_params.secret_content"


def values(text: str) -> list[str]:
    """The random parts of a generated secret: what must never be echoed, logged or written."""
    parts = re.split(r"[\s=:;,\"'@/]+", text)
    return [p for p in parts if len(p) >= 16 and any(c.isdigit() for c in p)] or [text]


def assert_refused(error: HivememError, text: str, param: str = "content") -> None:
    assert error.code == CODE, (error.code, error.data)
    assert set(error.data) == {"param", "kind"} and error.data["param"] == param
    shown = error.message + json.dumps(error.data)
    assert not [v for v in values(text) if v in shown]


def refuse(client: DaemonClient, text: str, **params: Any) -> HivememError:
    with pytest.raises(HivememError) as caught:
        client.call("memory.add", space="user", content=text, **params)
    return caught.value


def leaks(home: Home, secrets: list[str], replies: str) -> dict[str, int]:
    """How often any of `secrets` occurs in the replies and in every file hivemem writes."""
    files = [home.paths.store + suffix for suffix in ("", "-wal", "-shm")]
    files += [os.path.join(home.paths.logs, name) for name in ("daemon.log", "hooks.log")]
    found = {"replies": sum(replies.count(s) for s in secrets)}
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        found[os.path.basename(path)] = sum(data.count(s.encode()) for s in secrets)
    return found


def test_k2_k5_every_placement_is_refused_over_the_socket_and_nothing_leaks(home: Home, owner: DaemonClient) -> None:
    cases = placed(seed=21)
    replies: list[str] = []
    for _, _, text in cases:
        error = refuse(owner, text)
        assert_refused(error, text)
        replies.append(error.message + json.dumps(error.data))
    # a write in another param, and a hook that fails with a secret in its input: the hook log stays clean
    title_secret = SHAPES["github-classic-pat"](Gen(22))
    assert_refused(refuse(owner, "a title holds it", title=title_secret), title_secret, "title")
    prompt = SHAPES["slack-bot"](Gen(23))
    hook = home.cli("hook", "prompt-submit", stdin=json.dumps({"cwd": 5, "prompt": prompt}))
    assert (hook.code, hook.out) == (0, "")
    assert owner.call("memory.add", space="user", content="one ordinary memory")["changed"]
    assert owner.call("store.status")["memories"] == 1
    assert len(cases) >= 100 and os.path.exists(os.path.join(home.paths.logs, "hooks.log"))
    secrets = [v for _, text in shapes(seed=21) for v in values(text)] + values(title_secret) + values(prompt)
    control = leaks(home, ["one ordinary memory"], "")  # the byte scan does see what was stored
    assert control["store.db"] + control["store.db-wal"] > 0
    assert leaks(home, secrets, "\n".join(replies) + hook.out + hook.err) == {
        "replies": 0, "store.db": 0, "store.db-wal": 0, "store.db-shm": 0, "daemon.log": 0, "hooks.log": 0,
    }  # fmt: skip


def test_k2_the_cli_refuses_every_format(home: Home) -> None:
    home.ok("whoami")
    where = list(PLACEMENTS)
    cases = [(name, where[i % 4], PLACEMENTS[where[i % 4]](text)) for i, (name, text) in enumerate(shapes(seed=24))]

    def add(case: tuple[str, str, str]) -> tuple[str, Any]:
        result = home.cli("memory", "add", "--space", "user", "--content", "-", "--json", stdin=case[2] + "\n")
        leaked = [v for v in values(case[2]) if v in result.out + result.err]
        return case[0], (result.code, result.json["error"]["code"] if result.out else None, leaked)

    with ThreadPoolExecutor(4) as pool:
        outcomes = dict(pool.map(add, cases))
    assert {name: outcome for name, outcome in outcomes.items() if outcome != (2, CODE, [])} == {}
    assert len(outcomes) == len(SHAPES) and {w for _, w, _ in cases} == set(PLACEMENTS)
    assert home.ok("store", "status")["memories"] == 0


def test_k2_mcp_refuses_every_placement(home: Home) -> None:
    cases = placed(seed=25)
    bad: list[tuple[str, str, Any]] = []

    async def main() -> None:
        async with mcp_session(home) as s:
            for shape, where, text in cases:
                result = await s.call_tool("memory_add", {"space": "user", "content": text})
                shown = "".join(getattr(c, "text", "") for c in result.content)
                wire = json.loads(shown) if result.is_error else {}
                if not result.is_error or wire.get("code") != CODE or any(v in shown for v in values(text)):
                    bad.append((shape, where, wire.get("code")))

    anyio.run(main)
    assert bad == []
    assert home.ok("store", "status")["memories"] == 0


def test_k4_position_does_not_hide_a_secret(owner: DaemonClient) -> None:
    g = Gen(26)
    key = SHAPES["aws-access-key-id"](g)
    fifty = "\n".join(f"the CI user has {key}" if i == 2 else f"line {i} of the runbook" for i in range(50))
    error = refuse(owner, fifty)
    assert_refused(error, fifty)
    assert error.data["kind"] == "aws-access-token" and "line 3" in error.message
    filler = ("ordinary words about nothing in particular " * 1600)[:60_000]
    big = filler + SHAPES["stripe-live"](g) + " " + "y" * (65_536 - 60_000 - 33)
    assert len(big.encode()) == 65_536
    assert_refused(refuse(owner, big), big)
    pem = "deploy key for the staging box:\n" + SHAPES["openssh-private-key"](g) + "\nrotate yearly"
    assert_refused(refuse(owner, pem), pem)
    assert owner.call("store.status")["memories"] == 0


def test_ordinary_text_about_keys_and_ids_is_stored(owner: DaemonClient) -> None:
    corpus = benign(seed=27)
    refused = []
    for category, text in corpus:
        try:
            owner.call("memory.add", space="user", content=text)
        except HivememError as exc:
            refused.append((category, exc.code, exc.data))
    assert len(refused) <= len(corpus) // 100, refused
    assert owner.call("store.status")["memories"] == len(corpus) - len(refused)


def test_a_refusal_never_waits_for_the_writer(home: Home, owner: DaemonClient) -> None:
    """The scan runs before a write is queued: with the writer stuck behind an external lock, a secret is
    still refused at once, while the ordinary write queued before it is still waiting."""
    blocker = apsw.Connection(home.paths.store)
    writer = home.client()
    pending: dict[str, Any] = {}

    def blocked_add() -> None:
        try:
            pending["ok"] = writer.call("memory.add", space="user", content="queued behind the lock")
        except HivememError as exc:
            pending["error"] = exc

    thread = threading.Thread(target=blocked_add)
    try:
        writer.connect()
        blocker.execute("BEGIN IMMEDIATE")
        thread.start()
        secret = SHAPES["anthropic"](Gen(28))
        assert_refused(refuse(owner, f"the key is {secret}"), secret)
        assert thread.is_alive() and not pending
    finally:
        blocker.execute("ROLLBACK")
        thread.join(20)
        blocker.close()
        writer.close()
    assert pending["ok"]["changed"] is True


@pytest.fixture
def stored_secret(home: Home) -> tuple[str, str]:
    """A store holding one secret row, as an older hivemem without the rule would have written it."""
    home.ok("memory", "add", "--space", "user", "--kind", "lesson", "--content", "deploys need a lesson first")
    home.stop_daemon()
    secret = SHAPES["google-api-key"](Gen(29))
    store = open_store(home.paths.store)
    try:
        p = NewMemory("user", f"deploys use {secret} for maps", kind="lesson")
        made = memories.add(store.conn, store.limits, owner_principal(), p, None)
    finally:
        store.close()
    return str(made["id"]), secret


def test_recall_drops_a_stored_secret_and_counts_it(home: Home, stored_secret: tuple[str, str]) -> None:
    memory, secret = stored_secret
    result = home.ok("memory", "recall", "--spaces", "user", "--query", "deploys lesson maps")
    assert secret not in result["text"] and memory not in result["text"]
    assert result["count"] == 1 and result["truncated"] is True
    assert "1 more matched but are not shown." in result["text"].splitlines()[0]
    start = home.ok("memory", "recall", "--spaces", "user")
    assert secret not in start["text"] and start["count"] == 1


def test_doctor_lists_stored_secrets_by_id_and_kind(home: Home, stored_secret: tuple[str, str]) -> None:
    memory, secret = stored_secret
    result = home.cli("doctor", "--json", token=None)
    checks = {c["id"]: c for c in result.json["checks"]}
    found = checks["secrets.stored"]
    assert (result.code, found["status"]) == (1, "fail")
    assert f"{memory} (gcp-api-key in content)" in found["message"] and "purge" in found["fix"]
    assert secret not in result.out + result.err
    home.cli("memory", "purge", "--id", memory)
    home.stop_daemon()
    clean = {c["id"]: c for c in home.cli("doctor", "--json", token=None).json["checks"]}["secrets.stored"]
    assert clean["status"] == "ok" and clean["message"] == "no live memory holds a secret"


def test_doctor_scans_through_the_running_daemon(home: Home) -> None:
    """While a daemon runs, doctor asks it to scan instead of skipping (docs/decisions.md D303)."""
    home.ok("memory", "add", "--space", "user", "--content", "a daemon is running")
    checks = {c["id"]: c for c in home.cli("doctor", "--json", token=None).json["checks"]}
    found = checks["secrets.stored"]
    assert found["status"] == "ok" and "skipped" not in found["message"]
    assert "1 this token reads" in found["message"] and "checked by the running daemon" in found["message"]


def test_the_attackers_shapes_are_refused_in_every_field(home: Home, owner: DaemonClient) -> None:
    """The shapes an attacker stored (Hugging Face, DigitalOcean, Shopify, Vault, Databricks, Grafana, Google OAuth,
    Azure AD, .netrc, Docker auths, age), each tried in every field a caller writes; none is stored or echoed."""
    made = dict(shapes(seed=27, names=ATTACKER))
    short = [v for v in made.values() if len(v.encode()) <= 64]  # session.start's harness holds at most 64 bytes
    target = owner.call("memory.add", space="user", content="a memory to relate and challenge")
    other = owner.call("memory.add", space="user", content="another memory to relate")
    member = ("host", "surface", "path", "thread_id", "action", "reason")
    missed: list[tuple[str, str]] = []
    for i, (name, value) in enumerate(made.items()):
        attempts: list[tuple[str, str, dict[str, Any]]] = [
            ("memory.add", "content", {"space": "user", "content": value}),
            ("memory.add", "title", {"space": "user", "content": "fine", "title": value}),
            ("memory.add", "tags", {"space": "user", "content": "fine", "tags": [value]}),
            ("memory.add", "source", {"space": "user", "content": "fine", "source": value[:128]}),
            ("memory.add", "provenance", {"space": "user", "content": "fine",
                                          "provenance": {"kind": "tool", member[i % len(member)]: value}}),
            ("memory.add", "space", {"space": value, "content": "fine"}),
            ("memory.capture", "content", {"space": "user", "content": value}),
            ("session.start", "harness", {"harness": short[i % len(short)]}),
            ("session.start", "harness_session", {"harness": "codex", "harness_session": value}),
            ("session.start", "cwd", {"harness": "codex", "cwd": "/home/ada/" + value}),
            ("memory.relate", "reason", {"source": other["id"], "target": target["id"], "relation": "related",
                                         "reason": value}),
            ("memory.challenge", "reason", {"id": target["id"], "revision": 1, "outcome": "still_valid",
                                            "reason": value}),
        ]  # fmt: skip
        for verb, param, params in attempts:
            try:
                owner.call(verb, **params)
            except HivememError as error:
                if error.code == CODE and error.data.get("param") == param:
                    assert not [v for v in values(value) if v in error.message + json.dumps(error.data)]
                    continue
            missed.append((name, f"{verb} {param}"))
    assert missed == []
    assert owner.call("store.status")["memories"] == 2


def test_the_purge_lines_of_docs_security_md_erase_each_stored_secret(
    home: Home, stored_secret: tuple[str, str]
) -> None:
    """docs/security.md's lines that purge what `hivemem hygiene` lists as a secret, run as printed on a store
    holding one (a fresh home, as tests/test_docs_examples.py runs them in, holds none)."""
    memory = stored_secret[0]
    block = next(b for b in sh_blocks("docs/security.md") if "hygiene --json" in b)
    env = {**home.env, "PATH": os.path.dirname(sys.executable) + os.pathsep + home.env["PATH"]}
    run = subprocess.run(["bash", "-c", "set -o pipefail\n" + block], env=env, cwd=home.base, capture_output=True,
                         timeout=120, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()
    gone = home.cli("memory", "get", "--id", memory)
    assert gone.code != 0 and "not_found.memory" in gone.err
    kept = home.ok("memory", "list", "--spaces", "user")
    assert len(kept["memories"]) == 1 and kept["memories"][0]["id"] != memory, kept
