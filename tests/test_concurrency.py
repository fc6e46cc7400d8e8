"""Concurrency through the real daemon (docs/protocol.md; conformance C04): revision races, duplicate races, reads
during a write."""

from __future__ import annotations

import bisect
import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import apsw
import pytest

from conftest import Home
from faults import chosen_seed, figure, size
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

N = 8


def race_cli(home: Home, argvs: list[list[str]]) -> list[tuple[int, Any]]:
    """Start every CLI call at once; return (exit code, parsed stdout) per call."""
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hivemem", *argv, "--json"],
            env=env,
            cwd=home.base,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for argv in argvs
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert out, err
        results.append((proc.returncode, json.loads(out)))
    return results


def test_racing_updates_from_one_revision_one_wins(home: Home) -> None:
    assert home.ok("memory", "add", "--space", "user", "--content", "original")["id"] == "m1"
    argvs = [["memory", "update", "--id", "m1", "--revision", "1", "--content", f"X_{i}"] for i in range(N)]
    results = race_cli(home, argvs)
    winners = [(i, out) for i, (code, out) in enumerate(results) if code == 0]
    losers = [out for code, out in results if code != 0]
    assert len(winners) == 1, results
    index, won = winners[0]
    assert won == {"id": "m1", "revision": 2, "changed": True}
    assert [code for code, _ in results].count(5) == N - 1, results
    for out in losers:
        assert out["error"]["code"] == "conflict.memory_revision"
        assert out["error"]["data"] == {"current": 2}
    memory = home.ok("memory", "get", "--id", "m1")
    assert (memory["content"], memory["revision"]) == (f"X_{index}", 2)
    assert [v["revision"] for v in home.ok("memory", "history", "--id", "m1")["versions"]] == [2, 1]


def test_racing_adds_of_one_text_make_one_memory(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "warm the daemon")
    results = race_cli(home, [["memory", "add", "--space", "team/x", "--content", "same text"]] * N)
    assert [code for code, _ in results] == [0] * N, results
    assert [out["changed"] for _, out in results].count(True) == 1, results
    assert {(out["id"], out["revision"]) for _, out in results} == {("m2", 1)}
    listed = home.ok("memory", "list", "--spaces", "team/x")["memories"]
    assert [m["id"] for m in listed] == ["m2"]


def test_racing_adds_on_open_connections(home: Home) -> None:
    """The same race with every connection already open, released by one barrier."""
    home.ok("whoami")
    clients = [home.client() for _ in range(N)]
    barrier = threading.Barrier(N)
    results: list[Any] = [None] * N

    def add(i: int) -> None:
        barrier.wait()
        results[i] = clients[i].call("memory.add", space="team/y", content="barrier text")

    try:
        for c in clients:
            c.connect()
        threads = [threading.Thread(target=add, args=(i,)) for i in range(N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        for c in clients:
            c.close()
    assert [r["changed"] for r in results].count(True) == 1, results
    assert len({r["id"] for r in results}) == 1
    assert len(home.ok("memory", "list", "--spaces", "team/y")["memories"]) == 1


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[float, Any]:
    started = time.monotonic()
    try:
        result = fn(*args, **kw)
    except HivememError as exc:
        result = exc
    return time.monotonic() - started, result


def test_reads_continue_while_an_external_writer_holds_the_store(home: Home) -> None:
    home.ok("memory", "add", "--space", "user", "--content", "Readers never wait for writers")
    reader, writer = home.client(), home.client()
    blocker = apsw.Connection(home.paths.store)
    try:
        reader.connect()
        writer.connect()
        blocker.execute("BEGIN IMMEDIATE")
        seconds, hits = timed(reader.call, "memory.search", query="readers wait")
        assert [h["id"] for h in hits["results"]] == ["m1"]
        assert seconds < 1.0
        pending: dict[str, Any] = {}

        def blocked_add() -> None:
            pending["r"] = timed(writer.call, "memory.add", space="user", content="blocked write")

        thread = threading.Thread(target=blocked_add)
        started = time.monotonic()
        thread.start()
        # For two seconds the write waits on the daemon's writer; reads keep answering at once.
        reads = 0
        while time.monotonic() - started < 2.0:
            seconds, got = timed(reader.call, "memory.get", id="m1")
            assert got["content"] == "Readers never wait for writers"
            assert seconds < 1.0
            reads += 1
        assert thread.is_alive() and reads > 10
        thread.join(20)
        seconds, error = pending["r"]
        assert isinstance(error, HivememError), error
        assert error.code == "unavailable.store_busy"
        assert seconds == pytest.approx(5.0, abs=1.5)
    finally:
        if not blocker.getautocommit():
            blocker.execute("ROLLBACK")
        blocker.close()
        reader.close()
        writer.close()
    assert home.ok("memory", "add", "--space", "user", "--content", "after the lock")["id"] == "m2"


# Jepsen-style workloads: CAS read-modify-write and list-append on a few memories, checked from the client-side
# history: every acknowledged append is in the final list exactly once, nothing unacknowledged is, the revisions a
# memory went through form one chain (each success read the revision just before the one it made), every read is a
# prefix of the final list, and the revision order agrees with real time (linearizability of each memory).


@dataclass
class History:
    # memory, read revision, new revision, element, invoked, acknowledged (time.monotonic() of the update)
    ok: list[tuple[str, int, int, str, float, float]] = field(default_factory=list)
    conflicts: int = 0
    reads: list[tuple[str, int, list[str], float, float]] = field(default_factory=list)  # memory, revision, items, ...
    other: list[str] = field(default_factory=list)


def cas_client(client: DaemonClient, n: int, ops: int, keys: list[str], seed: int, history: History) -> None:
    rng = random.Random(seed * 1000 + n)
    try:
        for op in range(ops):
            memory = rng.choice(keys)
            invoked = time.monotonic()
            got = client.call("memory.get", id=memory)
            items = got["content"].split()[1:]
            history.reads.append((memory, got["revision"], items, invoked, time.monotonic()))
            element = f"c{n}o{op}"
            invoked = time.monotonic()
            try:
                head = got["content"].split()[0]
                done = client.call("memory.update", id=memory, revision=got["revision"],
                                   content=" ".join([head, *items, element]))  # fmt: skip
            except HivememError as exc:
                if exc.code == "conflict.memory_revision":
                    history.conflicts += 1
                else:
                    history.other.append(f"{exc.code}: {exc}")
                continue
            history.ok.append((memory, got["revision"], done["revision"], element, invoked, time.monotonic()))
    finally:
        client.close()


def real_time_order(writes: list[tuple[int, float, float]], reads: list[tuple[int, float, float]]) -> list[str]:
    """One memory's operations as (revision made or seen, invoked, acknowledged). An operation invoked after another
    was acknowledged comes after it: a write makes a higher revision than any operation acknowledged before it was
    invoked, a read sees at least that revision, and no read sees a revision whose write began after the read ended."""
    done = sorted((acked, revision) for revision, _, acked in writes + reads)
    times, floor, highest = [t for t, _ in done], [], 1
    for _, revision in done:
        highest = max(highest, revision)
        floor.append(highest)

    def before(t: float) -> int:  # the highest revision made or seen by an operation acknowledged before t
        i = bisect.bisect_left(times, t)
        return floor[i - 1] if i else 1

    made = {revision: invoked for revision, invoked, _ in writes}
    problems = [f"the write of revision {r} began after revision {before(i)} was acknowledged"
                for r, i, _ in writes if r <= before(i)]  # fmt: skip
    problems += [f"a read saw revision {r} after revision {before(i)} was acknowledged"
                 for r, i, _ in reads if r < before(i)]  # fmt: skip
    problems += [f"a read saw revision {r}, whose write began after the read ended"
                 for r, _, a in reads if made.get(r, a) > a]  # fmt: skip
    return problems


def check_history(final: dict[str, tuple[int, list[str]]], histories: list[History], where: str) -> dict[str, int]:
    """Lost updates, duplicates, broken chains, non-prefix reads and real-time order: all must be zero."""
    ok = [entry for h in histories for entry in h.ok]
    reads = [entry for h in histories for entry in h.reads]
    problems: list[str] = [f"{where}: {o}" for h in histories for o in h.other]
    for memory, (revision, items) in final.items():
        mine = sorted((new, read, element) for m, read, new, element, _, _ in ok if m == memory)
        assert [new for new, _, _ in mine] == list(range(2, revision + 1)), f"{where} {memory}: revisions {mine[:5]}…"
        assert all(read == new - 1 for new, read, _ in mine), (
            f"{where} {memory}: a write that did not read its predecessor"
        )
        assert items == [element for _, _, element in mine], (
            f"{where} {memory}: final list differs from the acked appends"
        )
        assert len(set(items)) == len(items), f"{where} {memory}: duplicated elements"
        seen = [(r, invoked, acked, got) for m, r, got, invoked, acked in reads if m == memory]
        problems += [f"{where} {memory}: a read at revision {r} is not a prefix of the final list"
                     for r, _, _, got in seen if got != items[: len(got)]]  # fmt: skip
        writes = [(new, invoked, acked) for m, _, new, _, invoked, acked in ok if m == memory]
        order = real_time_order(writes, [(r, invoked, acked) for r, invoked, acked, _ in seen])
        problems += [f"{where} {memory}: {p}" for p in order]
    assert problems == [], problems[:10]
    return {
        "acknowledged": len(ok),
        "conflicts": sum(h.conflicts for h in histories),
        "reads": len(reads),
    }


@pytest.mark.fault
def test_cas_and_list_append_lose_nothing(home: Home) -> None:
    """16 clients x 250 CAS appends on 4 memories through the socket: 0 lost, 0 duplicated, 0 store_busy."""
    clients_n, ops = size(16, 16), size(250, 2000)
    home.ok("whoami")
    owner = home.client()
    keys = [owner.call("memory.add", space="cas", content=f"list{k}")["id"] for k in range(4)]
    owner.close()
    histories = [History() for _ in range(clients_n)]
    clients = [home.client() for _ in range(clients_n)]
    for c in clients:
        c.connect()
    seed = chosen_seed(15)
    started = time.monotonic()
    threads = [
        threading.Thread(target=cas_client, args=(clients[n], n, ops, keys, seed, histories[n]))
        for n in range(clients_n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    seconds = time.monotonic() - started
    reader = home.client()
    try:
        final = {}
        for memory in keys:
            got = reader.call("memory.get", id=memory)
            final[memory] = (got["revision"], got["content"].split()[1:])
    finally:
        reader.close()
    figures = check_history(final, histories, f"seed={seed}")
    figure("CAS list-append socket", clients=clients_n, attempts=clients_n * ops, seconds=round(seconds, 1),
           lost=0, duplicated=0, store_busy=0, seed=seed, **figures)  # fmt: skip
    assert figures["acknowledged"] + figures["conflicts"] == clients_n * ops, f"seed={seed}: {figures}"


@pytest.mark.fault
def test_cas_list_append_through_mcp(home: Home) -> None:
    """The same workload through real MCP sessions (one `hivemem mcp` process each)."""
    import anyio

    from conftest import mcp_session

    sessions, ops = size(16, 16), size(250, 250)
    home.ok("whoami")
    keys = [home.ok("memory", "add", "--space", "cas", "--content", f"list{k}")["id"] for k in range(2)]
    histories = [History() for _ in range(sessions)]
    seed = chosen_seed(16)

    async def worker(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        history = histories[n]
        async with mcp_session(home) as s:
            for op in range(ops):
                memory = rng.choice(keys)
                invoked = time.monotonic()
                got = (await s.call_tool("memory_get", {"id": memory})).structured_content
                words = got["content"].split()
                history.reads.append((memory, got["revision"], words[1:], invoked, time.monotonic()))
                element = f"c{n}o{op}"
                args = {"id": memory, "revision": got["revision"], "content": " ".join([*words, element])}
                invoked = time.monotonic()
                result = await s.call_tool("memory_update", args)
                if result.is_error:
                    code = json.loads(result.content[0].text)["code"]  # an error's only content (docs/mcp.md)
                    if code == "conflict.memory_revision":
                        history.conflicts += 1
                    else:
                        history.other.append(code)
                    continue
                made = result.structured_content["revision"]
                history.ok.append((memory, got["revision"], made, element, invoked, time.monotonic()))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for n in range(sessions):
                group.start_soon(worker, n)

    anyio.run(main)
    final = {}
    for memory in keys:
        got = home.ok("memory", "get", "--id", memory)
        final[memory] = (got["revision"], got["content"].split()[1:])
    figures = check_history(final, histories, f"seed={seed}")
    figure(
        "CAS list-append MCP", sessions=sessions, attempts=sessions * ops, lost=0, duplicated=0, seed=seed, **figures
    )
    assert figures["acknowledged"] + figures["conflicts"] == sessions * ops, f"seed={seed}: {figures}"
