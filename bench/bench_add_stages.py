"""Where memory.add's CPU goes, stage by stage, beside raw APSW's whole add (issue 27's throughput target, D388).

Per memory size (bench_secrets.py's texts: half prose, half Python source), in this process, thread CPU per add of
each stage the daemon runs for one request: decoding the request line, checking the params (validation with the
secret scan, of which the content's scan is also timed alone), running the write (memory row, full-text entry,
version, event with its chain, commit with its fsync) and encoding the reply; and raw APSW's add
(bench_add.RawStore: the same inserts, WAL, synchronous=FULL). Then the daemon over its socket with one client:
CPU per add of its event-loop thread and of its other threads (the writer; readers only say hello), from
/proc/<pid>/task, and of the client. The daemon's CPU less the stages it runs is the socket, the event loop and the
hand-off to the writer and back. CPU time, not wall time: the machine's load stretches the latter.

    .venv/bin/python bench/bench_add_stages.py [--adds 300] [--sizes 1024,16384]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import benchlib as bl
from bench_add import RawStore
from bench_secrets import sized, source_text
from hivemem import ops, protocol, secrets
from hivemem.auth import owner
from hivemem.store import open_store

STAGES = ("decode", "check", "scan", "run", "encode")


def texts(size: int, n: int) -> list[tuple[str, str]]:
    gen, code = bl.TextGen(seed=size), source_text()
    return [(f"bench/s{i % 20:02d}", f"{i} " + sized(gen, code, size - 8, i)) for i in range(n)]


def in_process(base: str, items: list[tuple[str, str]], warm: int) -> dict[str, float]:
    """Thread CPU seconds per add of each stage, and of raw APSW's add."""
    store = open_store(os.path.join(base, "stages.db"))
    raw = RawStore(os.path.join(base, "raw.db"))
    who, limit = owner(), store.limits.max_content_bytes
    lines = [protocol.encode({"id": i, "verb": "memory.add", "params": {"space": s, "content": c}})
             for i, (s, c) in enumerate(items)]  # fmt: skip
    for (space, content), line in zip(items[:warm], lines[:warm], strict=True):  # compiles the rules these need
        verb, params = protocol.verb_and_params(protocol.decode(line))
        ops.run(store, who, ops.check(verb, params, limit))
        raw.add(space, "warm " + content)
    cpu = dict.fromkeys((*STAGES, "raw"), 0.0)
    clock = time.thread_time
    for (space, content), line in zip(items[warm:], lines[warm:], strict=True):
        t0 = clock()
        verb, params = protocol.verb_and_params(protocol.decode(line))
        t1 = clock()
        checked = ops.check(verb, params, limit)
        t2 = clock()
        secrets.scan(content)
        t3 = clock()
        result = ops.run(store, who, checked)
        t4 = clock()
        protocol.encode(protocol.reply(1, result))
        t5 = clock()
        raw.add(space, content)
        t6 = clock()
        for stage, spent in zip((*STAGES, "raw"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True):
            cpu[stage] += spent
    store.close()
    raw.conn.close()
    n = len(items) - warm
    return {stage: spent / n for stage, spent in cpu.items()}


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of a process."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def daemon(items: list[tuple[str, str]], warm: int, size: int) -> dict[str, float]:
    """CPU seconds per add of the daemon's event loop, its other threads and the client, one client adding."""
    home = bl.Home(f"stages-{size}")
    try:
        client: Any = home.client()
        for space, content in items[:warm]:
            client.call("memory.add", space=space, content=content)
        pid = home.daemon_pid() or 0
        before, started = thread_cpu(pid), time.process_time()
        for space, content in items[warm:]:
            client.call("memory.add", space=space, content=content)
        after, spent = thread_cpu(pid), time.process_time() - started
        client.close()
    finally:
        home.cleanup()
    n = len(items) - warm
    loop = after.get(pid, 0.0) - before.get(pid, 0.0)
    others = sum(t - before.get(tid, 0.0) for tid, t in after.items() if tid != pid)
    return {"loop": loop / n, "others": others / n, "client": spent / n}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adds", type=int, default=300, help="measured adds per size (default 300)")
    parser.add_argument("--sizes", default="1024,16384", help="memory sizes in bytes (default 1024,16384)")
    args = parser.parse_args()
    bl.print_machine("bench_add_stages: memory.add's CPU by stage, and raw APSW's add")
    secrets.warm()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        warm = min(100, args.adds)
        items = texts(size, args.adds + warm)
        home = bl.Home(f"stages-raw-{size}")
        try:
            stages = in_process(home.base, items, warm)
        finally:
            home.cleanup()
        served = daemon(items, warm, size)
        hop = served["loop"] + served["others"] - sum(stages[s] for s in STAGES if s != "scan")
        for stage in (*STAGES, "raw"):
            rows.append((size, f"in process: {stage}", bl.ms(stages[stage])))
        for part, label in (("loop", "event-loop thread"), ("others", "writer and reader threads"),
                            ("client", "client")):  # fmt: skip
            rows.append((size, f"daemon: {label}", bl.ms(served[part])))
        rows.append((size, "daemon less the stages it runs", bl.ms(hop)))
    print("CPU ms per add. `check` includes `scan` (the content's scan, timed again alone); the daemon runs decode,")
    print("check and encode on its event loop and `run` on its writer.\n")
    bl.table(("memory bytes", "stage", "CPU ms per add"), rows)
    print(f"\n# load average at end: {bl.load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
