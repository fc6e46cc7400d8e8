"""Instructions per memory.add in the daemon, counted by callgrind: a figure the machine's load does not move.

Wall-clock benchmarks on a shared two-core machine move by more than 5% from run to run; an instruction count
does not. The daemon (`python -m hivemem serve`) runs under `valgrind --tool=callgrind` in a fresh home, one
client connection adds N memories of 80-400 bytes (bench_add.py's texts) over the socket, the daemon stops, and
callgrind's total is read. Two runs, with a few and with many adds, give the instructions of one add as the
difference over the extra adds (start-up and shutdown cancel out). Code from another checkout is measured by
setting PYTHONPATH to its `src` folder, which the daemon inherits, so two versions compare in one run.

    .venv/bin/python bench/bench_instructions.py [--adds 20,520] [--versions after=,before=<checkout>/src]
                                                 [--bytes 80,400]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import benchlib as bl

CLIENT = """
import sys, time
sys.path.insert(0, sys.argv[2])
import benchlib as bl
from hivemem.client import DaemonClient
deadline = time.monotonic() + 900
while True:
    try:
        client = DaemonClient(token="@owner", start=False).connect()
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
for space, content in bl.TextGen(seed=1000).memories(int(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])):
    client.call("memory.add", space=space, content=content)
client.close()
"""


def fresh_env(home: str, pythonpath: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIVEMEM_", "XDG_"))}
    run = os.path.join(home, "run")
    os.makedirs(run, mode=0o700)
    env.update(HOME=home, XDG_RUNTIME_DIR=run, XDG_CONFIG_HOME=f"{home}/.config", XDG_DATA_HOME=f"{home}/.local/share",
               XDG_STATE_HOME=f"{home}/.local/state", XDG_CACHE_HOME=f"{home}/.cache")  # fmt: skip
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    return env


def instructions(adds: int, pythonpath: str, size: tuple[int, int]) -> int:
    """callgrind's instruction total for a daemon that served `adds` memory.add requests."""
    with tempfile.TemporaryDirectory() as home:
        env = fresh_env(home, pythonpath)
        hivemem = [sys.executable, "-m", "hivemem"]
        owner = {**env, "HIVEMEM_TOKEN": "@owner"}
        subprocess.run([*hivemem, "memory", "add", "--space", "user", "--content", "a store made first"], env=owner,
                       check=True, capture_output=True)  # fmt: skip
        subprocess.run([*hivemem, "stop"], env=owner, check=True, capture_output=True)
        out = os.path.join(home, "callgrind.out")
        daemon = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *hivemem, "serve"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            bench = os.path.dirname(os.path.abspath(__file__))
            subprocess.run([sys.executable, "-c", CLIENT, str(adds), bench, *map(str, size)], env=env, check=True)
            subprocess.run([*hivemem, "stop"], env=owner, check=True, capture_output=True)
            daemon.wait(timeout=600)
        finally:
            if daemon.poll() is None:
                daemon.kill()
        with open(out, encoding="utf-8") as f:
            found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
        assert found, "callgrind wrote no total"
        return int(found[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adds", default="20,520", help="two add counts: few and many (default 20,520)")
    parser.add_argument("--versions", default="after=", help="label=PYTHONPATH pairs, comma-separated")
    parser.add_argument("--bytes", default="80,400", help="the memories' smallest and largest size (default 80,400)")
    args = parser.parse_args()
    few, many = (int(n) for n in args.adds.split(","))
    lo, hi = (int(n) for n in args.bytes.split(","))
    versions = [v.split("=", 1) for v in args.versions.split(",")]
    bl.print_machine("Instructions per memory.add in the daemon (callgrind)")
    print("| version | instructions, few adds | instructions, many adds | instructions per add | x first |")
    print("|---|---:|---:|---:|---:|")
    first = 0.0
    for label, pythonpath in versions:
        started = time.monotonic()
        counts = instructions(few, pythonpath, (lo, hi)), instructions(many, pythonpath, (lo, hi))
        per_add = (counts[1] - counts[0]) / (many - few)
        first = first or per_add
        print(f"| {label} | {counts[0]:,} | {counts[1]:,} | {per_add:,.0f} | {per_add / first:.3f} |", flush=True)
        print(f"#   {label}: {time.monotonic() - started:.0f} s under valgrind", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
