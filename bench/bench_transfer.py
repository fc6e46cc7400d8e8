"""Export and import through the daemon against a raw SQLite dump and load of the same rows, and the daemon's
RSS growth while it exports.

For each size N: a store of N memories of about 1 KB each (prefilled through hivemem's own dispatch), then

    export        store.export to a file, through a real daemon (one consistent snapshot, streamed row by row)
    import        store.import of that file into an empty store, through a real daemon (one transaction:
                  rows, search index, versions and audit events)
    raw dump      the same rows selected with APSW and written as JSON lines (no hivemem code)
    raw load      those lines inserted into a plain table of the same columns in one transaction (WAL,
                  synchronous=FULL), with no search index, versions or events

The daemon's RSS is sampled every 5 ms during the export; growth is the highest sample less the one before.

    .venv/bin/python bench/bench_transfer.py [--sizes 10000,100000] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time

import apsw

import benchlib as bl

WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "build",
    "deploy",
    "zig",
    "pin",
    "test",
)


def texts(n: int, size: int) -> list[tuple[str, str]]:
    rng = random.Random(n)
    out = []
    for i in range(n):
        words = [f"item{i}"]
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS))
        out.append((f"project/p{i % 20}", " ".join(words)))
    return out


def sample_rss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], bl.rss_kib(pid)["VmRSS"])
        time.sleep(0.005)


def export(home: bl.Home, dest: str) -> tuple[float, float]:
    """(seconds, RSS growth in MB) of one store.export through the daemon."""
    client = home.client()
    try:
        client.call("whoami")
        pid = home.daemon_pid()
        assert pid is not None
        before = bl.rss_kib(pid)["VmRSS"]
        peak, stop = [before], threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(pid, stop, peak))
        sampler.start()
        start = time.perf_counter()
        client.call("store.export", path=dest)
        took = time.perf_counter() - start
        stop.set()
        sampler.join()
    finally:
        client.close()
    return took, (peak[0] - before) / 1024


def import_(home: bl.Home, source: str) -> float:
    client = home.client()
    try:
        client.call("whoami")
        start = time.perf_counter()
        result = client.call("store.import", path=source)
        took = time.perf_counter() - start
    finally:
        client.close()
    assert result["planned"]["duplicate"] == 0, result
    return took


COLUMNS = ("id, space, kind, title, content, tags, status, source, provenance, confidence, confidence_state, "
           "review_after, expires_at, revision, principal, label, updated_by, updated_label, session, created, "
           "updated, deleted")  # fmt: skip


def raw(store: str, workdir: str) -> tuple[float, float]:
    """(dump seconds, load seconds) of the same rows with APSW alone."""
    dump_path = os.path.join(workdir, "raw.jsonl")
    start = time.perf_counter()
    src = apsw.Connection(store, flags=apsw.SQLITE_OPEN_READONLY)
    with open(dump_path, "w", encoding="utf-8") as out:
        for row in src.execute(f"SELECT {COLUMNS} FROM memories ORDER BY id"):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())
    src.close()
    dump = time.perf_counter() - start
    start = time.perf_counter()
    dst = apsw.Connection(os.path.join(workdir, "raw.db"))
    dst.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
    dst.execute(f"CREATE TABLE memories ({COLUMNS})")
    marks = ",".join("?" * len(COLUMNS.split(", ")))
    with dst, open(dump_path, encoding="utf-8") as lines:
        dst.executemany(f"INSERT INTO memories VALUES ({marks})", (json.loads(line) for line in lines))
    dst.close()
    return dump, time.perf_counter() - start


def run_size(n: int, size: int, keep: bool) -> list[object]:
    source = bl.Home(f"transfer-{n}")
    target = bl.Home(f"transfer-{n}-in")
    try:
        source.activate()
        bl.prefill(source, texts(n, size))
        dest = os.path.join(source.base, "export.json")
        took_export, growth = export(source, dest)
        source.stop()
        dump, load = raw(source.paths.store, source.base)
        target.activate()
        took_import = import_(target, dest)
        ratio = (took_export + took_import) / (dump + load)
        return [f"{n:,}", f"{os.path.getsize(dest) / 1e6:.0f} MB", f"{took_export:.2f}", f"{took_import:.2f}",
                f"{dump:.2f}", f"{load:.2f}", f"{ratio:.1f}x", f"{growth:.1f}"]  # fmt: skip
    finally:
        target.cleanup(keep)
        source.cleanup(keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bl.sizes_arg(parser, "10000,100000")
    parser.add_argument("--bytes", type=int, default=1000, help="content size of each memory (default 1000)")
    args = parser.parse_args()
    bl.print_machine("store.export / store.import against a raw SQLite dump and load")
    headers = ("memories", "document", "export s", "import s", "raw dump s", "raw load s",
               "(export+import)/(dump+load)", "export RSS growth MB")  # fmt: skip
    rows = []
    for n in bl.parse_sizes(args.sizes):
        rows.append(run_size(n, args.bytes, args.keep))
        bl.table(headers, rows)  # after each size, so a long run shows what it has
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
