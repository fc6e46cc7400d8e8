"""LoCoMo split across a personal store and a mounted team store, against one store holding everything.

docs/team.md, "A personal store and a team store together": each store ranks its own hits and the daemon merges
the two lists (docs/decisions.md D393, D400). This measures what that costs retrieval on real conversational
memory QA with gold evidence (the data bench_retrieval.py reads: $HIVEMEM_BENCH_DATA or ../shared/data/ beside
the repo; skipped when absent; evaluation only, never copied into the repo).

LoCoMo's conversations, in name order, are dealt alternately: the even ones to spaces that stay personal
(`locomo/conv-26`), the odd ones to team spaces (`team/locomo/conv-30`, default `team.spaces`). Two set-ups hold
the same memories in the same spaces:

    one    one SQLite store holding every space (no team store mounted)
    split  a personal SQLite store with the personal spaces, and a team store (a fresh PostgreSQL database on
           --server, initialized by an administrator's home, the token saved by `hivemem team join`) with the
           team spaces, mounted by the personal daemon

The stores are filled through hivemem's dispatch (the personal SQLite stores with the daemon stopped, the team
store as its owner in-process; then VACUUM ANALYZE), keeping each memory's id for the gold evidence (a duplicate
text in a space returns the existing id, which then stands for every corpus id with that text). Every question
then runs memory.search through the daemon, limit 10, as bench_retrieval.py asks it:

    one, scoped     spaces = [its conversation's space]
    one, every      no spaces
    split, scoped   spaces = [its conversation's space] (one store answers)
    split, every    no spaces: both stores answer and the daemon merges

and, to compare merges on the same answers, each store's own part of "split, every" (spaces = every personal
space; spaces = every team space), merged here by each rule of MERGES.

    .venv/bin/python bench/bench_locomo_split.py [--sets turns] [--quick] [--server postgresql://127.0.0.1:5432/test]

--quick: the first four conversations (two in each store) and their questions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import apsw
import psycopg

import benchlib as bl
from bench_federation import GRANTS, cli, write_config
from bench_retrieval import SETS, first_gold_rank, scores, space_name
from hivemem import ops, paths
from hivemem.auth import owner
from hivemem.daemon.team import merge
from hivemem.store import open_store

LIMIT = 10
TOLERANCE = 0.02
Hits = list[dict[str, Any]]


def team_space(conversation: str) -> str:
    return "team/" + space_name(conversation)


def fill(store: Any, items: list[tuple[str, str, str]], prefix: str, by_memory: dict[str, list[str]]) -> None:
    """memory.add of each (space, text, corpus id) as the owner; each returned id, with `prefix`, stands for its
    corpus ids."""
    who = owner()
    for space, text, doc_id in items:
        result = ops.dispatch(store, who, "memory.add", {"space": space, "content": text})
        by_memory[prefix + result["id"]].append(doc_id)


def fill_sqlite(home: bl.Home, items: list[tuple[str, str, str]], by_memory: dict[str, list[str]]) -> None:
    """The home's SQLite store filled with the daemon stopped (benchlib.prefill's way, keeping the ids)."""
    home.activate()
    old = os.umask(0o077)
    try:
        paths.ensure_dir(home.paths.data_dir)
        store = open_store(home.paths.store)
    finally:
        os.umask(old)
    store.conn.execute("PRAGMA synchronous=OFF")
    fill(store, items, "", by_memory)
    store.conn.execute("PRAGMA synchronous=FULL")
    store.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    store.close()


def merge_scope(mine: Hits, theirs: Hits, query: str) -> Hits:
    """D393 as first shipped: every personal hit (here all of one scope group) before every team hit."""
    return (mine + theirs)[:LIMIT]


def merge_alternate(mine: Hits, theirs: Hits, query: str) -> Hits:
    """One hit of each store in turn, each store's order kept, the personal store's first."""
    out: Hits = []
    for i in range(max(len(mine), len(theirs))):
        out += mine[i : i + 1] + theirs[i : i + 1]
    return out[:LIMIT]


def merge_words(mine: Hits, theirs: Hits, query: str) -> Hits:
    """The daemon's merge (hivemem/daemon/team.py, D400): the head holding more of the query's words first, on a
    tie one of each store in turn."""
    return list(merge({"results": mine}, {"results": theirs}, LIMIT, "results", query=query)["results"])


MERGES: dict[str, Callable[[Hits, Hits, str], Hits]] = {"scope (D393)": merge_scope, "alternate": merge_alternate,
                                                        "the daemon's (D400)": merge_words}  # fmt: skip


def measure(root: Path, name: str, server: str, quick: bool, keep: bool) -> dict[str, Any]:
    corpus, qfile = SETS[name]
    docs = bl.read_jsonl(root / corpus)
    queries = bl.read_jsonl(root / qfile)
    conversations = sorted({d["conversation"] for d in docs})
    if quick:
        conversations = conversations[:4]
    mine = set(conversations[0::2])
    docs = [d for d in docs if d["conversation"] in conversations]
    queries = [q for q in queries if q["conversation"] in conversations]

    def space(conversation: str) -> str:
        return space_name(conversation) if conversation in mine else team_space(conversation)

    items = [(space(d["conversation"]), d["text"], d["id"]) for d in docs]
    print(f"{name}: {len(conversations)} conversations ({len(mine)} personal: {', '.join(sorted(mine))}), "
          f"{len(docs):,} memories ({sum(not i[0].startswith('team/') for i in items):,} personal), "
          f"{len(queries):,} questions", file=sys.stderr, flush=True)  # fmt: skip
    db = f"hm_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{db}"')
    homes: list[bl.Home] = []
    clients: list[Any] = []
    try:
        ids = load(items, urlunsplit(urlsplit(server)._replace(path="/" + db)), homes)
        for home in homes[::2]:  # the one store's home, then the mounted one
            clients.append(home.client())
            clients[-1].call("store.status")  # starts the daemon with this home's environment
        ranks, mixes = ask(clients, ids, queries, space, items)
    finally:
        for client in clients:
            client.close()
        for home in homes:
            home.cleanup(keep)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    halves = {"personal": [i for i, q in enumerate(queries) if q["conversation"] in mine],
              "team": [i for i, q in enumerate(queries) if q["conversation"] not in mine]}  # fmt: skip
    return {"name": name, "queries": len(queries), "ranks": ranks, "halves": halves, "mixes": mixes,
            "conversations": conversations, "personal": sorted(mine)}  # fmt: skip


def load(items: list[tuple[str, str, str]], url: str, homes: list[bl.Home]) -> list[dict[str, list[str]]]:
    """The one store's home, the team store's administrator's, the mounted home (appended to `homes`), filled;
    the corpus ids each memory id stands for, in the one store and in the split."""
    one_ids: dict[str, list[str]] = defaultdict(list)
    split_ids: dict[str, list[str]] = defaultdict(list)
    t = time.perf_counter()
    one = bl.Home("split-one")
    homes.append(one)
    fill_sqlite(one, items, one_ids)

    admin_home = bl.Home("split-admin")
    homes.append(admin_home)
    write_config(admin_home, f"store.url = {json.dumps(url)}\n")
    cli(admin_home, "store", "init")
    token = cli(admin_home, "client", "add", "--name", "bench", "--grants", GRANTS)["token"]
    admin_home.stop()
    store = open_store(os.path.join(admin_home.base, "team", "store.db"), url=url)
    try:
        fill(store, [i for i in items if i[0].startswith("team/")], "t:", split_ids)
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memories")

    mounted = bl.Home("split-mounted")
    homes.append(mounted)
    write_config(mounted, f"[team]\nurl = {json.dumps(url)}\n")
    cli(mounted, "team", "join", "--token", token)
    fill_sqlite(mounted, [i for i in items if not i[0].startswith("team/")], split_ids)
    print(f"  filled in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return [one_ids, split_ids]


def ask(clients: list[Any], ids: list[dict[str, list[str]]], queries: list[dict[str, Any]],
        space: Callable[[str], str], items: list[tuple[str, str, str]]) -> tuple[dict[str, list[int | None]],
                                                                                list[tuple[int, int]]]:  # fmt: skip
    """Every question in every search; the first gold rank of each, and each merged answer's (personal, team)."""
    one_c, split_c = clients
    one_ids, split_ids = ids
    personal_spaces = sorted({i[0] for i in items if not i[0].startswith("team/")})
    team_spaces = sorted({i[0] for i in items if i[0].startswith("team/")})
    modes = ("one, scoped", "one, every", "split, scoped", "split, every")
    ranks: dict[str, list[int | None]] = {m: [] for m in (*modes, *(f"split, every, merged here: {k}" for k in MERGES))}
    mixes: list[tuple[int, int]] = []

    def search(client: Any, query: str, spaces: list[str] | None) -> Hits:
        params: dict[str, Any] = {"query": query, "limit": LIMIT}
        if spaces is not None:
            params["spaces"] = spaces
        result = client.call("memory.search", **params)
        assert "unavailable" not in result, result
        return list(result["results"])

    def rank(hits: Hits, by: dict[str, list[str]], gold: set[str]) -> int | None:
        return first_gold_rank([by[h["id"]] for h in hits], gold)

    t = time.perf_counter()
    for q in queries:
        gold = set(q["gold_ids"])
        scoped = [space(q["conversation"])]
        answers = {
            "one, scoped": (search(one_c, q["query"], scoped), one_ids),
            "one, every": (search(one_c, q["query"], None), one_ids),
            "split, scoped": (search(split_c, q["query"], scoped), split_ids),
            "split, every": (search(split_c, q["query"], None), split_ids),
        }
        for mode, (hits, by) in answers.items():
            ranks[mode].append(rank(hits, by, gold))
        merged = answers["split, every"][0]
        mixes.append((sum(h["store"] == "personal" for h in merged), sum(h["store"] == "team" for h in merged)))
        parts = search(split_c, q["query"], personal_spaces), search(split_c, q["query"], team_spaces)
        for key, rule in MERGES.items():
            ranks[f"split, every, merged here: {key}"].append(rank(rule(*parts, q["query"]), split_ids, gold))
    print(f"  {len(queries) * 6:,} searches in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return ranks, mixes


def report(results: list[dict[str, Any]]) -> bool:
    ok_all = True
    rows: list[tuple[Any, ...]] = []
    checks: list[tuple[Any, ...]] = []
    for r in results:
        ranks = r["ranks"]
        for mode, values in ranks.items():
            row = [r["name"], mode, len(values), *scores(values)]
            for half in ("personal", "team"):
                row.append(scores([values[i] for i in r["halves"][half]])[0])
            rows.append(tuple(row))
        for split, base in (("split, scoped", "one, scoped"), ("split, every", "one, every")):
            gap = scores(ranks[split])[0] - scores(ranks[base])[0]
            ok = abs(gap) <= TOLERANCE
            ok_all &= ok
            checks.append((r["name"], f"R@5 {split} - {base}", f"{gap:+.3f}", bl.verdict(ok)))
        mixes = r["mixes"]
        only_personal = sum(1 for p, t in mixes if t == 0)
        print(f"{r['name']}: conversations {', '.join(r['conversations'])}; personal: {', '.join(r['personal'])}")
        print(f"{r['name']}: split, every: {sum(p for p, _ in mixes) / len(mixes):.2f} personal and "
              f"{sum(t for _, t in mixes) / len(mixes):.2f} team hits per answer on average; {only_personal} of "
              f"{len(mixes)} answers hold no team hit\n")  # fmt: skip
    print(
        f"memory.search through the daemon, limit {LIMIT}. R@5 by half: questions on the conversations kept "
        "personal, and on those in the team store.\n"
    )
    bl.table(("set", "search", "questions", "R@5", "R@10", "MRR@10", "R@5 personal half", "R@5 team half"), rows)
    print(f"Target: the split's R@5 within {TOLERANCE} of one store's, scoped and over every space.\n")
    bl.table(("set", "compared", "R@5 gap", "verdict"), checks)
    return ok_all


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="turns", help=f"comma-separated subset of {', '.join(SETS)}")
    parser.add_argument("--quick", action="store_true", help="the first four conversations only")
    parser.add_argument("--server", default="postgresql://127.0.0.1:5432/test")
    parser.add_argument("--keep", action="store_true", help="keep the temporary homes under bench/out/")
    args = parser.parse_args()
    root = bl.locomo_root()
    if root is None:
        return 0
    bl.print_machine("bench_locomo_split: LoCoMo split across a personal and a mounted team store")
    results = [measure(root, name, args.server, args.quick, args.keep) for name in args.sets.split(",") if name]
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
