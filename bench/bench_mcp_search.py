"""MCP search beside the socket: `memory_search` over `hivemem mcp` with a raw stdlib JSON-RPC client, in one run.

The store holds 10,000 LoCoMo turns in one space (as bench_search_real's 10k case; the data is read from
$HIVEMEM_BENCH_DATA or ../shared/data/ and never copied into the repo). The daemon is started and left to merge its
index, then each of --queries LoCoMo questions (every fourth, default 200) runs, after a warm-up, on two paths to the
same daemon with the same token (@owner), alternating which goes first:

    socket   memory.search over the daemon's Unix socket (one open hivemem.client.DaemonClient)
    mcp      tools/call memory_search to a `python -m hivemem mcp` process over its stdin/stdout pipes, spoken to by
             a plain stdlib client (json + subprocess): one request line written, one answer line read and parsed

Both ask for limit 10 without `spaces` (every readable space: the one space). The MCP time is the whole call as a
harness sees it: encoding, the pipes, the server's SDK dispatch and daemon request, the result's text block and
structured content, and the client's parse of the answer line.

Target: mcp p50 <= socket p50 + 1.5 ms (docs/decisions.md D273).

    .venv/bin/python bench/bench_mcp_search.py [--queries 200] [--warmup 30] [--cache DIR] [--profile FILE]

--profile runs the MCP server under cProfile in CPU time (after its imports) and writes the stats to FILE (the
timings then include the profiler's cost).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import IO, Any

import benchlib as bl
from bench_search_real import corpus, home_for, settle
from hivemem.store import open_reader

PROFILED = """
import cProfile, sys, time
import hivemem.mcp.server as server
profiler = cProfile.Profile(time.process_time)
try:
    profiler.runcall(server.run)
finally:
    profiler.dump_stats(sys.argv[1])
"""
SIZE = 10_000
LIMIT = 10
TARGET_MS = 1.5


class Stdio:
    """`hivemem mcp` on pipes, driven by hand: one JSON-RPC request line written, one answer line read."""

    def __init__(self, home: bl.Home, errlog: IO[str], profile: str | None) -> None:
        argv = [sys.executable, "-m", "hivemem", "mcp"]
        if profile:  # in CPU time, from after the imports: where the server's own work per call goes
            argv = [sys.executable, "-c", PROFILED, profile]
        pipe = subprocess.PIPE
        self.proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=errlog, env=home.cli_env, cwd=home.base)
        self.next_id = 0
        self.last_bytes = 0
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.request("initialize", init)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        self.write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.last_bytes = len(line)
        answer = json.loads(line)
        if answer.get("id") != self.next_id or "result" not in answer or answer["result"].get("isError"):
            raise SystemExit(f"MCP {method} failed: {answer}")
        return answer["result"]

    def cpu(self) -> float:
        """CPU seconds the server process has used so far (user + system, from /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


def run(queries: list[str], warmup: int, client: Any, mcp: Stdio) -> tuple[dict[str, list[float]], int, list[int]]:
    """Each query on both paths, alternating which goes first; latencies, queries answered differently, and the
    MCP answer lines' sizes."""
    lat: dict[str, list[float]] = {"socket": [], "mcp": [], "server_cpu": []}
    differ, sizes = 0, []
    for i, query in enumerate(queries[:warmup] + queries):
        if i == warmup:
            cpu = mcp.cpu()
        got: dict[str, list[str]] = {}
        for name in ("socket", "mcp") if i % 2 else ("mcp", "socket"):
            t0 = time.perf_counter()
            if name == "socket":
                got[name] = [h["id"] for h in client.call("memory.search", query=query, limit=LIMIT)["results"]]
            else:
                call = {"name": "memory_search", "arguments": {"query": query, "limit": LIMIT}}
                got[name] = [h["id"] for h in mcp.request("tools/call", call)["structuredContent"]["results"]]
            elapsed = time.perf_counter() - t0
            if i >= warmup:
                lat[name].append(elapsed)
        if i >= warmup:
            differ += got["socket"] != got["mcp"]
            sizes.append(mcp.last_bytes)
    lat["server_cpu"].append((mcp.cpu() - cpu) / len(queries))
    return lat, differ, sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200, help="timed queries (default 200)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed warm-up queries (default 30)")
    parser.add_argument("--cache", help="keep the prefilled home in this directory and reuse it on the next run")
    parser.add_argument("--profile", help="run the MCP server under cProfile, writing its stats to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home under bench/out/")
    args = parser.parse_args()
    root = bl.locomo_root()
    if root is None:
        return 0
    bl.print_machine("bench_mcp_search: memory_search over MCP (raw JSON-RPC on stdio) beside the socket")
    turns = [d["text"] for d in bl.read_jsonl(root / "corpus.jsonl")]
    queries = [q["query"] for q in bl.read_jsonl(root / "queries.jsonl")][::4][: args.queries]
    home = home_for(f"real-{SIZE}-1", args.cache)
    try:
        if os.path.exists(home.paths.store):
            existing = open_reader(home.paths.store)
            added = int(existing.conn.execute("SELECT count(*) FROM memories").fetchone()[0])  # type: ignore[index]
            existing.close()
        else:
            added = bl.prefill(home, corpus(turns, SIZE, 1))
        client = home.client()
        client.call("store.status")  # starts the daemon; this connection stays open
        settle(home.paths.store)
        with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
            mcp = Stdio(home, errlog, args.profile)
            lat, differ, sizes = run(queries, args.warmup, client, mcp)
            mcp.close()
        client.close()
    finally:
        home.cleanup(args.keep or bool(args.cache))
    sock, over = bl.ms(bl.pct(lat["socket"], 50)), bl.ms(bl.pct(lat["mcp"], 50))
    ok = over <= sock + TARGET_MS
    print(f"{added:,} memories in one space; {len(queries)} LoCoMo questions ({args.warmup} warm-up), limit {LIMIT};")
    print(
        f"MCP answer line median {bl.median([float(s) for s in sizes]):,.0f} bytes; load average at end {bl.load()}\n"
    )
    rows = [(name, bl.ms(bl.pct(lat[name], 50)), bl.ms(bl.pct(lat[name], 99))) for name in ("socket", "mcp")]
    bl.table(("path", "p50 ms", "p99 ms"), rows)
    print(f"CPU of the `hivemem mcp` process per call (mean): {bl.ms(lat['server_cpu'][0]):.2f} ms")
    print(f"mcp - socket p50: {over - sock:.2f} ms (target <= {TARGET_MS} ms): {bl.verdict(ok)}; differ: {differ}")
    return 0 if ok and differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
