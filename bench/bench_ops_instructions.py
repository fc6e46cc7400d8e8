"""Instructions per memory.add and per one-space memory.search on each backend, counted by callgrind.

A wall-clock comparison of two versions on a shared two-core machine moves by more than 5% from run to run; an
instruction count does not. Each measurement is one process under `valgrind --tool=callgrind` that opens a fresh
store in-process (a SQLite file, or a new PostgreSQL database on `--server` for the team store), adds
`--prefill` generated memories across 20 spaces, then runs N verbs through `ops.dispatch` as the owner. Two runs,
with a few and with many verbs, give the instructions of one verb as the difference over the extra ones (opening,
prefill and closing cancel out). PostgreSQL's server works in its own processes, which callgrind does not count:
the team-store figures are hivemem's and the driver's side only. Code from another checkout is measured by
setting PYTHONPATH to its `src` folder, so two versions compare in one run.

    .venv/bin/python bench/bench_ops_instructions.py [--verbs add,search] [--backends sqlite,postgresql]
        [--counts 10,110] [--prefill 200] [--versions after=,before=<checkout>/src]
        [--server postgresql://127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import benchlib as bl

WORK = """
import os, sys
sys.path.insert(0, sys.argv[1])
import benchlib as bl
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_store

_, _, verb, base, url, prefill, count = sys.argv
store = open_store(os.path.join(base, "store.db"), url=url or None)
who = owner()
texts = bl.TextGen(seed=7)
for i, (space, content) in enumerate(texts.memories(int(prefill), 80, 400)):
    ops.dispatch(store, who, "memory.add", {"space": f"project/s{i % 20}", "content": content})
queries = bl.TextGen(seed=8)
for i, (space, content) in enumerate(queries.memories(int(count), 80, 400)):
    if verb == "add":
        ops.dispatch(store, who, "memory.add", {"space": f"project/s{i % 20}", "content": content})
    else:
        words = content.split()[:3]
        ops.dispatch(store, who, "memory.search", {"query": " ".join(words), "spaces": [f"project/s{i % 20}"]})
store.close()
"""


def instructions(verb: str, backend: str, count: int, prefill: int, pythonpath: str, server: str) -> int:
    """callgrind's instruction total for one process that prefilled a fresh store and ran `count` verbs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIVEMEM_", "XDG_"))}
    env["PYTHONHASHSEED"] = "0"  # the same dict and set orders in every run
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    name = f"hm_insn_{uuid.uuid4().hex[:12]}"
    url = urlunsplit(urlsplit(server)._replace(path="/" + name)) if backend == "postgresql" else ""
    if url:
        subprocess.run(["psql", server, "-qc", f'CREATE DATABASE "{name}"'], check=True)
    try:
        with tempfile.TemporaryDirectory() as base:
            out = os.path.join(base, "callgrind.out")
            bench = os.path.dirname(os.path.abspath(__file__))
            command = [sys.executable, "-c", WORK, bench, verb, base, url, str(prefill), str(count)]
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            with open(out, encoding="utf-8") as f:
                found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    finally:
        if url:
            subprocess.run(["psql", server, "-qc", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'], check=True)
    assert found, "callgrind wrote no total"
    return int(found[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verbs", default="add,search")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--counts", default="10,110", help="two verb counts: few and many (default 10,110)")
    parser.add_argument("--prefill", type=int, default=200, help="memories added before the measured verbs")
    parser.add_argument("--versions", default="after=", help="label=PYTHONPATH pairs, comma-separated")
    parser.add_argument("--server", default="postgresql://127.0.0.1:5432/test")
    args = parser.parse_args()
    few, many = (int(n) for n in args.counts.split(","))
    versions = [v.split("=", 1) for v in args.versions.split(",")]
    bl.print_machine("Instructions per verb, in-process (callgrind)")
    print("| verb | backend | version | instructions per verb | x first |")
    print("|---|---|---|---:|---:|")
    for verb in args.verbs.split(","):
        for backend in args.backends.split(","):
            first = 0.0
            for label, pythonpath in versions:
                started = time.monotonic()
                runs = [instructions(verb, backend, n, args.prefill, pythonpath, args.server) for n in (few, many)]
                per_verb = (runs[1] - runs[0]) / (many - few)
                first = first or per_verb
                print(f"| {verb} | {backend} | {label} | {per_verb:,.0f} | {per_verb / first:.3f} |", flush=True)
                print(f"#   {verb} {backend} {label}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
