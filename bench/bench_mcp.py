"""MCP overhead: a `memory_search` tool call over an open MCP session vs the same search over the raw socket.

A store of --size memories (default 10,000; 80-400 bytes over 20 spaces, as bench_search) is prefilled with the
daemon stopped, then the daemon is started. Two paths to the same daemon, same token (@owner), same queries:

    raw   hivemem.client.DaemonClient.call("memory.search", ...) on one open connection, in this process
    mcp   ClientSession.call_tool("memory_search", ...) of the official MCP SDK on one initialized session with a
          `python -m hivemem mcp` process spawned over stdio (mcp.client.stdio.stdio_client), HIVEMEM_TOKEN=@owner

The MCP time is the whole tool call as an agent's harness sees it: client-side JSON-RPC encoding, the pipe,
the server's SDK dispatch, its worker-thread hop and daemon request, the result's text block and
structured content, and the client-side parse. Both paths are warmed up first; each query runs on both, in
alternating order. A `whoami` row (a verb with almost no work) shows the fixed per-call overhead of each path.

Target: MCP p50 <= 1.5 x raw p50 and MCP p99 <= 1.5 x raw p99, for each search case.

Info rows marked "lines" repeat the search cases with a second `hivemem mcp` process driven by plain JSON-RPC
lines on its stdin/stdout (after the same initialize handshake) instead of the SDK's ClientSession: the
difference between the two rows is the Python SDK client's own cost, which a harness written in another
language does not pay.

    .venv/bin/python bench/bench_mcp.py [--size 10000] [--queries 500] [--warmup 50] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import benchlib as bl

SPACES = 20
TARGET = 1.5
# (label, tool/verb, arguments without the query, judged?)
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("search, all spaces", "memory.search", {"limit": 10}, True),
    ("search, one space", "memory.search", {"limit": 10, "spaces": ["bench/s07"]}, True),
    ("whoami (fixed overhead)", "whoami", {}, False),
]

Runner = Callable[[str], Awaitable[list[str]]]


def raw_runner(client: Any, verb: str, args: dict[str, Any]) -> Runner:
    async def run(query: str) -> list[str]:
        if verb == "whoami":
            return [client.call("whoami")["principal"]]
        return [h["id"] for h in client.call(verb, query=query, **args)["results"]]

    return run


def mcp_runner(session: ClientSession, verb: str, args: dict[str, Any]) -> Runner:
    name = verb.replace(".", "_")

    async def run(query: str) -> list[str]:
        result = await session.call_tool(name, args if verb == "whoami" else {"query": query, **args})
        ok: Any = getattr(result, "structured_content", None)
        if getattr(result, "is_error", False) or not isinstance(ok, dict):
            raise SystemExit(f"MCP tool {name} failed: {result}")
        return [ok["principal"]] if verb == "whoami" else [h["id"] for h in ok["results"]]

    return run


class Lines:
    """A `hivemem mcp` process spoken to in raw JSON-RPC lines: one request written, one response read."""

    def __init__(self, home: bl.Home, errlog: Any) -> None:
        argv, pipe = [sys.executable, "-m", "hivemem", "mcp"], subprocess.PIPE
        self.proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=errlog, env=home.cli_env, cwd=home.base)
        self.next_id = 0
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
        answer = json.loads(self.proc.stdout.readline())
        if answer.get("id") != self.next_id or "result" not in answer or answer["result"].get("isError"):
            raise SystemExit(f"MCP {method} failed: {answer}")
        return answer["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def lines_runner(lines: Lines, verb: str, args: dict[str, Any]) -> Runner:
    name = verb.replace(".", "_")

    async def run(query: str) -> list[str]:
        ok = lines.request("tools/call", {"name": name, "arguments": {"query": query, **args}})["structuredContent"]
        return [h["id"] for h in ok["results"]]

    return run


async def paired(runners: dict[str, Runner], queries: list[str]) -> tuple[dict[str, list[float]], int]:
    """Each query on both paths, alternating which goes first; latencies and the count of differing results."""
    order = list(runners)
    lat: dict[str, list[float]] = {k: [] for k in order}
    differ = 0
    for i, q in enumerate(queries):
        got = {}
        for name in order[i % 2 :] + order[: i % 2]:
            t0 = time.perf_counter()
            got[name] = await runners[name](q)
            lat[name].append(time.perf_counter() - t0)
        differ += got["raw"] != got["mcp"]
    return lat, differ


async def bench(home: bl.Home, queries: list[str], warmup: int) -> tuple[list[dict[str, Any]], float]:
    raw = home.client()
    raw.call("store.status")  # starts the daemon; this connection stays open
    params = StdioServerParameters(command=sys.executable, args=["-m", "hivemem", "mcp"], env=home.cli_env,
                                   cwd=home.base)  # fmt: skip
    rows = []
    with open(os.path.join(home.base, "mcp-stderr.log"), "a") as errlog:
        t0 = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            init = time.perf_counter() - t0
            await session.list_tools()
            for label, verb, args, judged in CASES:
                print(f"  case: {label} ...", file=sys.stderr, flush=True)
                runners = {"raw": raw_runner(raw, verb, args), "mcp": mcp_runner(session, verb, args)}
                await paired(runners, queries[:warmup])
                lat, differ = await paired(runners, queries)
                rows.append({"case": label, "judged": judged, "differ": differ, **stats(lat)})
        lines = Lines(home, errlog)
        for label, verb, args, judged in CASES:
            if not judged:
                continue
            print(f"  case: {label}, lines ...", file=sys.stderr, flush=True)
            runners = {"raw": raw_runner(raw, verb, args), "mcp": lines_runner(lines, verb, args)}
            await paired(runners, queries[:warmup])
            lat, differ = await paired(runners, queries)
            rows.append({"case": f"{label}, lines", "judged": False, "differ": differ, **stats(lat)})
        lines.close()
    raw.close()
    return rows, init


def stats(lat: dict[str, list[float]]) -> dict[str, float]:
    out = {}
    for name, values in lat.items():
        out[f"{name}_p50"] = bl.ms(bl.pct(values, 50))
        out[f"{name}_p99"] = bl.ms(bl.pct(values, 99))
    out["paired"] = bl.median([m / r for m, r in zip(lat["mcp"], lat["raw"], strict=True)])
    out["added"] = bl.median([bl.ms(m - r) for m, r in zip(lat["mcp"], lat["raw"], strict=True)])
    return out


def report(rows: list[dict[str, Any]], init: float) -> bool:
    failed = False
    out = []
    for r in rows:
        p50, p99 = r["mcp_p50"] / r["raw_p50"], r["mcp_p99"] / r["raw_p99"]
        ok50, ok99 = p50 <= TARGET, p99 <= TARGET
        if r["judged"]:
            failed |= not (ok50 and ok99)
        v50, v99 = (bl.verdict(ok50), bl.verdict(ok99)) if r["judged"] else ("(info)", "(info)")
        out.append((r["case"], r["raw_p50"], r["mcp_p50"], p50, v50, r["raw_p99"], r["mcp_p99"], p99, v99,
                    r["added"], r["paired"], r["differ"]))  # fmt: skip
    print("Latency in ms per call. raw = DaemonClient over the Unix socket; mcp = ClientSession.call_tool over stdio")
    print("to `python -m hivemem mcp`. added = median over queries of (mcp - raw) for the same query; paired = median")
    print("of (mcp / raw). differ = queries whose result ids differ between the paths (must be 0). Rows ending in")
    print("`lines`: mcp = plain JSON-RPC lines to a second `hivemem mcp` process instead of the SDK client (info).")
    print(f"Target: mcp p50 <= {TARGET} x raw p50 and mcp p99 <= {TARGET} x raw p99 (search rows).\n")
    bl.table(("case", "raw p50", "mcp p50", "p50 ratio", "p50 target", "raw p99", "mcp p99", "p99 ratio",
              "p99 target", "added p50 (ms)", "paired", "differ"), out)  # fmt: skip
    print(f"MCP session start (spawn `python -m hivemem mcp` + initialize): {bl.ms(init):.0f} ms (not judged here).\n")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store (default 10000)")
    parser.add_argument("--queries", type=int, default=500, help="timed queries per case (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed warm-up queries per case (default 50)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home under bench/out/")
    args = parser.parse_args()
    bl.print_machine("bench_mcp: memory_search over MCP (stdio, official SDK) vs memory.search over the raw socket")
    gen = bl.TextGen(seed=args.size + 5)
    home = bl.Home(f"mcp-{args.size}")
    try:
        t = time.perf_counter()
        added = bl.prefill(home, gen.memories(args.size, 80, 400, SPACES))
        print(f"  prefilled {added:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        queries = [gen.query() for _ in range(args.queries)]
        rows, init = asyncio.run(bench(home, queries, args.warmup))
    finally:
        home.cleanup(args.keep)
    print(f"{args.size:,} memories over {SPACES} spaces; {args.queries} queries per case, {args.warmup} warm-up;")
    print(f"token @owner on both paths; MCP server: {sys.executable} -m hivemem mcp.\n")
    return 1 if report(rows, init) else 0


if __name__ == "__main__":
    sys.exit(main())
