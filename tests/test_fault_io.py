"""Injected I/O errors (docs/protocol.md, docs/security.md): every I/O point of add, update, purge and a migration
fails in turn.

The fault VFS fails the N-th `xWrite`, `xSync`, `xTruncate` or `xLock` of the store's files with SQLITE_IOERR,
SQLITE_FULL or SQLITE_BUSY, for every N the verb reaches. Each time the verb answers ok or its SPEC error, the
daemon keeps serving, and in the end nothing acknowledged is lost and no memory is half there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import apsw
import pytest

from conftest import Home
from faults import SOAK, check_copy, client, command, contents, copy_of, explicit, figure, finish, launch, ready
from hivemem.client import DaemonClient
from hivemem.errors import HivememError
from hivemem.store.sqlite import schema

pytestmark = pytest.mark.fault

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
ERRORS = ("IOERR", "FULL", "BUSY")
# What each injected error may surface as. SQLite answers some failed steps with its own code (a failed lock
# during a write is reported as busy; a write the pager cannot finish as an I/O error).
ALLOWED = {
    "IOERR": {"failed.store"},
    "FULL": {"failed.disk_full", "failed.store"},
    "BUSY": {"unavailable.store_busy", "failed.store"},
}


@dataclass
class Tally:
    cases: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    acked: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # unique text -> the case that failed writing it
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def served(home: Home) -> Iterator[tuple[subprocess.Popen[str], DaemonClient]]:
    explicit(home)
    proc = launch(home, {"mode": "none"}, control=True)
    assert ready(home, proc)
    c = client(home)
    try:
        yield proc, c
    finally:
        c.close()
        if proc.poll() is None:
            proc.terminate()
        finish(proc)


def io_points(proc: subprocess.Popen[str], action: Callable[[], Any]) -> dict[str, int]:
    """How many calls of each kind one run of `action` makes."""
    command(proc, "count")
    action()
    counts: dict[str, int] = command(proc, "count")["counts"]
    return counts


def every_point(
    proc: subprocess.Popen[str], c: DaemonClient, tally: Tally, verb: str,
    prepare: Callable[[str], dict[str, Any]], check: Callable[[dict[str, Any], str, Any], None],
) -> None:  # fmt: skip
    """Fail each I/O point of one call of `verb` with each error; `prepare(text)` gives the call's params."""
    text = f"count {verb} {uuid.uuid4().hex}"
    params = prepare(text)
    outcome: list[Any] = []
    counts = io_points(proc, lambda: outcome.append(c.call(verb, **params)))
    check(params, text, outcome[0])
    assert sum(counts.values()) > 0, counts
    # Once: only the N-th call fails. Persistent (soak tier): every call from the N-th on fails until disarmed.
    for kind, error, how in product(counts, ERRORS, ("once", "persistent") if SOAK else ("once",)):
        if how == "persistent" and kind == "xLock" and error == "BUSY":
            continue  # the busy handler would wait out its 5 s at every point: covered by test_concurrency
        for nth in range(1, counts[kind] + 1):
            text = f"{verb} {kind} {error} {nth} {uuid.uuid4().hex}"
            params = prepare(text)
            case = f"{verb} {kind} #{nth}/{counts[kind]} {error} {how}"
            command(proc, f"arm {kind} {nth} {error} {how}")
            try:
                result: Any = c.call(verb, **params)
            except HivememError as exc:
                result = exc
            fired = command(proc, "disarm")["fired"]
            tally.cases += 1
            if isinstance(result, HivememError):
                tally.errors[result.code] = tally.errors.get(result.code, 0) + 1
                if result.code not in ALLOWED[error]:
                    tally.problems.append(f"{case}: {result.code} {result}")
                if not fired:
                    tally.problems.append(f"{case}: an error with no fault fired: {result.code}")
            try:
                check(params, text, result)
                c.call("whoami")  # the daemon keeps serving
            except (AssertionError, HivememError, OSError) as exc:
                raise AssertionError(f"{case}: {type(exc).__name__}: {exc}") from exc


def settle(home: Home, proc: subprocess.Popen[str], tally: Tally, name: str, purged: set[str] | None = None) -> None:
    """Stop the daemon; nothing acknowledged is lost, nothing purged is back, nothing is half there."""
    proc.terminate()
    code, err = finish(proc)
    assert code == 0, f"{name}, after {tally.cases} cases: exit {code}: {err[-2000:]}"
    with copy_of(home.paths.store) as copy:
        problems = check_copy(copy)
        stored = contents(copy)
    # Each case writes a text naming it (verb, I/O call kind, N, error): a finding's memory names its case.
    named = {m: stored[m][:80] for m in sorted(set(re.findall(r"\bm[0-9]+\b", " ".join(problems)))) if m in stored}
    assert problems == [], f"{name}: {problems[:20]}; the memories named were written by the cases {named}"
    lost = [(m, text, stored.get(m)) for m, text in tally.acked.items() if stored.get(m) != text]
    back = [m for m in purged or () if m in stored]
    figure(f"io-errors {name}", cases=tally.cases, errors=tally.errors, acknowledged=len(tally.acked),
           lost=len(lost), purged=len(purged or ()))  # fmt: skip
    assert tally.problems == [], tally.problems[:20]
    assert (lost, back) == ([], []), (
        f"{name}: lost (id, acknowledged text naming its case, stored) {lost[:20]}, back {back[:20]}"
    )


def test_io_errors_at_every_point_of_add(home: Home, served: tuple[subprocess.Popen[str], DaemonClient]) -> None:
    proc, c = served
    tally = Tally()

    def add_params(text: str) -> dict[str, Any]:
        return {"space": "io", "content": text}

    def add_check(params: dict[str, Any], text: str, result: Any) -> None:
        if isinstance(result, HivememError):
            # Not acknowledged: not there now (a failed sync may still bring it back whole after a restart).
            assert c.call("memory.search", query=text.split()[-1], spaces=["io"])["results"] == []
        else:
            tally.acked[result["id"]] = text
            assert c.call("memory.get", id=result["id"])["content"] == text

    every_point(proc, c, tally, "memory.add", add_params, add_check)
    settle(home, proc, tally, "memory.add")


def test_io_errors_at_every_point_of_update(home: Home, served: tuple[subprocess.Popen[str], DaemonClient]) -> None:
    proc, c = served
    tally = Tally()

    def update_params(text: str) -> dict[str, Any]:
        made = c.call("memory.add", space="io", content=f"before {text}")
        tally.acked[made["id"]] = f"before {text}"
        return {"id": made["id"], "revision": made["revision"], "content": text}

    def update_check(params: dict[str, Any], text: str, result: Any) -> None:
        got = c.call("memory.get", id=params["id"])
        if isinstance(result, HivememError):
            # Not acknowledged: either version may be there, but whole.
            assert got["content"] in (text, f"before {text}"), (params, got)
            if got["content"] == text:
                tally.acked[params["id"]] = text
        else:
            assert (got["content"], got["revision"]) == (text, result["revision"]), (params, got)
            tally.acked[params["id"]] = text

    every_point(proc, c, tally, "memory.update", update_params, update_check)
    settle(home, proc, tally, "memory.update")


def test_io_errors_at_every_point_of_purge(home: Home, served: tuple[subprocess.Popen[str], DaemonClient]) -> None:
    proc, c = served
    tally = Tally()
    purged: set[str] = set()

    def purge_params(text: str) -> dict[str, Any]:
        made = c.call("memory.add", space="io", content=text)
        return {"id": made["id"]}

    def purge_check(params: dict[str, Any], text: str, result: Any) -> None:
        try:
            c.call("memory.get", id=params["id"], include_deleted=True)
        except HivememError as exc:
            assert exc.code == "not_found.memory", exc
            purged.add(params["id"])
            return
        assert isinstance(result, HivememError), f"purge of {params['id']} acknowledged but it is still there"
        tally.acked[params["id"]] = text

    every_point(proc, c, tally, "memory.purge", purge_params, purge_check)
    settle(home, proc, tally, "memory.purge", purged)


def old_or_new(path: str) -> tuple[int, list[str], dict[str, str]]:
    """Schema version, problems and memories of a store that may still be at schema 1."""
    conn = apsw.Connection(path)
    try:
        version = int(str(conn.execute("PRAGMA user_version").fetchall()[0][0]))
    finally:
        conn.close()
    if version == schema.VERSION:
        return version, check_copy(path), contents(path)
    conn = apsw.Connection(path)
    try:
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall() if r != ("ok",)]
        rows = conn.execute("SELECT id, content FROM memories").fetchall()
    finally:
        conn.close()
    return version, problems, {f"m{i}": str(c) for i, c in rows}


def test_io_errors_at_every_point_of_a_migration(home: Home) -> None:
    """A migration that hits an I/O error stops the daemon with its error and leaves the old schema whole."""
    explicit(home)
    store = home.paths.store
    os.makedirs(os.path.dirname(store), mode=0o700)
    fixture = os.path.join(FIXTURES, "store-v1.db")

    def fresh() -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(store + suffix):
                os.remove(store + suffix)
        shutil.rmtree(os.path.join(os.path.dirname(store), "backups"), ignore_errors=True)
        shutil.copyfile(fixture, store)

    fresh()
    proc = launch(home, {"mode": "none"}, control=True)
    assert ready(home, proc)
    counts = command(proc, "count")["counts"]  # everything since the start: the migration's I/O
    proc.terminate()
    finish(proc)
    with copy_of(store) as copy:
        migrated = contents(copy)
        assert old_or_new(copy) == (schema.VERSION, [], migrated)
    cases, outcomes = 0, {"failed.store_migration": 0, "served": 0, "other": 0}
    assert migrated
    for kind, total in counts.items():
        for error in ERRORS:
            for nth in range(1, total + 1):
                fresh()
                proc = launch(home, {"mode": "none", "arm": f"{kind}:{nth}:{error}"})
                served = ready(home, proc)
                if served:
                    proc.terminate()
                code, err = finish(proc)
                case = f"migration {kind} #{nth}/{total} {error}"
                cases += 1
                if served:
                    outcomes["served"] += 1
                elif '"failed.store_migration"' in err:
                    outcomes["failed.store_migration"] += 1
                else:
                    outcomes["other"] += 1
                    assert '"start_error"' in err, f"{case}: exit {code}: {err[-2000:]}"
                with copy_of(store) as copy:
                    version, problems, memories = old_or_new(copy)
                    assert problems == [], f"{case}: {problems[:20]}"
                    assert memories == migrated, f"{case}: other memories"  # old or new schema, the same memories
                    outcomes[f"schema v{version}"] = outcomes.get(f"schema v{version}", 0) + 1
    figure("io-errors migration", cases=cases, io_points=counts, **outcomes)
    assert outcomes["failed.store_migration"] > 0
