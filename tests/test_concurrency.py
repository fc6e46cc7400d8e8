"""Concurrency through the real daemon (SPEC 6.1, C04): revision races, duplicate races, reads during a write."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import apsw
import pytest

from conftest import Home
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
