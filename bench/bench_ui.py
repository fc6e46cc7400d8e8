"""Review UI page latency at scale: each page over HTTP (the UI server, its owner connection to the daemon, the
daemon's work and the HTML) beside the raw SQLite query that fetches the same rows, on the same database file.

Pages: the list (/search with a space filter, 50 rows), a search (/search?q=…, 50 results), a memory (/memory/m<N>
with history and audit), and the health page (doctor, counts, spaces, two charts over up to 5,000 events).
Baselines on a read-only APSW connection: list = SELECT of 50 live rows of the space newest first; search = the bm25
query hivemem runs (as in bench_search.py); memory = the row and its versions. The health page is shown beside a
count of live memories only for scale.

Targets (pages load fast at 100k memories): list and memory pages p50 <= 50 ms, p99 <= 200 ms; a search page adds
at most 50 ms to the raw query at p50 and stays within 2 x raw at p99 (the query itself is bench_search.py's subject).

    .venv/bin/python bench/bench_ui.py [--sizes 10000,100000] [--requests 200]
"""

from __future__ import annotations

import argparse
import http.client
import random
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import benchlib as bl
from bench_search import raw_runner
from hivemem.store.sqlite.db import connect
from hivemem.web.app import Owner
from hivemem.web.server import open_ui

SPACES = 20
P50_MS, P99_MS = 50.0, 200.0


def ui_page(origin: str, port: int, cookie: str) -> Callable[[str], int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Host": origin.removeprefix("http://"), "Cookie": cookie}

    def get(path: str) -> int:
        conn.request("GET", path, headers=headers)
        reply = conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            raise RuntimeError(f"{path}: {reply.status} {body[-300:]!r}")
        return len(body)

    return get


def timed(run: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


def measure(size: int, requests: int, keep: bool) -> list[tuple[Any, ...]]:
    gen = bl.TextGen(seed=size)
    home = bl.Home(f"ui-{size}")
    rows: list[tuple[Any, ...]] = []
    try:
        t = time.perf_counter()
        added = bl.prefill(home, gen.memories(size, 80, 400, SPACES))
        print(f"  prefilled {added:,} memories in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        owner = Owner(home.client())
        served = open_ui(owner).start()
        assert served.guard.login_token is not None
        cookie = f"{served.guard.cookie}={served.guard.login(served.guard.login_token)}"
        get = ui_page(served.guard.origin, served.port, cookie)
        raw = connect(home.paths.store, readonly=True)
        rng = random.Random(size)
        queries = [gen.query() for _ in range(requests)]
        search_raw = raw_runner(raw, None)
        pages: dict[str, tuple[Callable[[], Any], Callable[[], Any], int]] = {
            "list (50 rows)": (
                lambda: get("/search?" + urlencode({"spaces": "bench/s07"})),
                lambda: raw.execute(
                    "SELECT id, space, kind, title, substr(content, 1, 200), tags, updated FROM "
                    "memories WHERE deleted IS NULL AND status = 'active' AND space = ? "
                    "ORDER BY id DESC LIMIT 50",
                    ("bench/s07",),
                ).fetchall(),
                requests,
            ),
            "search (50 results)": (
                lambda: get("/search?" + urlencode({"q": rng.choice(queries)})),
                lambda: search_raw(rng.choice(queries)),
                requests,
            ),
            "memory + history": (
                lambda: get(f"/memory/m{rng.randint(1, added)}"),
                lambda: _raw_memory(raw, rng.randint(1, added)),
                requests,
            ),
            "health": (
                lambda: get("/health"),
                lambda: raw.execute("SELECT count(*) FROM memories WHERE deleted IS NULL").fetchall(),
                max(requests // 20, 5),
            ),
        }
        for name, (ui, baseline, n) in pages.items():
            timed(ui, min(20, n))  # warm both paths
            timed(baseline, min(20, n))
            ui_lat, raw_lat = timed(ui, n), timed(baseline, n)
            ok = meets(name, ui_lat, raw_lat)
            rows.append((size, name, n, bl.ms(bl.pct(raw_lat, 50)), bl.ms(bl.pct(ui_lat, 50)),
                         bl.ms(bl.pct(raw_lat, 99)), bl.ms(bl.pct(ui_lat, 99)), bl.verdict(ok)))  # fmt: skip
        served.close()
        owner.close()
        raw.close()
    finally:
        home.cleanup(keep)
    return rows


def meets(page: str, ui: list[float], raw: list[float]) -> bool:
    ui50, ui99, raw50, raw99 = (bl.pct(v, q) * 1000 for v in (ui, raw) for q in (50, 99))
    if page.startswith("health"):
        return True
    if page.startswith("search"):
        return ui50 <= raw50 + P50_MS and ui99 <= 2 * raw99
    return ui50 <= P50_MS and ui99 <= P99_MS


def _raw_memory(conn: Any, mid: int) -> int:
    row = conn.execute("SELECT * FROM memories WHERE id = ?", (mid,)).fetchall()
    versions = conn.execute("SELECT * FROM memory_versions WHERE memory = ?", (mid,)).fetchall()
    return len(row) + len(versions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.sizes_arg(parser, "10000,100000")
    parser.add_argument("--requests", type=int, default=200, help="requests per page and size (default 200)")
    args = parser.parse_args()
    bl.print_machine("bench_ui: review UI pages over HTTP vs the raw SQLite query for the same rows")
    rows = []
    for size in bl.parse_sizes(args.sizes):
        print(f"size {size:,}: {args.requests} requests per page ...", file=sys.stderr, flush=True)
        rows += measure(size, args.requests, args.keep)
    print(f"Latency in ms per request. Targets: list and memory pages p50 <= {P50_MS:g}, p99 <= {P99_MS:g}; "
          f"search pages p50 <= raw + {P50_MS:g}, p99 <= 2 x raw; health is shown for scale.\n")  # fmt: skip
    bl.table(("memories", "page", "requests", "raw p50", "UI p50", "raw p99", "UI p99", "target"), rows)
    return 0 if all(r[-1] != bl.verdict(False) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
