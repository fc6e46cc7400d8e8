"""Helpers of the fault suite: the daemon on the fault VFS, a checked copy of a store, the soak switch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import pytest

from conftest import FIGURES, Home, wait_for
from hivemem.client import DaemonClient
from hivemem.errors import HivememError

SOAK = os.environ.get("HIVEMEM_SOAK") == "1"
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faultvfs.py")


def size(ci: int, soak: int) -> int:
    """The CI size of a loop, or its soak size with HIVEMEM_SOAK=1."""
    return soak if SOAK else ci


def chosen_seed(default: int) -> int:
    """A randomized test's seed: HIVEMEM_FAULT_SEED when set (to replay a failure), else the test's own. Printed
    (pytest shows it with a failure), and every assertion message of the test names it too."""
    value = int(os.environ.get("HIVEMEM_FAULT_SEED") or default)
    sys.stdout.write(f"\nseed={value} (HIVEMEM_FAULT_SEED={value} replays it)\n")
    return value


def figure(name: str, **numbers: Any) -> None:
    """One line of figures, printed in the run's summary (and at once with -s); docs/reliability.md quotes them."""
    line = f"{name}: {json.dumps(numbers, sort_keys=True)}"
    FIGURES.append(line)
    sys.stdout.write(f"\nFIGURES {line}\n")


def explicit(home: Home) -> None:
    """No on-demand start: only the daemon a test launches serves this home."""
    home.config('[daemon]\nstartup = "explicit"\n')


def launch(home: Home, settings: dict[str, str | int] | None = None, *, control: bool = False) -> subprocess.Popen[str]:
    """Start the real daemon on the fault VFS (settings: mode, seed, cut_at, arm, sync)."""
    env = dict(home.env)
    for key, value in (settings or {}).items():
        env[f"HIVEMEM_FAULT_{key.upper()}"] = str(value)
    if control:
        env["HIVEMEM_FAULT_CONTROL"] = "1"
    return subprocess.Popen(
        [sys.executable, LAUNCHER, "serve"], env=env, cwd=home.base, text=True,
        stdin=subprocess.PIPE if control else subprocess.DEVNULL,
        stdout=subprocess.PIPE if control else subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def ready(home: Home, proc: subprocess.Popen[str], timeout: float = 30) -> bool:
    """Wait until the launched daemon answers, or has exited (False)."""

    def answers() -> bool:
        if proc.poll() is not None:
            return True
        try:
            client = home.client(start=False)
            try:
                client.call("whoami")
            finally:
                client.close()
        except (HivememError, OSError):
            return False
        return True

    assert wait_for(answers, timeout, 0.02), "the fault daemon neither served nor exited"
    return proc.poll() is None


def command(proc: subprocess.Popen[str], line: str) -> dict[str, Any]:
    """One control command to a launched daemon; its JSON answer."""
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    stdin.write(line + "\n")
    stdin.flush()
    answer: dict[str, Any] = json.loads(stdout.readline())
    return answer


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str]:
    """Wait for a launched daemon to end; its return code and stderr (a second call: "" for stderr)."""
    if proc.stderr is not None and proc.stderr.closed:
        return proc.wait(timeout), ""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()
    err = proc.stderr.read() if proc.stderr is not None else ""
    proc.wait(timeout)
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode, err


def store_files(store: str) -> list[str]:
    return [p for p in (store, store + "-wal", store + "-journal") if os.path.exists(p)]


@contextmanager
def copy_of(store: str) -> Iterator[str]:
    """A copy of the store's files as the disk holds them (no -shm: a power cut loses shared memory)."""
    scratch = tempfile.mkdtemp(prefix="hm-copy-")
    try:
        target = os.path.join(scratch, "store.db")
        for path in store_files(store):
            shutil.copyfile(path, target + path[len(store) :])
        yield target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_copy(path: str) -> list[str]:
    """Every check of the store on a copy: integrity_check, foreign keys, the event chain, the FTS index, and
    that each memory's row, FTS entry, version and added event are there together."""
    from hivemem.store.sqlite import fts_index, integrity
    from hivemem.store.sqlite.db import all_rows, connect

    conn = connect(path)
    try:
        problems = [json.dumps(f) for f in integrity.run(conn)] + fts_index.problems(conn)
        half = all_rows(conn, """
            SELECT m.id FROM memories m
            WHERE NOT EXISTS (SELECT 1 FROM memory_versions v WHERE v.memory = m.id AND v.revision = m.revision)
               OR NOT EXISTS (SELECT 1 FROM events e WHERE e.memory = m.id AND e.type = 'memory.added')""")  # fmt: skip
        problems += [f"m{row[0]} lacks its current version or its added event" for row in half]
    finally:
        conn.close()
    return problems


def contents(path: str) -> dict[str, str]:
    """Wire id -> content of every memory row in a (copied) store."""
    from hivemem.store.sqlite.db import all_rows, connect

    conn = connect(path, readonly=True)
    try:
        return {f"m{i}": c for i, c in all_rows(conn, "SELECT id, content FROM memories")}
    finally:
        conn.close()


def revisions(path: str) -> dict[str, int]:
    from hivemem.store.sqlite.db import all_rows, connect

    conn = connect(path, readonly=True)
    try:
        return {f"m{i}": r for i, r in all_rows(conn, "SELECT id, revision FROM memories")}
    finally:
        conn.close()


def client(home: Home) -> DaemonClient:
    """A connection to the launched daemon (never starts one)."""
    return home.client(start=False)


def soak_only() -> pytest.MarkDecorator:
    return pytest.mark.skipif(not SOAK, reason="soak tier: set HIVEMEM_SOAK=1")


def tail(stream: IO[str] | None) -> str:
    return stream.read()[-2000:] if stream is not None else ""
