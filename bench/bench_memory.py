"""The daemon's memory with embeddings on, part by part: issue 13's "RSS under 300 MB with the local model
loaded" at N vectors of 384.

A store of N memories over 20 spaces, each holding a random unit vector of 384 numbers under the local model's
name (bench_hygiene.py's fill: written with the daemon stopped, so the worker has nothing to embed and the
values do not matter for memory), then through the real daemon with `embeddings.provider = "local"`:

1. idle: after `store.status` (the daemon started, the worker found nothing pending: no model, no index);
2. model: after one `memory.add`, once the worker has embedded it (the local model is loaded; the index not yet);
3. index: after one hybrid `memory.search` (the vector index of N vectors is loaded);
4. report: after one `memory.hygiene` report (it reads every vector too), then after two more;
5. search: one more hybrid search after the reports.

At each step it prints the daemon's VmRSS (RssAnon: heap, RssFile: mapped files such as the model's weights) and
VmHWM (the peak so far), from /proc, in MiB.

    .venv/bin/python bench/bench_memory.py [--sizes 100000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import bench_hygiene
import benchlib as bl


def wait_embedded(client: Any, budget: float = 120.0) -> None:
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        status = client.call("store.status")
        if not status["pending"]:
            return
        time.sleep(0.2)
    raise SystemExit(f"the worker did not embed within {budget:.0f} s: {status}")


def measure(n: int) -> list[list[Any]]:
    home = bl.Home("memory")
    rows: list[list[Any]] = []
    try:
        cfg = Path(home.env["XDG_CONFIG_HOME"]) / "hivemem"
        cfg.mkdir(parents=True, exist_ok=True)
        (cfg / "config.toml").write_text('[embeddings]\nprovider = "local"\n')
        t = time.perf_counter()
        bench_hygiene.fill(home, n, 384)
        print(f"{n:,} memories with vectors filled in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        client = home.client()
        try:

            def step(label: str, seconds: float | None = None) -> None:
                pid = home.daemon_pid()
                assert pid is not None
                m = bl.rss_kib(pid)
                took = "" if seconds is None else f"{seconds:.2f}"
                rows.append([f"{n:,}", label, *(f"{m.get(k, 0) / 1024:.0f}" for k in
                                                 ("VmRSS", "RssAnon", "RssFile", "VmHWM")), took])  # fmt: skip
                print("  ".join(map(str, rows[-1])), file=sys.stderr, flush=True)

            client.call("store.status")
            time.sleep(1.0)  # the worker's first look for pending memories
            step("idle (no model, no index)")
            t = time.perf_counter()
            client.call("memory.add", space="bench/memory", content="the local model embeds this one memory")
            wait_embedded(client)
            step("model loaded (one add embedded)", time.perf_counter() - t)
            t = time.perf_counter()
            found = client.call("memory.search", query="deploy the api on friday", mode="auto", limit=10)
            assert found["mode"] == "hybrid", found
            step("index loaded (one hybrid search)", time.perf_counter() - t)
            for i in range(3):
                t = time.perf_counter()
                client.call("memory.hygiene", limit=200)
                step(f"after hygiene report {i + 1}", time.perf_counter() - t)
            t = time.perf_counter()
            found = client.call("memory.search", query="rollback the database migration", mode="auto", limit=10)
            assert found["mode"] == "hybrid", found
            step("hybrid search after the reports", time.perf_counter() - t)
        finally:
            client.close()
    finally:
        home.cleanup()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "100000")
    args = parser.parse_args()
    bl.print_machine("The daemon's memory with the local model and N vectors of 384")
    rows: list[list[Any]] = []
    for n in bl.parse_sizes(args.sizes):
        rows += measure(n)
    bl.table(("vectors", "after", "VmRSS MiB", "RssAnon MiB", "RssFile MiB", "VmHWM MiB", "step s"), rows)
    print(f"load average at the end: {bl.load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
