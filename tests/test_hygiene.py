"""memory.hygiene (`hivemem hygiene`): every finding kind with a reason and a fix that works, grants, edge cases,
and a report that never writes."""

from __future__ import annotations

import json
import random
import re
import struct
import threading
from typing import Any

import anyio
import apsw

from conftest import Home, client_token, mcp_session, on_a_terminal, wait_for
from embedstub import running
from hivemem.auth import owner as owner_principal
from hivemem.client import DaemonClient
from hivemem.search.hygiene import KINDS
from hivemem.store import open_store
from hivemem.store.base import NewMemory

SPACE = "project/app"
AWS = "AKIA" + "IOSFODNN7EXAMPLF"  # split so that no scanner flags this file


def hygiene(client: DaemonClient, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.call("memory.hygiene", **params)
    return result


def of_kind(report: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["kind"] == kind]


def add(client: DaemonClient, content: str, space: str = SPACE, **fields: Any) -> str:
    ident: str = client.call("memory.add", space=space, content=content, **fields)["id"]
    return ident


def direct(home: Home, items: list[tuple[str, str]]) -> list[str]:
    """Memories added with the daemon stopped, through hivemem's own dispatch but without the write path's
    param checks: how rows from before a secret rule existed, or very many rows, come to be in a store."""
    home.ok("whoami")  # the store exists
    home.stop_daemon()
    store = open_store(home.paths.store)
    try:
        who = owner_principal()
        ids = []
        with store.transaction():
            for space, content in items:
                ids.append(store.memories.add(who, NewMemory(space, content), None)["id"])
        return ids
    finally:
        store.close()


def sql(home: Home, statement: str, args: tuple[Any, ...] = ()) -> None:
    """Change rows the way time would (the daemon stopped): there is no verb that ages a memory."""
    home.stop_daemon()
    conn = apsw.Connection(home.paths.store)
    try:
        conn.execute(statement, args)
    finally:
        conn.close()


def state(client: DaemonClient, ids: list[str]) -> tuple[int, list[int]]:
    """The newest event id and every memory's revision: what a write would change."""
    events = client.call("events.list", limit=1)["events"]
    return (events[0]["id"] if events else 0), [client.call("memory.get", id=i)["revision"] for i in ids]


def test_an_empty_store_and_a_space_with_one_memory(home: Home, owner: DaemonClient) -> None:
    empty = hygiene(owner)
    assert empty["findings"] == [] and empty["memories"] == 0 and not empty["truncated"]
    assert empty["counts"] == dict.fromkeys(KINDS, 0)
    add(owner, "a single memory, alone in its space")
    one = hygiene(owner, spaces=[SPACE])
    assert one["findings"] == [] and one["memories"] == 1
    printed = home.cli("hygiene", "--spaces", SPACE)
    assert printed.code == 0 and "no findings in 1 memories" in printed.out, printed


def test_every_finding_kind_has_a_reason_and_a_fix_that_works(home: Home, owner: DaemonClient) -> None:
    first = add(owner, "The API pins Zig 0.13.", kind="fact")
    dup = add(owner, "the api pins ZIG 0.13", kind="fact")
    near_a = add(owner, "deploy with make deploy from the release branch on friday afternoons", kind="procedure")
    near_b = add(owner, "deploy with make deploy from the release branch on friday", kind="procedure")
    tabs = add(owner, "Use tabs for indentation in Python files", kind="convention")
    no_tabs = add(owner, "Never use tabs for indentation in Python files", kind="convention")
    due = add(owner, "the staging cluster runs in eu-west-1", review_after="2020-01-01T00:00:00Z")
    expired = add(owner, "the freeze lasts until the launch", expires_at="2021-01-01T00:00:00Z")
    flagged = add(owner, "ci caches the go module directory", confidence_state="needs_review")
    gone = add(owner, "the old dashboard lives at grafana.internal")
    owner.call("memory.relate", source=first, target=gone, relation="related")
    owner.call("memory.delete", id=gone, revision=1)
    owner.call("memory.search", query="staging cluster", spaces=[SPACE], record_usage=True)
    (secret,) = direct(home, [(SPACE, f"the deploy key is {AWS} for staging")])
    sql(home, "UPDATE memories SET created = '2020-01-01T00:00:00.000Z'")
    owner = home.client()
    try:
        report = hygiene(owner, spaces=[SPACE])
        found = {(f["kind"], tuple(f["memories"])) for f in report["findings"]}
        assert ("duplicate", (first, dup)) in found
        assert ("near_duplicate", (near_a, near_b)) in found
        assert ("contradiction_candidate", (tabs, no_tabs)) in found
        assert {f["memories"][0] for f in of_kind(report, "stale")} == {due, expired, flagged}
        assert ("secret", (secret,)) in found
        assert ("orphan_relation", (first,)) in found
        unused = {f["memories"][0] for f in of_kind(report, "unused")}
        assert due not in unused and first in unused, "the recalled memory is used"
        assert report["usage_recorded"] is True
        assert set(report["counts"]) == set(KINDS) and all(report["counts"][k] > 0 for k in KINDS)
        assert AWS not in json.dumps(report), "a secret finding names the kind, never the value"
        for f in report["findings"]:
            assert f["reason"] and f["fix"].removeprefix("HIVEMEM_TOKEN=@owner ").split()[1:3] == f["action"][
                "verb"
            ].split(".")
        # every fix is one explicit verb call; once applied, its finding is gone
        for kind in ("duplicate", "near_duplicate", "contradiction_candidate", "orphan_relation", "secret"):
            action = of_kind(report, kind)[0]["action"]
            extra = {"confirm": True} if action["verb"] == "memory.challenge" else {}
            owner.call(action["verb"], **action["params"], **extra)
        after = hygiene(owner, spaces=[SPACE])
        left = {(f["kind"], tuple(f["memories"])) for f in after["findings"]}
        for kind, ids in (("duplicate", (first, dup)), ("near_duplicate", (near_a, near_b)),
                          ("contradiction_candidate", (tabs, no_tabs)), ("orphan_relation", (first,)),
                          ("secret", (secret,))):  # fmt: skip
            assert (kind, ids) not in left, kind
    finally:
        owner.close()


def test_the_report_writes_nothing(home: Home, owner: DaemonClient) -> None:
    ids = [add(owner, "one fact about the build", kind="fact"), add(owner, "One fact about the build!", kind="fact")]
    ids.append(add(owner, "due again", review_after="2020-01-01T00:00:00Z"))
    before = state(owner, ids)
    audits = [owner.call("memory.audit", id=i)["events"] for i in ids]
    for _ in range(2):
        assert hygiene(owner)["counts"]["duplicate"] == 1
        assert home.cli("hygiene").code == 0
    assert state(owner, ids) == before
    assert [owner.call("memory.audit", id=i)["events"] for i in ids] == audits


def test_ten_thousand_copies_of_one_text(home: Home) -> None:
    text = "Run the migrations before deploying the api"
    copies = [(SPACE, f"{text} {'-' * (i // 100)}{'.' * (i % 100)}") for i in range(10000)]
    ids = direct(home, copies)
    client = home.client()
    try:
        report = hygiene(client, spaces=[SPACE])
        assert report["memories"] == 10000
        assert report["counts"]["duplicate"] == 9999 and report["truncated"] is True
        assert len(report["findings"]) == 200
        keep = {f["memories"][1] for f in report["findings"]}
        assert keep == {ids[-1]}, "one memory is kept, the newest"
        assert report["counts"]["near_duplicate"] == 0
    finally:
        client.close()
    # the worker's progress reaches a terminal as a bar with counts (and nothing with --json)
    code, out, terminal = on_a_terminal(home, "hygiene", "--spaces", SPACE)
    assert code == 0 and "duplicate" in out, terminal
    bars = re.findall(r"hivemem hygiene: comparing \[([#-]{24})\] ([\d,]+)/10,000 ", terminal)
    assert bars and bars[-1] == ("#" * 24, "10,000"), terminal
    assert "scanning for secrets [" in terminal, terminal
    code, out, terminal = on_a_terminal(home, "hygiene", "--spaces", SPACE, "--json")
    assert code == 0 and json.loads(out)["memories"] == 10000 and terminal == ""


def test_memories_in_several_languages(home: Home, owner: DaemonClient) -> None:
    wide = add(owner, "ＡＰＩの設定は東京リージョンです")  # fullwidth Latin: the same key as the next
    narrow = add(owner, "APIの設定は東京リージョンです")
    cj_a = add(owner, "本番環境のデータベースは毎晩午前三時にバックアップされます")
    cj_b = add(owner, "本番環境のデータベースは毎晩午前三時にバックアップされる")
    ru_a = add(owner, "Сервер сборки обновляется каждую пятницу вечером")
    ru_b = add(owner, "сервер сборки обновляется каждую пятницу вечером!")
    ar_a = add(owner, "يتم نشر التطبيق كل يوم جمعة بعد الظهر")
    ar_b = add(owner, "يتم نشر التطبيق كل يوم جمعة")
    other = add(owner, "Тестовый кластер находится в Амстердаме")
    report = hygiene(owner)
    found = {(f["kind"], tuple(f["memories"])) for f in report["findings"]}
    assert ("duplicate", (wide, narrow)) in found
    assert ("duplicate", (ru_a, ru_b)) in found
    assert ("near_duplicate", (cj_a, cj_b)) in found
    assert ("near_duplicate", (ar_a, ar_b)) in found
    assert other not in {m for f in report["findings"] for m in f["memories"]}


def test_a_client_with_narrow_grants_sees_only_what_it_reads(home: Home, owner: DaemonClient) -> None:
    mine = add(owner, "the build uses bazel", space="team/a")
    add(owner, "The build uses Bazel!", space="team/a")
    theirs = add(owner, "secret plans for the launch", space="team/b")
    add(owner, "Secret plans for the launch.", space="team/b")
    gone = add(owner, "the old plan", space="team/b")
    owner.call("memory.relate", source=mine, target=gone, relation="related")
    owner.call("memory.delete", id=gone, revision=1)
    token = client_token(owner, "narrow", [("read", "space:team/a")])
    narrow = home.client(token)
    try:
        report = hygiene(narrow)
        assert report["memories"] == 2 and report["counts"]["duplicate"] == 1
        assert report["counts"]["orphan_relation"] == 0, "the deleted end is unreadable: nothing is said of it"
        assert (
            "team/b" not in json.dumps(report) and theirs not in json.dumps(report) and gone not in json.dumps(report)
        )
        denied = home.cli("hygiene", "--spaces", "team/b", "--json", token=token)
        assert denied.code != 0 and denied.json["error"]["code"] == "denied.read"
    finally:
        narrow.close()
    everything = hygiene(owner)
    assert everything["counts"]["duplicate"] == 2 and everything["counts"]["orphan_relation"] == 1


def test_a_memory_purged_while_the_report_runs(home: Home) -> None:
    rng = random.Random(7)
    vocabulary = [f"{a}{b}{c}" for a in "bdfgklmnprst" for b in "aeiou" for c in "nrstlk"]
    items = [(SPACE, " ".join(rng.choices(vocabulary, k=12))) for _ in range(4000)]
    items += [(SPACE, "the purged memory's text"), (SPACE, "The purged memory's text.")]
    ids = direct(home, items)
    victim = ids[-1]
    client, purger = home.client(), home.client()
    try:
        results: list[dict[str, Any]] = []
        report = threading.Thread(target=lambda: results.append(hygiene(client, limit=2000)))
        report.start()
        purger.call("memory.purge", id=victim)
        report.join(120)
        assert len(results) == 1
        during = results[0]
        ids_seen = {m for f in during["findings"] for m in f["memories"]}
        assert during["memories"] in (len(ids), len(ids) - 1), "one snapshot: the purge is in it or not"
        assert (victim in ids_seen) == (during["memories"] == len(ids))
        after = hygiene(client, limit=2000)
        assert victim not in {m for f in after["findings"] for m in f["memories"]}
        assert after["memories"] == len(ids) - 1
    finally:
        client.close()
        purger.close()


def test_vector_duplicates_with_embeddings_on(home: Home) -> None:
    with running() as stub:
        same = [1.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        stub.table["\n\nour deploys happen on fridays"] = same
        stub.table["\n\nwe ship every friday"] = same
        home.config(stub.config())
        home.ok("whoami")
        client = home.client()
        try:
            a, b = add(client, "our deploys happen on fridays"), add(client, "we ship every friday")

            def settled() -> bool:
                return bool(client.call("store.status")["pending"] == 0)

            assert wait_for(settled)
            report = hygiene(client)
            assert report["embeddings"] == "http"
            (dup,) = of_kind(report, "duplicate")
            assert dup["memories"] == [a, b] and dup["similarity"] >= 0.95 and "vector similarity" in dup["reason"]
        finally:
            client.close()


def test_vector_duplicates_in_a_report_read_page_by_page(home: Home) -> None:
    """A report large enough for the worker process reads its memories and their vectors a page at a time
    (D221, D223): pairs whose two halves sit thousands of ids apart, in different pages, are still compared."""
    pairs = 3000
    firsts = [(f"pair/{i}", f"alpha number {i}") for i in range(pairs)]
    seconds = [(f"pair/{i}", f"omega beta {i}") for i in range(pairs)]
    with running() as stub:
        home.config(stub.config())
        ids = direct(home, firsts + seconds)
        same = set(range(0, pairs, 500))  # these pairs share one vector; the others' two vectors are orthogonal
        conn = apsw.Connection(home.paths.store)
        try:
            with conn:
                for i, (a, b) in enumerate(zip(ids[:pairs], ids[pairs:], strict=True)):
                    for memory, vector in ((a, (1.0, 0.0)), (b, (1.0, 0.0) if i in same else (0.0, 1.0))):
                        blob = struct.pack("<8f", *vector, *[0.0] * 6)
                        conn.execute("INSERT INTO memory_vectors(memory, model, embedding) VALUES (?, 'stub-a', ?)",
                                     (int(memory[1:]), blob))  # fmt: skip
        finally:
            conn.close()
        client = home.client()
        try:
            assert client.call("store.status")["pending"] == 0
            report = hygiene(client, limit=100)
            assert report["memories"] == 2 * pairs and report["embeddings"] == "http"
            found = of_kind(report, "duplicate")
            assert sorted(f["memories"][0] for f in found) == sorted(ids[i] for i in same)
            assert all("vector similarity" in f["reason"] for f in found)
            assert report["counts"]["duplicate"] == len(same) and report["counts"]["near_duplicate"] == 0
        finally:
            client.close()


def test_hygiene_through_the_cli_and_mcp(home: Home, owner: DaemonClient) -> None:
    add(owner, "tables come from records")
    add(owner, "Tables come from records.")
    printed = home.cli("hygiene")
    assert printed.code == 0
    lines = printed.out.splitlines()
    assert lines[0].split()[:4] == ["KIND", "IDS", "SPACE", "REASON"]
    assert lines[1].startswith("duplicate") and "m1,m2" in lines[1]
    assert lines[-1] == "1 duplicate in 2 memories"
    assert printed.err == "", "no progress line on a pipe"

    async def main() -> None:
        async with mcp_session(home) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tools["memory_hygiene"].annotations.read_only_hint is True
            result = await s.call_tool("memory_hygiene", {})
            assert result.structured_content["counts"]["duplicate"] == 1

    anyio.run(main)


def test_doctor_summarizes_the_counts_in_one_line(home: Home, owner: DaemonClient) -> None:
    add(owner, "the cache lives in redis")
    add(owner, "The cache lives in Redis.")
    add(owner, "due soon", review_after="2020-01-01T00:00:00Z")
    report = home.cli("doctor", "--json")
    line = next(c for c in report.json["checks"] if c["id"] == "memory.hygiene")
    assert line["status"] == "warn" and line["message"] == "2 findings (1 duplicate, 1 stale) in 3 memories", line
    assert "hivemem hygiene" in line["fix"]
    home.stop_daemon()
    stopped = home.cli("doctor", "--json")
    line = next(c for c in stopped.json["checks"] if c["id"] == "memory.hygiene")
    assert line["status"] == "warn" and line["message"].startswith("skipped: the daemon is not running"), line
    assert home.daemon_pid() is None


def test_the_session_start_hint_is_off_by_default_and_one_line_when_on(home: Home) -> None:
    for n in range(3):
        home.ok("memory", "add", "--space", "user", "--content", f"check the {n} dashboards", "--kind", "convention",
                "--review-after", "2020-01-01T00:00:00Z")  # fmt: skip
    payload = json.dumps({"session_id": "s-hint", "cwd": "/", "source": "startup"})

    def context() -> str:
        result = home.cli("hook", "session-start", stdin=payload, token=None)
        assert result.code == 0 and result.err == "", result
        return str(json.loads(result.out)["hookSpecificOutput"]["additionalContext"]) if result.out.strip() else ""

    assert "due for review" not in context()
    home.ok("config", "set", "--key", "recall.hygiene_hint", "--value", "true")
    lines = [line for line in context().splitlines() if "due for review" in line]
    assert lines == ["hivemem: 3 memories are due for review (hivemem hygiene)"]
