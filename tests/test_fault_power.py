"""Simulated power loss (docs/reliability.md): the real daemon on a VFS that keeps only synced writes, cut at its N-th
I/O.

Each cut: launch the daemon on the fault VFS with a power-cut point, let writers add and update through the socket
until the power goes, then copy the files as the disk holds them and check the copy (integrity_check, foreign keys,
event chain, FTS index, row+FTS+version+event together) and that every acknowledged write is in it. The next
launch recovers the same files. The control run sets synchronous=NORMAL and must lose acknowledged writes.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

import pytest

from conftest import Home
from faults import (
    check_copy,
    chosen_seed,
    client,
    contents,
    copy_of,
    explicit,
    figure,
    finish,
    launch,
    ready,
    revisions,
    size,
)
from hivemem.errors import HivememError

pytestmark = pytest.mark.fault

ADDERS = 2
CUT_RANGE = 600  # cut points are drawn from the first CUT_RANGE writes/syncs/truncates of a launch


@dataclass
class Run:
    seed: int
    acked: dict[str, str] = field(default_factory=dict)  # id -> content, every acknowledged add so far
    updated: dict[str, int] = field(default_factory=dict)  # id -> highest acknowledged revision
    cuts: int = 0
    lost: list[str] = field(default_factory=list)
    updates: int = 0  # acknowledged revision-guarded updates, over all launches


def adder(home: Home, name: str, acked: dict[str, str], lock: threading.Lock) -> None:
    """Add until the daemon is gone; record an add only once its reply arrived."""
    c = client(home)
    try:
        i = 0
        while True:
            text = f"{name} item {i} " + "words " * (i % 9)
            result = c.call("memory.add", space="load", content=text)
            with lock:
                acked[result["id"]] = text
            i += 1
    except (HivememError, OSError):
        return
    finally:
        c.close()


def updater(home: Home, target: str, updated: dict[str, int], done: list[int], lock: threading.Lock) -> None:
    """Revision-guarded updates of one memory until the daemon is gone."""
    c = client(home)
    try:
        revision = c.call("memory.get", id=target)["revision"]
        while True:
            revision = c.call("memory.update", id=target, revision=revision, content=f"revision {revision + 1}")[
                "revision"
            ]
            with lock:
                updated[target] = max(updated.get(target, 0), revision)
                done.append(revision)
    except (HivememError, OSError):
        return
    finally:
        c.close()


def one_cut(home: Home, run: Run, cut: int, mode: str, sync: str) -> None:
    """One launch until its power cut, then the checks on what the disk holds."""
    settings: dict[str, str | int] = {"mode": mode, "seed": run.seed + run.cuts, "cut_at": cut}
    if sync != "full":
        settings["sync"] = sync
    proc = launch(home, settings)
    # The test's seed draws every cut point; the VFS's reorder choices use seed + launch.
    where = f"seed={run.seed} cut_at={cut} mode={mode} sync={sync} launch={run.cuts}"
    acked: dict[str, str] = {}
    updated: dict[str, int] = {}
    done: list[int] = []
    lock = threading.Lock()
    if ready(home, proc):
        target = min(run.acked, key=lambda i: int(i[1:])) if run.acked else None
        if target is not None:
            run.updated.setdefault(target, 0)
        threads = [threading.Thread(target=adder, args=(home, f"w{n}c{run.cuts}", acked, lock)) for n in range(ADDERS)]
        if target is not None:
            threads.append(threading.Thread(target=updater, args=(home, target, updated, done, lock)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    code, err = finish(proc)
    assert code == -9, f"{where}: the daemon should have lost its power, exit {code}: {err[-2000:]}"
    run.acked.update(acked)
    run.updates += len(done)
    for memory, revision in updated.items():
        run.updated[memory] = max(run.updated.get(memory, 0), revision)
    run.cuts += 1
    judge(home, run, where)


def judge(home: Home, run: Run, where: str) -> None:
    """Check the files as the disk holds them; every acknowledged write must be there."""
    with copy_of(home.paths.store) as copy:
        problems = check_copy(copy)
        assert problems == [], f"{where}: {problems}"
        stored = contents(copy)
        held = revisions(copy)
    for memory, text in run.acked.items():
        if memory not in stored or (memory not in run.updated and stored[memory] != text):
            run.lost.append(f"{memory} ({where})")
    for memory, revision in run.updated.items():
        if held.get(memory, 0) < revision:
            run.lost.append(f"{memory} revision {revision} ({where})")
    # What was lost stays lost: later launches are judged on what survived.
    run.acked = {m: t for m, t in run.acked.items() if m in stored}
    run.updated = {m: min(r, held.get(m, 0)) for m, r in run.updated.items()}


def power_loss(home: Home, cuts: int, modes: tuple[str, ...], sync: str, seed: int) -> Run:
    explicit(home)
    run = Run(seed)
    rng = random.Random(seed)
    for n in range(cuts):
        one_cut(home, run, rng.randint(1, CUT_RANGE), modes[n % len(modes)], sync)
    return run


def test_acknowledged_writes_survive_power_cuts(home: Home) -> None:
    """synchronous=FULL: every acknowledged add and update survives every cut; the store is never damaged."""
    chosen = chosen_seed(20261201)
    run = power_loss(home, size(60, 1000), ("drop", "reorder"), "full", chosen)
    figure("power-loss FULL", cuts=run.cuts, acknowledged_adds=len(run.acked), acknowledged_updates=run.updates,
           lost=len(run.lost), seed=chosen)  # fmt: skip
    assert run.lost == [], f"seed={chosen}: acknowledged writes lost: {run.lost[:20]}"
    assert len(run.acked) >= run.cuts, f"seed={chosen}: the writers barely wrote: the cuts proved little"


def test_control_synchronous_normal_loses_acknowledged_writes(home: Home) -> None:
    """The negative control: the same cuts with synchronous=NORMAL lose acknowledged writes (never corrupt)."""
    chosen = chosen_seed(20261202)
    run = power_loss(home, size(20, 200), ("drop",), "normal", chosen)
    figure("power-loss NORMAL control", cuts=run.cuts, acknowledged_kept=len(run.acked), lost=len(run.lost))
    assert run.lost, f"seed={chosen}: synchronous=NORMAL lost nothing: the harness cannot see a loss"
