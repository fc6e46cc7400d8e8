"""Export and import through the daemon against a raw SQLite dump and load of the same rows, and the daemon's
RSS growth while it exports.

For each size N: a store of N memories of about 1 KB each (prefilled through hivemem's own dispatch), then

    export        store.export to a file, through a real daemon (one consistent snapshot, streamed row by row)
    import        store.import of that file into an empty store, through a real daemon (one transaction:
                  rows, search index, versions and audit events)
    store dump    every row of the store, of every table (memories, versions, events, sessions, meta, and the
                  search index's own tables as FTS5 stored them), selected with APSW and written as JSON lines:
                  the rows `sqlite3 .dump` writes, with no hivemem code
    store load    those rows inserted with executemany, in one transaction (WAL, synchronous=FULL, the store's
                  page size), into the same schema (tables and indexes created first, as in the store an import
                  writes into; the FTS5 table's schema row written as `.dump` writes it): the result is the
                  same store, search index included, with nothing validated, scanned or tokenized
    load, index rebuilt
                  the store load without the search index's rows, then FTS5's own `rebuild` of the index from the
                  loaded memories (the store's tokenizer: hivemem's, around FTS5's porter and unicode61)
    plain dump    the memories rows alone, written as JSON lines (the first baseline, kept for comparison)
    plain load    those lines inserted into a plain table of the same columns, with no index, search index,
                  versions or events

The target (issue 14) is export and import each within 2x of the store's raw dump and load: `export/dump` and
`import/load` below. The plain-table ratios are printed too, labelled as such (docs/decisions.md D200).

Each verb is timed on a daemon that has finished starting (its CPU time has stopped growing). The daemon's RSS is
sampled every 5 ms during the export; growth is the highest sample less the one before.

    .venv/bin/python bench/bench_transfer.py [--sizes 10000,100000] [--bytes 1000] [--keep]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import random
import sys
import threading
import time
from typing import Any

import apsw

import benchlib as bl
from hivemem.store.sqlite import fts5

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


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled(home: bl.Home) -> int:
    """The daemon's pid once it is idle: its start-up (the secret engine is built in a thread) is over, so the
    timing that follows is the verb's alone."""
    pid = home.daemon_pid()
    assert pid is not None
    quiet, last = 0, cpu_seconds(pid)
    while quiet < 3:
        time.sleep(0.1)
        now = cpu_seconds(pid)
        quiet, last = (quiet + 1 if now - last < 0.02 else 0), now
    return pid


def export(home: bl.Home, dest: str) -> tuple[float, float]:
    """(seconds, RSS growth in MB) of one store.export through the daemon."""
    client = home.client()
    try:
        client.call("whoami")
        pid = settled(home)
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
        settled(home)
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


def scalar(conn: apsw.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchall()[0][0]


def _blob(value: bytes) -> dict[str, str]:
    return {"x": value.hex()}


def _unblob(value: dict[str, str]) -> bytes:
    return bytes.fromhex(value["x"])


@dataclasses.dataclass
class Dump:
    """A store's rows as JSON lines, one file per table, and what loading them needs of its schema."""

    schema: list[tuple[str, str, str]]  # (type, name, sql) of sqlite_master, in order
    header: dict[str, int]  # page_size, application_id, user_version
    files: dict[str, str]  # table -> its JSON lines

    @property
    def virtual(self) -> list[tuple[str, str]]:
        return [(name, sql) for _, name, sql in self.schema if sql.startswith("CREATE VIRTUAL")]

    @property
    def shadows(self) -> set[str]:
        """The tables FTS5 keeps for the virtual tables."""
        return {t for t in self.files for v, _ in self.virtual if t.startswith(v + "_")}


def dump_store(store: str, workdir: str) -> tuple[float, Dump]:
    """(seconds, dump) of every row of every table of the store, with APSW alone: the rows `sqlite3 .dump`
    writes, as JSON lines (blobs as {"x": hex})."""
    start = time.perf_counter()
    src = apsw.Connection(store, flags=apsw.SQLITE_OPEN_READONLY)
    schema = list(src.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"))
    header = {p: int(scalar(src, f"PRAGMA {p}")) for p in ("page_size", "application_id", "user_version")}
    tables = [name for kind, name, sql in schema if kind == "table" and not sql.startswith("CREATE VIRTUAL")]
    files = {}
    for name in [*tables, "sqlite_sequence"]:
        files[name] = os.path.join(workdir, f"raw-{name}.jsonl")
        with open(files[name], "w", encoding="utf-8") as out:
            for row in src.execute(f'SELECT * FROM "{name}"'):
                out.write(json.dumps(row, ensure_ascii=False, default=_blob) + "\n")
            out.flush()
            os.fsync(out.fileno())
    src.close()
    return time.perf_counter() - start, Dump(schema, header, files)


def load_store(dump: Dump, path: str, reindex: bool = False) -> float:
    """Seconds to load a dump into a new store file at `path` in one transaction (WAL, synchronous=FULL, the
    store's page size): the schema first, then every table's rows with executemany. Without `reindex` the search
    index's rows are copied, its table written into the schema as `.dump` writes it (no tokenizer runs); with it,
    they are not loaded and FTS5 builds them from the loaded memories (`rebuild`, through the store's tokenizer)."""
    start = time.perf_counter()
    dst = apsw.Connection(path)
    if reindex:
        fts5.prepare(dst)  # the index's tokenizer, which `rebuild` runs
    dst.execute(f"PRAGMA page_size={dump.header['page_size']}; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL")
    shadows = dump.shadows
    with dst:
        dst.execute(f"PRAGMA application_id={dump.header['application_id']}")
        dst.execute(f"PRAGMA user_version={dump.header['user_version']}")
        for _, name, sql in dump.schema:  # tables (the index's shadow tables too), then indexes and views
            made_by_fts5 = reindex and name in shadows
            if not sql.startswith("CREATE VIRTUAL") and not name.startswith("sqlite_") and not made_by_fts5:
                dst.execute(sql)
        _virtual_tables(dst, dump, reindex)
        for name, lines in dump.files.items():
            if not (reindex and name in shadows and not name.endswith("_config")):
                _load_rows(dst, name, lines, "INSERT OR REPLACE" if name in shadows else "INSERT")
        if reindex:
            dst.execute("INSERT INTO memory_fts(memory_fts) VALUES ('rebuild')")
    dst.close()
    return time.perf_counter() - start


def _virtual_tables(dst: apsw.Connection, dump: Dump, reindex: bool) -> None:
    if reindex:  # made by FTS5, with empty shadow tables of its own
        for _, sql in dump.virtual:
            dst.execute(sql)
        return
    dst.execute("PRAGMA writable_schema=ON")  # as .dump writes it: no xCreate, no tokenizer
    for name, sql in dump.virtual:
        dst.execute("INSERT INTO sqlite_schema(type, name, tbl_name, rootpage, sql) VALUES ('table', ?, ?, 0, ?)",
                    (name, name, sql))  # fmt: skip
    dst.execute("PRAGMA writable_schema=OFF")


def _load_rows(dst: apsw.Connection, table: str, path: str, verb: str) -> None:
    with open(path, encoding="utf-8") as lines:
        rows = (json.loads(line, object_hook=_unblob) for line in lines)
        first = next(rows, None)
        if first is not None:
            marks = ",".join("?" * len(first))
            dst.executemany(f'{verb} INTO "{table}" VALUES ({marks})', itertools.chain([first], rows))


def raw(store: str, workdir: str) -> tuple[float, float]:
    """(dump seconds, load seconds) of the memories rows alone, into a plain table (the first baseline)."""
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
        dump, rows = dump_store(source.paths.store, source.base)
        load = load_store(rows, os.path.join(source.base, "raw-store.db"))
        reindexed = load_store(rows, os.path.join(source.base, "raw-reindexed.db"), reindex=True)
        plain_dump, plain_load = raw(source.paths.store, source.base)
        target.activate()
        took_import = import_(target, dest)
        return [f"{n:,}", f"{os.path.getsize(dest) / 1e6:.0f} MB", f"{took_export:.2f}", f"{took_import:.2f}",
                f"{dump:.2f}", f"{load:.2f}", f"{took_export / dump:.2f}x", f"{took_import / load:.2f}x",
                f"{reindexed:.2f}", f"{took_import / reindexed:.2f}x",
                f"{plain_dump:.2f}", f"{plain_load:.2f}", f"{took_export / plain_dump:.1f}x",
                f"{took_import / plain_load:.1f}x", f"{growth:.1f}", bl.load()]  # fmt: skip
    finally:
        target.cleanup(keep)
        source.cleanup(keep)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bl.sizes_arg(parser, "10000,100000")
    parser.add_argument("--bytes", type=int, default=1000, help="content size of each memory (default 1000)")
    args = parser.parse_args()
    bl.print_machine("store.export / store.import against a raw SQLite dump and load")
    headers = ("memories", "document", "export s", "import s", "store dump s", "store load s", "export/dump",
               "import/load", "load, index rebuilt s", "import/that load", "plain dump s", "plain load s",
               "export/plain dump", "import/plain load", "export RSS growth MB", "load avg after")  # fmt: skip
    rows = []
    for n in bl.parse_sizes(args.sizes):
        rows.append(run_size(n, args.bytes, args.keep))
        bl.table(headers, rows)  # after each size, so a long run shows what it has
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
