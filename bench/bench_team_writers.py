"""Two machines writing one team store at once against one machine alone (docs/team.md, D208): writes per second.

Two homes (separate config, data and runtime directories, as two machines have), each running its own real
`hivemem serve` against one fresh PostgreSQL database. Client processes connect to a daemon over its Unix socket
and each makes `--ops` writes: `memory.add` of a new text, and every `--update-every`-th a compare-and-swap
`memory.update` of the client's own memory at the revision it last got. Each round measures, with the same total
of clients, one daemon alone (all `2 x --clients` on it, the other idle) and both daemons (`--clients` each), in
alternating order; the ratio is both's throughput over one's, from the same round.

With `--rtt-ms X`, each daemon reaches the server through its own small TCP relay that holds every chunk X/2 ms
each way, as a LAN between machines and the server would (on one host, the daemon's round trips cost nearly
nothing, and two daemons mostly compete for the same two cores instead).

    .venv/bin/python bench/bench_team_writers.py [--clients 8] [--ops 150] [--rounds 3] [--rtt-ms 0]
        [--server postgresql://127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from urllib.parse import urlsplit, urlunsplit

import benchlib as bl

CLIENT = r"""
import json, sys, time
from hivemem.client import DaemonClient
from hivemem.config import load
name, count, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = DaemonClient(load(), token="@owner", start=False, name="bench")
mine = client.call("memory.add", space="team", content=f"the counter of {name} stands at 0")
revision = mine["revision"]
print("ready", flush=True)
sys.stdin.readline()
took = []
for i in range(count):
    t = time.perf_counter()
    if every and i % every == every - 1:
        revision = client.call("memory.update", id=mine["id"], revision=revision,
                               content=f"the counter of {name} stands at {i}")["revision"]
    else:
        client.call("memory.add", space="team", tags=["bench"],
                    content=f"{name} learned lesson {i}: keep the build green, run the linters before each "
                            f"commit, and write down why a decision was made, not only what it was.")
    took.append(time.perf_counter() - t)
took.sort()
print(json.dumps({"n": count, "p50": took[len(took) // 2]}), flush=True)
"""


# ---------------------------------------------------------------- the relay (a LAN between a machine and the server)


def relay(target: tuple[str, int], delay: float, ready: Connection) -> None:
    """Forward TCP connections to `target`, each chunk held `delay` seconds in each direction (in order)."""

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + delay, data))
        except ConnectionError:
            pass
        queue.put_nowait((0.0, b""))
        await sender

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*target)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ready.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(main())


def start_relay(url: str, rtt_ms: float) -> tuple[str, multiprocessing.Process]:
    """A relay process in front of the server of `url`; the URL that goes through it."""
    parts = urlsplit(url)
    here, there = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=relay, args=((parts.hostname, parts.port or 5432), rtt_ms / 2000, there))
    proc.start()
    port = here.recv()
    return urlunsplit(parts._replace(netloc=f"{parts.hostname}:{port}")), proc


def round_trip_ms(url: str, n: int = 50) -> float:
    """The median time of `SELECT 1` on `url` (through a relay: what a daemon's statement waits at least)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        took = []
        for _ in range(n):
            t = time.perf_counter()
            conn.execute("SELECT 1").fetchall()
            took.append(time.perf_counter() - t)
    return bl.ms(bl.median(took))


# ---------------------------------------------------------------- machines


def configure(home: bl.Home, url: str) -> None:
    directory = os.path.join(home.env["XDG_CONFIG_HOME"], "hivemem")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.open(os.path.join(directory, "config.toml"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(f'store.url = {json.dumps(url)}\ndaemon.startup = "explicit"\n')


def serve(home: bl.Home) -> subprocess.Popen[bytes]:
    home.activate()  # Home.running() resolves the socket from this process's environment
    daemon = subprocess.Popen([bl.hivemem_exe(), "serve"], env=home.env, cwd="/", stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while not home.running():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the daemon of {home.base} did not start")
        time.sleep(0.05)
    return daemon


def phase(homes: list[bl.Home], clients: int, ops: int, every: int, tag: str) -> tuple[float, float]:
    """`clients` client processes on each of `homes`, released together: (writes per second, median p50 ms)."""
    procs = []
    for h in homes:
        for c in range(clients):
            name = f"{tag}-{os.path.basename(h.base)}-{c}"
            procs.append(subprocess.Popen([sys.executable, "-c", CLIENT, name, str(ops), str(every)],
                                          env=h.cli_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          text=True))  # fmt: skip
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()  # each client has connected and made its own memory
        if line != "ready":
            raise SystemExit(f"a client did not start: {line!r}")
    started = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"a client failed (exit {p.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.perf_counter() - started
    total = sum(r["n"] for r in results)
    return total / elapsed, bl.ms(bl.median([r["p50"] for r in results]))


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="client processes per daemon when both write")
    parser.add_argument("--ops", type=int, default=150, help="writes per client per phase")
    parser.add_argument("--update-every", type=int, default=4, help="every Nth write is a CAS update (0: none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="round trip added between daemon and server")
    parser.add_argument("--server", default=os.environ.get("HIVEMEM_TEST_PG", "postgresql://127.0.0.1:5432/test"))
    parser.add_argument("--restart", action="store_true", help="fresh daemons before each phase")
    parser.add_argument("--keep", action="store_true")
    return parser.parse_args()


def machines(homes: list[bl.Home], url: str, rtt_ms: float, relays: list[multiprocessing.Process]) -> None:
    """Each home's config on the database (through a relay of its own with `rtt_ms`), the schema and owner
    key made by the first (`store init`) and the key copied to the second, as a team does (D154)."""
    print(f"a statement's round trip to the server, direct: {round_trip_ms(url):.2f} ms")
    for h in homes:
        target = url
        if rtt_ms > 0:
            target, proc = start_relay(url, rtt_ms)
            relays.append(proc)
            print(f"through {os.path.basename(h.base)}'s relay: {round_trip_ms(target):.2f} ms")
        configure(h, target)
    init = subprocess.run([bl.hivemem_exe(), "store", "init", "--json"], env=homes[0].env, capture_output=True)
    assert init.returncode == 0, init.stderr
    key, copy = (os.path.join(h.env["XDG_CONFIG_HOME"], "hivemem", "owner.key") for h in homes)
    shutil.copyfile(key, copy)
    os.chmod(copy, 0o600)


def rounds(
    homes: list[bl.Home], args: argparse.Namespace, daemons: list[subprocess.Popen[bytes]]
) -> list[list[object]]:
    """Alternating rounds of one daemon alone and both, the same total of clients in each."""
    rows: list[list[object]] = []
    for r in range(args.rounds):
        order = ["one", "two"] if r % 2 == 0 else ["two", "one"]
        got: dict[str, tuple[float, float]] = {}
        for which in order:
            if args.restart:
                stop(daemons, [])
                daemons[:] = [serve(h) for h in homes]
            if which == "one":
                got[which] = phase(homes[:1], 2 * args.clients, args.ops, args.update_every, f"r{r}one")
            else:
                got[which] = phase(homes, args.clients, args.ops, args.update_every, f"r{r}two")
        ratio = got["two"][0] / got["one"][0]
        rows.append([r + 1, " then ".join(order), got["one"][0], got["two"][0], ratio, got["one"][1],
                     got["two"][1], bl.load()])  # fmt: skip
    return rows


def main() -> None:
    args = arguments()
    bl.print_machine("bench_team_writers: 2 daemons writing one team store vs 1 daemon alone")
    homes = [bl.Home("writers-a"), bl.Home("writers-b")]
    drop = bl.team_store(homes[0], args.server)
    with open(os.path.join(homes[0].env["XDG_CONFIG_HOME"], "hivemem", "config.toml")) as f:
        url = json.loads(f.read().split("=", 1)[1].strip())
    relays: list[multiprocessing.Process] = []
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        machines(homes, url, args.rtt_ms, relays)
        daemons = [serve(h) for h in homes]
        print(f"clients: {2 * args.clients} in all ({args.clients} per daemon when both write); {args.ops} writes "
              f"each, every {args.update_every}th a CAS update; rtt added: {args.rtt_ms} ms\n")  # fmt: skip
        phase(homes, 2, 20, args.update_every, "warm")
        rows = rounds(homes, args, daemons)
        bl.table(["round", "order", "1 daemon writes/s", "2 daemons writes/s", "ratio", "1: p50 ms", "2: p50 ms",
                  "load"], rows)  # fmt: skip
        ratios = sorted(float(str(row[4])) for row in rows)
        mid = bl.median(ratios)
        print(f"median ratio {mid:.2f} (range {ratios[0]:.2f}-{ratios[-1]:.2f}); target 1.5: {bl.verdict(mid >= 1.5)}")
    finally:
        stop(daemons, relays)
        drop()
        for h in homes:
            if not args.keep:
                shutil.rmtree(h.base, ignore_errors=True)


def stop(daemons: list[subprocess.Popen[bytes]], relays: list[multiprocessing.Process]) -> None:
    for d in daemons:
        d.terminate()
    for d in daemons:
        try:
            d.wait(20)
        except subprocess.TimeoutExpired:
            d.kill()
    for proc in relays:
        proc.terminate()
        proc.join(10)


if __name__ == "__main__":
    main()
