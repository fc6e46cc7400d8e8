"""CLI latency: a warm `hivemem memory search --json` vs starting Python, and the cold first call.

Warm: the daemon is running on a store of --size memories; each run is a fresh process
`hivemem memory search --query ... --json` (HIVEMEM_TOKEN=@owner). Baseline: `python -c "import json,
socket"` with the same interpreter (the venv's). Runs alternate; median over --runs each. Target <= 3x.

Cold: from a fresh home with no daemon and no store, `hivemem memory list --json` must start the daemon
(which creates the store and the owner key) and answer. p50 over --homes fresh homes. Target < 1 s.

    .venv/bin/python bench/bench_cli.py [--runs 30] [--homes 5] [--size 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import benchlib as bl


def warm(runs: int, size: int, keep: bool) -> list[tuple[str, float, float, float]]:
    gen = bl.TextGen(seed=11)
    home = bl.Home("cli-warm")
    try:
        bl.prefill(home, gen.memories(size, 80, 400))
        client = home.client()
        client.call("store.status")  # the daemon is up and stays up (one connection held open)
        hm = bl.hivemem_exe()
        queries = [gen.query() for _ in range(runs)]
        base_argv = [sys.executable, "-c", "import json, socket"]
        shim = shutil.which("python3")
        times: dict[str, list[float]] = {"base": [], "cli": [], "shim": []}
        for _ in range(3):  # warm the OS page cache for both
            bl.timed_run(base_argv, home.cli_env)
            bl.timed_run([hm, "memory", "search", "--query", queries[0], "--json"], home.cli_env)
        for q in queries:
            dt, _ = bl.timed_run(base_argv, home.cli_env)
            times["base"].append(dt)
            dt, proc = bl.timed_run([hm, "memory", "search", "--query", q, "--json"], home.cli_env)
            if proc.returncode != 0:
                raise SystemExit(f"hivemem memory search failed: {proc.stderr.decode()}")
            times["cli"].append(dt)
            if shim:
                dt, _ = bl.timed_run([shim, "-c", "import json, socket"], home.cli_env)
                times["shim"].append(dt)
        client.close()
    finally:
        home.cleanup(keep)
    base = bl.median(times["base"])
    rows = [
        (f"`{os.path.basename(sys.executable)} -c 'import json, socket'` (baseline, {sys.executable})", base, 1.0,
         bl.pct(times["base"], 90)),
        ("`hivemem memory search --query ... --json` (warm daemon)", bl.median(times["cli"]),
         bl.median(times["cli"]) / base, bl.pct(times["cli"], 90)),
    ]  # fmt: skip
    if times["shim"]:
        rows.append((f"`python3 -c 'import json, socket'` via PATH ({shim}), for reference",
                     bl.median(times["shim"]), bl.median(times["shim"]) / base, bl.pct(times["shim"], 90)))  # fmt: skip
    return rows


def cold(homes: int, keep: bool) -> tuple[list[float], list[float]]:
    hm = bl.hivemem_exe()
    cold_times: list[float] = []
    base_times: list[float] = []
    for _ in range(homes):
        home = bl.Home("cli-cold")
        try:
            dt, _ = bl.timed_run([sys.executable, "-c", "import json, socket"], home.cli_env)
            base_times.append(dt)
            dt, proc = bl.timed_run([hm, "memory", "list", "--json"], home.cli_env)
            if proc.returncode != 0:
                raise SystemExit(f"hivemem memory list failed: {proc.stderr.decode()}")
            cold_times.append(dt)
            time.sleep(0.1)
        finally:
            home.cleanup(keep)
    return cold_times, base_times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="warm runs of each command (default 30)")
    parser.add_argument("--homes", type=int, default=5, help="fresh homes for the cold start (default 5)")
    parser.add_argument("--size", type=int, default=1000, help="memories in the warm store (default 1000)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")
    args = parser.parse_args()
    bl.print_machine("bench_cli: warm CLI call vs bare interpreter start; cold first call")

    rows = warm(args.runs, args.size, args.keep)
    ratio = rows[1][2]
    print(f"Warm: median wall time of {args.runs} runs each, alternating, store of {args.size:,} memories.")
    print("Target: warm CLI search <= 3 x the baseline.\n")
    bl.table(("command", "median ms", "ratio", "p90 ms"), [(c, bl.ms(m), r, bl.ms(p)) for c, m, r, p in rows])
    print(f"warm CLI / baseline = {ratio:.2f} -> {bl.verdict(ratio <= 3.0)}\n")

    cold_times, base_times = cold(args.homes, args.keep)
    p50 = bl.median(cold_times)
    print(f"Cold: `hivemem memory list --json` from {args.homes} fresh homes (no daemon, no store).")
    print("Target: p50 < 1 s.\n")
    bl.table(
        ("run", "cold call ms", "baseline python ms", "ratio"),
        [(i + 1, bl.ms(c), bl.ms(b), c / b) for i, (c, b) in enumerate(zip(cold_times, base_times, strict=True))]
        + [("p50", bl.ms(p50), bl.ms(bl.median(base_times)), p50 / bl.median(base_times))],
    )
    print(f"cold p50 = {bl.ms(p50):.0f} ms -> {bl.verdict(p50 < 1.0)}")
    return 0 if ratio <= 3.0 and p50 < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
