"""A team store mounted beside the personal store (docs/team.md): what mounting it costs a search, and what a
search of both stores costs against each store's own.

Three homes on this machine: an administrator's, which initializes a fresh team store (a PostgreSQL database of
its own on `--server`) and makes a client token for it; "alone", a personal SQLite store with no team store; and
"mounted", a personal store with the same memories and the team store mounted (`team.url`, default `team.spaces`,
the token saved by `hivemem team join`). The personal stores are prefilled through hivemem's dispatch with the
daemon stopped, the team store through one `store.import` of a generated export document (then VACUUM ANALYZE);
both with the same generated texts across 20 spaces (`bench/sNN` and `team/sNN`). Each query is then timed over
the socket with the real client, the four searches in rotating order:

    a  personal one space, team not mounted   ("alone" daemon, spaces [bench/sNN])
    b  personal one space, team mounted       ("mounted" daemon, spaces [bench/sNN])
    c  team one space                         ("mounted" daemon, spaces [team/sNN])
    d  federated: a personal and a team space ("mounted" daemon, spaces [bench/sNN, team/sNN])

Targets: d p50 <= max(a p50, c p50) + 1 ms (the slower store's search + 1 ms); b p50 <= 1.1 x a p50.

    .venv/bin/python bench/bench_federation.py [--sizes 1000] [--queries 300]
        [--server postgresql://127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

import benchlib as bl
from hivemem import ops
from hivemem.auth import owner
from hivemem.store import open_store

SPACES = 20
GRANTS = '[{"right":"read","scope":"*"},{"right":"write","scope":"space:team/*"}]'
LABELS = {"a": "personal, team not mounted", "b": "personal, team mounted", "c": "team space",
          "d": "federated (personal + team space)"}  # fmt: skip


def write_config(home: bl.Home, text: str) -> None:
    directory = os.path.join(home.env["XDG_CONFIG_HOME"], "hivemem")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.open(os.path.join(directory, "config.toml"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)


def cli(home: bl.Home, *args: str) -> Any:
    """`hivemem ARGS --json` as the owner of `home`; its parsed result."""
    proc = subprocess.run([bl.hivemem_exe(), *args, "--json"], env=home.cli_env, capture_output=True, check=False,
                          cwd="/")  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"hivemem {' '.join(args)}: {proc.stderr.decode()}{proc.stdout.decode()}")
    return json.loads(proc.stdout)


def import_team(url: str, base: str, memories: list[tuple[str, str]]) -> None:
    """The team store's memories through one store.import of an export document (docs/operations.md)."""
    stamp = "2026-01-01T00:00:00.000Z"
    who = {"principal": "owner", "label": "owner"}
    doc = {"format": "hivemem.export", "version": 1, "exported": stamp, "store_id": str(uuid.uuid4()),
           "memories": [{"id": f"m{i + 1}", "space": space, "kind": "note", "content": content, "tags": [],
                         "status": "active", "confidence": 1.0, "revision": 1, "author": who, "updated_by": who,
                         "created": stamp, "updated": stamp} for i, (space, content) in enumerate(memories)],
           "relations": [], "sessions": []}  # fmt: skip
    source = os.path.join(base, "team.json")
    with open(source, "w") as f:
        json.dump(doc, f)
    store = open_store(os.path.join(base, "team", "store.db"), url=url)
    try:
        result = ops.dispatch(store, owner(), "store.import", {"path": source, "dry_run": False})
        assert result["planned"]["add"] == len(memories), result["planned"]
    finally:
        store.close()
        os.unlink(source)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")


def runner(client: Any, spaces: Callable[[int], list[str]]) -> Callable[[int, str], Any]:
    def run(i: int, query: str) -> Any:
        return client.call("memory.search", query=query, limit=10, spaces=spaces(i))

    return run


def measure(size: int, nqueries: int, server: str, keep: bool) -> dict[str, list[float]]:
    gen = bl.TextGen(seed=size)
    personal = list(gen.memories(size, 80, 400, SPACES))
    team = [(space.replace("bench/", "team/"), content) for space, content in gen.memories(size, 80, 400, SPACES)]
    queries = [gen.query() for _ in range(nqueries)]
    name = f"hm_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(server)._replace(path="/" + name))
    homes: list[bl.Home] = []
    clients: list[Any] = []
    try:
        admin_home = bl.Home(f"fed-admin-{size}")
        homes.append(admin_home)
        write_config(admin_home, f"store.url = {json.dumps(url)}\n")
        cli(admin_home, "store", "init")
        token = cli(admin_home, "client", "add", "--name", "bench", "--grants", GRANTS)["token"]
        admin_home.stop()
        import_team(url, admin_home.base, team)

        alone, mounted = bl.Home(f"fed-alone-{size}"), bl.Home(f"fed-mounted-{size}")
        homes += [alone, mounted]
        write_config(mounted, f"[team]\nurl = {json.dumps(url)}\n")
        cli(mounted, "team", "join", "--token", token)
        for home in (alone, mounted):
            home.activate()  # prefill writes the store of the process's current home
            t = time.perf_counter()
            assert bl.prefill(home, personal) == size
            print(f"  prefilled {size:,} personal memories in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        for home in (alone, mounted):
            clients.append(home.client())
            clients[-1].call("store.status")  # starts the daemon
        one = lambda i: [f"bench/s{i % SPACES:02d}"]  # noqa: E731
        runners = {
            "a": runner(clients[0], one),
            "b": runner(clients[1], one),
            "c": runner(clients[1], lambda i: [f"team/s{i % SPACES:02d}"]),
            "d": runner(clients[1], lambda i: [f"bench/s{i % SPACES:02d}", f"team/s{i % SPACES:02d}"]),
        }
        stores: dict[str, set[str]] = {k: set() for k in runners}
        for i, q in enumerate(queries[: min(100, len(queries))]):  # warm caches and connections on every path
            for key, run in runners.items():
                result = run(i, q)
                assert "unavailable" not in result, result
                stores[key] |= {h.get("store", "personal (no store field)") for h in result["results"]}
        print(f"  stores answering: {stores}", file=sys.stderr)
        lat: dict[str, list[float]] = {k: [] for k in runners}
        order = list(runners)
        for i, q in enumerate(queries):
            for key in order[i % 4 :] + order[: i % 4]:
                t0 = time.perf_counter()
                runners[key](i, q)
                lat[key].append(time.perf_counter() - t0)
    finally:
        for client in clients:
            client.close()
        for home in homes:
            home.cleanup(keep)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return lat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "1000")
    parser.add_argument("--queries", type=int, default=300, help="queries per size (default 300)")
    parser.add_argument("--server", default="postgresql://127.0.0.1:5432/test")
    args = parser.parse_args()
    bl.print_machine("bench_federation: one-space and federated memory.search with a team store mounted")
    rows, checks = [], []
    failed = False
    for size in bl.parse_sizes(args.sizes):
        print(f"size {size:,}: {args.queries} queries ...", file=sys.stderr, flush=True)
        lat = measure(size, args.queries, args.server, args.keep)
        p50 = {k: bl.ms(bl.pct(v, 50)) for k, v in lat.items()}
        for key, values in lat.items():
            rows.append((size, f"{key}: {LABELS[key]}", p50[key], bl.ms(bl.pct(values, 99))))
        bound = max(p50["a"], p50["c"]) + 1.0  # the slower store's one-space search + 1 ms
        fed_ok = p50["d"] <= bound
        mount_ok = p50["b"] / p50["a"] <= 1.1
        failed |= not (fed_ok and mount_ok)
        checks.append((size, "d p50 <= max(a p50, c p50) + 1 ms", f"{p50['d']:.3f} <= {bound:.3f}", bl.verdict(fed_ok)))
        checks.append((size, "b p50 / a p50 <= 1.1", f"{p50['b'] / p50['a']:.3f}", bl.verdict(mount_ok)))
    print("Latency in ms per memory.search over the socket (limit 10), the four searches in rotating order.\n")
    bl.table(("memories", "search", "p50", "p99"), rows)
    bl.table(("memories", "target", "measured", "verdict"), checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
