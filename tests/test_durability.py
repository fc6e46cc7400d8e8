"""Durability and erasure (docs/reliability.md, docs/memories.md, docs/protocol.md; conformance C02): acknowledged
writes survive a kill -9 loop and SIGTERM under load; purge leaves no bytes behind."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import apsw
import pytest

from conftest import Home, wait_for
from faults import check_copy, chosen_seed, copy_of, figure, size
from test_wire import Raw, owner_key

WRITERS = 4

# Each writer adds memories in a loop and appends every acknowledged add to its file (fsynced before
# the next request). On any error it reconnects and retries the same text: a safe retry (docs/protocol.md).
# The "cli" writer does the same through the real CLI, one process per add.
WRITER = r"""
import json, os, subprocess, sys, time
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

name, ack_path, stop_path, how = sys.argv[1:5]
out = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
client, i, errors = None, 0, 0
while not os.path.exists(stop_path):
    content = f"writer {name} item {i} " + "payload " * (i % 7)
    try:
        if how == "cli":
            proc = subprocess.run([sys.executable, "-m", "hivemem", "memory", "add", "--space", "load",
                                   "--content", content, "--json"], capture_output=True, timeout=60)
            if proc.returncode != 0:
                raise OSError(proc.stdout.decode() + proc.stderr.decode())
            result = json.loads(proc.stdout)
        else:
            if client is None:
                client = DaemonClient(token="@owner")
            result = client.call("memory.add", space="load", content=content)
    except (HivememError, OSError, ValueError) as exc:
        errors += 1
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        if client is not None:
            client.close()
        client = None
        time.sleep(0.01)
        continue
    os.write(out, (json.dumps({"id": result["id"], "content": content}) + "\n").encode())
    os.fsync(out)
    i += 1
sys.stderr.write(f"errors={errors}\n")
"""


def read_acks(paths: list[str]) -> list[dict[str, str]]:
    acks = []
    for path in paths:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                acks += [json.loads(line) for line in f if line.endswith("\n")]
    return acks


def start_writers(home: Home, work: str, n: int, cli: int = 0) -> tuple[list[subprocess.Popen[bytes]], list[str], str]:
    """n writers on the socket and `cli` writers through the CLI; their ack files and the stop file."""
    stop = os.path.join(work, "stop")
    ack_files = [os.path.join(work, f"w{i}.jsonl") for i in range(n + cli)]
    env = dict(home.env, HIVEMEM_TOKEN="@owner")
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(i), ack_files[i], stop, "cli" if i >= n else "socket"],
            env=env,
            cwd=home.base,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in range(n + cli)
    ]
    return writers, ack_files, stop


def stop_writers(writers: list[subprocess.Popen[bytes]], stop: str) -> list[str]:
    with open(stop, "w"):
        pass
    stderr = [w.communicate(timeout=90)[1].decode() for w in writers]
    assert all(w.returncode == 0 for w in writers), stderr
    return stderr


def check_acknowledged(home: Home, acks: list[dict[str, str]], where: str) -> None:
    """Every acknowledged add readable with its text; then, stopped, the store passes every check."""
    client = home.client()
    try:
        for ack in acks:
            got = client.call("memory.get", id=ack["id"])["content"]
            assert got == ack["content"], f"{where}: acknowledged {ack}, stored {got!r}"
        stored = client.call("store.status")["memories"]
    finally:
        client.close()
    reused = sorted(i for i, n in Counter(a["id"] for a in acks).items() if n > 1)
    assert reused == [] and len(acks) <= stored, f"{where}: ids acknowledged twice (a lost add's id reused) {reused}"
    home.stop_daemon()
    with copy_of(home.paths.store) as copy:
        problems = check_copy(copy)  # integrity_check, FTS index, event chain, row+version+event together
    assert problems == [], f"{where}: {problems[:20]}"


@pytest.mark.fault
def test_acknowledged_adds_survive_kill_9(home: Home) -> None:
    """The kill -9 loop: socket writers and a CLI writer; kill the daemon again and again; nothing is lost."""
    home.ok("whoami")
    work = os.path.join(home.base, "acks")
    os.mkdir(work)
    rounds = size(100, 1000)
    seed = chosen_seed(20261203)
    rng = random.Random(seed)  # how many acknowledged adds between two kills: 1 to 9
    writers, ack_files, stop = start_writers(home, work, WRITERS, cli=1)
    killed = []
    where = f"seed={seed}"
    try:
        for round_ in range(1, rounds + 1):
            where = f"seed={seed} kill {round_}/{rounds}"
            need = len(read_acks(ack_files)) + rng.randint(1, 9)
            assert wait_for(lambda n=need: len(read_acks(ack_files)) >= n, 60), f"{where}: no progress"
            pid = home.daemon_pid()
            assert pid is not None, where
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            assert wait_for(lambda p=pid: home.daemon_pid() not in (None, p), 30), f"{where}: no daemon after it"
        assert wait_for(lambda: len(read_acks(ack_files)) >= 5 * rounds + 20, 60), f"{where}: no progress after"
    finally:
        stderr = stop_writers(writers, stop)
    assert sum(int(e.rsplit("errors=", 1)[1]) for e in stderr) >= 1, f"seed={seed}: no writer saw the kill"
    acks = read_acks(ack_files)
    assert len(read_acks(ack_files[WRITERS:])) >= 1, f"seed={seed}: the CLI writer got nothing acknowledged"
    figure("kill -9 loop", kills=len(killed), acknowledged=len(acks), lost=0, seed=seed)
    check_acknowledged(home, acks, f"seed={seed} after {len(killed)} kills")


DRAIN_SECONDS = 2.0  # docs/protocol.md: on SIGTERM in-flight requests finish within 2 s
# After the drain the daemon checkpoints the WAL, joins its threads and exits. Measured on a 2-core VM under the
# writers' load (soak tier, 50 stops): the in-flight adds answered at most 0.11 s after SIGTERM, the daemon gone at
# most 0.51 s after it. 0.5 s of margin for the exit keeps a loaded CI machine within the bound.
EXIT_MARGIN = 0.5
PROBES = 6  # connections whose adds are in flight when SIGTERM arrives


def unread(sock: socket.socket) -> int:
    """Bytes this end sent that the peer has not read yet (SIOCOUTQ of a unix socket)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0])


def sigterm_with_adds_in_flight(home: Home, where: str, texts: list[str]) -> tuple[float, float, list[str]]:
    """Adds are read by the daemon but held (another connection holds the write lock), then SIGTERM: each is answered
    ok. Returns seconds from the signal to the last reply and to the daemon's exit, and the ids added."""
    home.ok("whoami")  # a daemon is up (the writers may have started it already)
    pid = home.daemon_pid()
    assert pid is not None, where
    probes = [Raw(home.paths.socket) for _ in texts]
    blocker = apsw.Connection(home.paths.store)
    blocker.set_busy_timeout(10000)  # the writers commit all the time: wait for a turn
    try:
        for probe in probes:
            probe.hello(owner_key(home))
        blocker.execute("BEGIN IMMEDIATE")  # the daemon's writes now wait in its busy handler
        for n, (probe, text) in enumerate(zip(probes, texts, strict=True)):
            probe.send({"id": f"probe-{n}", "verb": "memory.add", "params": {"space": "load", "content": text}})
        read = wait_for(lambda: all(unread(p.sock) == 0 for p in probes), 10)
        assert read, f"{where}: the daemon did not read the probes' requests"
        started = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        blocker.execute("ROLLBACK")
        replies = []
        for n, probe in enumerate(probes):
            try:
                replies.append(probe.reply())
            except (ConnectionError, OSError) as exc:
                raise AssertionError(f"{where}: probe {n}, in flight at SIGTERM, got no reply: {exc!r}") from exc
        answered = time.monotonic() - started
        assert wait_for(lambda: not alive(pid), DRAIN_SECONDS + 10), f"{where}: the daemon did not stop"
        gone = time.monotonic() - started
    finally:
        if not blocker.getautocommit():
            blocker.execute("ROLLBACK")
        blocker.close()
        for probe in probes:
            probe.close()
    assert [r.get("id") for r in replies] == [f"probe-{n}" for n in range(len(texts))], f"{where}: {replies}"
    assert all("ok" in r for r in replies), f"{where}: in-flight adds not answered ok: {replies}"
    assert answered < DRAIN_SECONDS, f"{where}: the in-flight adds were answered {answered:.2f} s after SIGTERM"
    assert gone < DRAIN_SECONDS + EXIT_MARGIN, f"{where}: the daemon took {gone:.2f} s to exit after SIGTERM"
    return answered, gone, [r["ok"]["id"] for r in replies]


@pytest.mark.fault
def test_sigterm_during_writes_finishes_in_time(home: Home) -> None:
    """SIGTERM under write load with adds in flight: each in-flight add is answered ok and committed, the daemon
    is gone within the 2 s deadline of docs/protocol.md (plus the margin of a process exit), logs a clean stop,
    and every acknowledged add is kept."""
    home.ok("whoami")
    work = os.path.join(home.base, "acks")
    os.mkdir(work)
    rounds = size(5, 50)
    writers, ack_files, stop = start_writers(home, work, WRITERS)
    slowest = (0.0, 0.0)
    probed: list[dict[str, str]] = []
    try:
        for round_ in range(1, rounds + 1):
            where = f"round {round_}/{rounds}"
            need = len(read_acks(ack_files)) + 10
            assert wait_for(lambda n=need: len(read_acks(ack_files)) >= n, 60), f"{where}: no progress"
            texts = [f"probe {round_} {n} in flight at SIGTERM" for n in range(PROBES)]
            answered, gone, ids = sigterm_with_adds_in_flight(home, where, texts)
            slowest = (max(slowest[0], answered), max(slowest[1], gone))
            probed += [{"id": i, "content": t} for i, t in zip(ids, texts, strict=True)]
    finally:
        stderr = stop_writers(writers, stop)
    log = home.daemon_log()
    assert log.count("stopping: signal SIGTERM") == rounds and log.count("stopped") >= rounds, stderr
    acks = read_acks(ack_files)
    figure("SIGTERM under load", stops=rounds, in_flight_answered=len(probed), slowest_answer_s=round(slowest[0], 3),
           slowest_exit_s=round(slowest[1], 3), acknowledged=len(acks) + len(probed), lost=0)  # fmt: skip
    check_acknowledged(home, acks + probed, "SIGTERM under load")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ", 1)[1][0] != "Z"


def data_files(*roots: str) -> Iterator[str]:
    for root in roots:
        for base, _, files in os.walk(root):
            yield from (os.path.join(base, f) for f in files)


def files_holding(needles: list[bytes], *roots: str) -> list[tuple[str, bytes]]:
    hits = []
    for path in data_files(*roots):
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            blob = f.read()
        hits += [(path, n) for n in needles if n in blob]
    return hits


def make_backup(home: Home, name: str = "store.db.bak-test") -> str:
    """A backup in backups/ made with `VACUUM INTO` while no daemon runs."""
    home.stop_daemon()
    backups = os.path.join(home.paths.data_dir, "backups")
    os.makedirs(backups, mode=0o700, exist_ok=True)
    dest = os.path.join(backups, name)
    old = os.umask(0o077)
    conn = apsw.Connection(home.paths.store)
    try:
        conn.execute("VACUUM INTO ?", (dest,))
    finally:
        conn.close()
        os.umask(old)
    return dest


def test_purge_erases_every_byte_of_the_text(home: Home) -> None:
    tail = uuid.uuid4().hex + "7"
    marker = f"Qzvx{tail}"
    needles = [marker.encode(), marker.lower().encode(), tail.encode()]
    for i in range(12):
        home.ok("memory", "add", "--space", "user", "--content", f"filler memory number {i} about quick things")
    target = home.ok("memory", "add", "--space", "user", "--title", f"about {marker}",
                     "--content", f"The secret phrase is {marker} and must go", "--tags", "purge-me")["id"]  # fmt: skip
    for revision in (1, 2):
        home.ok("memory", "update", "--id", target, "--revision", str(revision),
                "--content", f"The secret phrase is {marker} revision {revision + 1}")  # fmt: skip
    backup = make_backup(home)
    assert files_holding(needles, os.path.dirname(backup)), "the backup should hold the text before purge"
    assert home.ok("memory", "search", "--query", marker)["results"][0]["id"] == target
    assert files_holding(needles, home.paths.data_dir), "the store should hold the text before purge"

    assert home.ok("memory", "purge", "--id", target) == {"id": target}
    roots = (home.paths.data_dir, home.paths.state)
    assert files_holding(needles, *roots) == []
    wal = home.paths.store + "-wal"
    assert not os.path.exists(wal) or os.path.getsize(wal) == 0
    missing = home.cli("memory", "get", "--id", target, "--include-deleted", "--json")
    assert (missing.code, missing.json["error"]["code"]) == (3, "not_found.memory")
    assert home.ok("memory", "search", "--query", marker)["results"] == []
    assert home.ok("store", "status")["memories"] == 12

    home.stop_daemon()
    assert files_holding(needles, *roots) == []
    number = int(target[1:])
    for path, others in ((home.paths.store, 12), (backup, 12)):
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            assert conn.execute("SELECT count(*) FROM memories WHERE id = ?", (number,)).fetchall() == [(0,)]
            assert conn.execute("SELECT count(*) FROM memory_versions WHERE memory = ?", (number,)).fetchall() == [(0,)]
            assert conn.execute("SELECT count(*) FROM memories").fetchall() == [(others,)]
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()
    conn = apsw.Connection(home.paths.store, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        events = conn.execute("SELECT type, data FROM events WHERE memory = ? ORDER BY id", (number,)).fetchall()
    finally:
        conn.close()
    assert [t for t, _ in events] == ["memory.added", "memory.updated", "memory.updated", "memory.purged"]
    assert all(marker not in str(data) and tail not in str(data) for _, data in events)


def damage(path: str, how: str, marker: str) -> None:
    """Make a backup hivemem cannot scrub: not a database at all, or a database with a corrupt page."""
    if how == "not_a_database":
        with open(path, "wb") as f:
            f.write(f"a copy someone kept: {marker}\n".encode() * 50)
        return
    with open(path, "r+b") as f:
        page = int.from_bytes(f.read(18)[16:18], "big")  # the page size, from the SQLite file header
        pages = os.path.getsize(path) // page
        assert pages > 4
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)


@pytest.mark.parametrize("how", ["not_a_database", "corrupt_page"])
def test_purge_fails_naming_a_backup_it_cannot_scrub(home: Home, how: str) -> None:
    marker = f"Qzvx{uuid.uuid4().hex}"
    for i in range(40):
        home.ok("memory", "add", "--space", "user", "--content", f"filler {i} " + "padding words " * 60)
    target = home.ok("memory", "add", "--space", "user", "--content", f"The secret phrase is {marker}")["id"]
    good = make_backup(home, "store.db.bak-good")
    bad = make_backup(home, "store.db.bak-damaged")
    damage(bad, how, marker)

    result = home.cli("memory", "purge", "--id", target, "--json")
    assert (result.code, result.json["error"]["code"]) == (1, "failed.store"), result
    error = result.json["error"]
    assert (error["data"]["path"], error["data"]["paths"]) == (bad, [bad])
    assert bad in error["message"] and error["data"]["fix"]
    # Everything hivemem could erase is erased: the store and the readable backup.
    missing = home.cli("memory", "get", "--id", target, "--include-deleted", "--json")
    assert (missing.code, missing.json["error"]["code"]) == (3, "not_found.memory")
    home.stop_daemon()
    assert [path for path, _ in files_holding([marker.encode()], home.paths.data_dir) if path != bad] == []
    with open(good, "rb") as f:
        assert marker.encode() not in f.read()
