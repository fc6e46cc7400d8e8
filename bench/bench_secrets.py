"""The secret scan: its latency on one text, and memory.add throughput with it, against raw APSW.

1. Scan latency: `hivemem.secrets.scan` on texts of 1 KB, 16 KB and 64 KB, half prose wrapped in lines and
   half Python source (code has more keyword-shaped lines), each sample different. Targets: median CPU time
   <= 0.1 ms at 1 KB and <= 3 ms at 64 KB (wall time is shown too; the machine's load stretches it).
2. memory.add with 1 KB and 16 KB memories, every add validated and scanned before the writer commits it,
   alternating in rounds with raw APSW doing the same four inserts per add (bench_add.RawStore: same schema,
   WAL, synchronous=FULL). Once over one socket connection (as bench_add.py), once with 4 connections
   adding at once (scans then overlap the writer's commits). Target: >= 0.5x raw.

    .venv/bin/python bench/bench_secrets.py [--adds 400] [--rounds 8] [--samples 40]
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import benchlib as bl
from bench_add import RawStore
from hivemem import secrets

SCAN_SIZES = (1024, 16384, 65536)
SCAN_TARGETS = {1024: 0.1, 65536: 3.0}  # CPU p50 ms (the load stretches wall time, not CPU time)
ADD_SIZES = (1024, 16384)
CLIENTS = 4  # besides one client: connections adding at once, so scans on reader threads overlap the writer


def source_text() -> str:
    src = bl.REPO / "src" / "hivemem"
    return "\n".join(p.read_text("utf-8") for p in sorted(src.rglob("*.py")))


def sized(gen: bl.TextGen, code: str, size: int, i: int) -> str:
    """Sample i of `size` characters: even ones prose in 80-column lines, odd ones whole lines of the source."""
    if i % 2 == 0:
        return "\n".join(textwrap.wrap(gen.text(size + 200), 80))[:size]
    start = code.index("\n", (i * 7919) % (len(code) - 2 * size)) + 1
    lines = code[start : start + size]
    return lines[: lines.rindex("\n")].ljust(size)  # whole lines, as a memory holds them


def scan_latency(samples: int) -> list[tuple[object, ...]]:
    t = time.perf_counter()
    secrets.warm()
    print(f"  engine built in {bl.ms(time.perf_counter() - t):.0f} ms", file=sys.stderr)
    gen, code = bl.TextGen(seed=5), source_text()
    rows: list[tuple[object, ...]] = []
    for size in SCAN_SIZES:
        texts = [sized(gen, code, size, i) for i in range(samples)]
        for text in texts:  # first pass: the rules' regexes these texts need are compiled
            secrets.scan(text)
        times, cpu = [], []
        for text in texts:
            t, c = time.perf_counter(), time.process_time()
            secrets.scan(text)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        p50, cpu50 = bl.ms(bl.median(times)), bl.ms(bl.median(cpu))
        target = SCAN_TARGETS.get(size)
        rows.append((size, len(texts), p50, bl.ms(bl.pct(times, 95)), bl.ms(max(times)), cpu50,
                     f"<= {target:g}" if target else "-", bl.verdict(cpu50 <= target) if target else "-"))  # fmt: skip
    return rows


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (from /proc; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def add_throughput(size: int, adds: int, rounds: int, clients: int, keep: bool) -> dict[str, float]:
    """Adds per second for raw APSW (one writer) and for hivemem with `clients` connections adding at once, and
    the CPU each add costs: the raw loop's (this process) and the daemon's (its /proc counters)."""
    gen, code = bl.TextGen(seed=size), source_text()
    items = [(f"bench/s{i % 20:02d}", f"{i} " + sized(gen, code, size - 8, i)) for i in range(adds + 10)]
    home = bl.Home(f"secrets-{size}-{clients}")
    try:
        raw = RawStore(os.path.join(home.base, "raw.db"))
        conns = [home.client() for _ in range(clients)]
        for space, content in items[:10]:
            conns[0].call("memory.add", space=space, content=content)
            raw.add(space, "warm " + content)
        wall = {"raw": 0.0, "hm": 0.0}
        cpu = {"raw": 0.0, "hm": 0.0}
        pid = home.daemon_pid() or 0
        chunk = adds // rounds
        with ThreadPoolExecutor(clients) as pool:
            for r in range(rounds):
                part = items[10 + r * chunk : 10 + (r + 1) * chunk]
                t0, c0 = time.perf_counter(), time.process_time()
                for space, content in part:
                    raw.add(space, content)
                t1, c1, d1 = time.perf_counter(), time.process_time(), cpu_seconds(pid)
                list(pool.map(_add_all, conns, [part[i::clients] for i in range(clients)]))
                wall["raw"] += t1 - t0
                wall["hm"] += time.perf_counter() - t1
                cpu["raw"] += c1 - c0
                cpu["hm"] += cpu_seconds(pid) - d1
        for conn in conns:
            conn.close()
        raw.conn.close()
    finally:
        home.cleanup(keep)
    n = chunk * rounds
    return {"n": n, "raw": n / wall["raw"], "hm": n / wall["hm"], "raw_cpu": cpu["raw"] / n, "hm_cpu": cpu["hm"] / n}


def _add_all(client: Any, part: list[tuple[str, str]]) -> None:
    for space, content in part:
        assert client.call("memory.add", space=space, content=content)["changed"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adds", type=int, default=400, help="measured adds per memory size (default 400)")
    parser.add_argument("--rounds", type=int, default=8, help="alternating baseline/hivemem rounds (default 8)")
    parser.add_argument("--samples", type=int, default=40, help="texts scanned per size (default 40)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")
    args = parser.parse_args()
    bl.print_machine("bench_secrets: secret scan latency, and memory.add with scanning vs raw APSW")
    scan_rows = scan_latency(args.samples)
    print("Scan latency of hivemem.secrets.scan (ms), half prose, half Python source.\n")
    bl.table(("bytes", "texts", "p50 ms", "p95 ms", "max ms", "CPU p50 ms", "target CPU p50", "verdict"), scan_rows)
    failed = any(row[-1] == bl.verdict(False) for row in scan_rows)
    add_rows = []
    for size in ADD_SIZES:
        for clients in (1, CLIENTS):
            print(f"size {size}, {clients} client(s): measuring {args.adds} adds ...", file=sys.stderr, flush=True)
            m = add_throughput(size, args.adds, args.rounds, clients, args.keep)
            ratio = m["hm"] / m["raw"]
            failed |= ratio < 0.5
            add_rows.append((size, clients, m["n"], m["raw"], m["hm"], ratio, bl.verdict(ratio >= 0.5),
                             bl.ms(m["raw_cpu"]), bl.ms(m["hm_cpu"])))  # fmt: skip
    print("\nmemory.add throughput (adds/s), every add scanned; raw APSW (one writer) alternating in the same run.")
    print("CPU ms per add: the raw loop's, and the daemon's (scan, validation, socket and write; not the client's).\n")
    bl.table(("memory bytes", "clients", "adds", "raw adds/s", "hivemem adds/s", "ratio", "target >=0.5",
              "raw CPU ms", "daemon CPU ms"), add_rows)  # fmt: skip
    print(f"\n# load average at end: {bl.load()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
