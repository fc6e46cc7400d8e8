"""Recall on natural questions and on unrelated prompts: the rule on words (docs/decisions.md D282) against
D126's two-words-within-8 and against none, embeddings off and on.

Two parts, each run with hivemem's own `memory.recall` selection code (search/recall.py `matching`, limit 8)
on an in-process store:

- **repository**: bench/data/recall_repo.json, the memories of a made-up repository (72, some in Chinese,
  Japanese and Korean) in `project/ledgerly`, the natural questions a developer asks about it (68, 15 in
  Chinese, Japanese or Korean), each with the memory that answers it, and 59 unrelated prompts in the same
  languages (the last 15 questions and 15 prompts were written after the rule was tuned, as a check).
  "recalled" is the share of questions whose memory is among the records; "inject any" the share
  of unrelated prompts that render any record. Targets (docs/hooks.md, issue 28): at least 0.90 and at most 0.05.
- **LoCoMo** (the evaluation data, as bench_retrieval.py reads it; every conversation its own space): "gold
  recalled" is the share of questions whose gold memory is among the records in their own conversation's
  space; "false injection" the share of recalls of a question in another conversation's space (each question
  in each of the other conversations, or the next --others) that render any record; "unrelated" the same for
  bench_hybrid.py's 100 unrelated prompts in every conversation's space. Targets: gold recalled at least
  D126's, false injection at most 0.05.

Embeddings: `off`; `stub`, the tests' stub HTTP endpoint (tests/embedstub.py: word-hash vectors, width 64)
through the http provider at recall.min_similarity 0.3 (the default for http), which exercises the vector
path but knows no meaning; `e5`, the local model (multilingual-e5-small) at its tuned floor 0.87, with
vectors cached under bench/out/ like bench_hybrid.py (LoCoMo with e5 only when its cache holds the split's
vectors, from `bench_hybrid.py --sets turns,observations`, or with --embed). Latency columns: the p50 of one
recall's selection beside the p50 of a raw FTS5 bm25 query of the same terms on the same connection.

    .venv/bin/python bench/bench_recall.py [--embeddings off,stub,e5] [--sets turns,observations] [--others 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchlib as bl
from bench_retrieval import SETS, space_name
from hivemem.auth import Readable, owner
from hivemem.embeddings import Settings, cut_text
from hivemem.render import HIDDEN_STATES
from hivemem.search import recall as recall_mod
from hivemem.search.terms import CJK_RUN, floor_terms
from hivemem.search.vector import Runtime
from hivemem.store import open_store
from hivemem.store.base import NewMemory
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits
from hivemem.store.sqlite import vectors
from hivemem.store.sqlite.memories import add
from hivemem.store.sqlite.search import match_expression

sys.path.insert(0, str(bl.REPO / "tests"))
from embedstub import running

DATA = bl.REPO / "bench" / "data" / "recall_repo.json"
SPACE = "project/ledgerly"
RULES = (("none", "none"), ("near", "D126: two words within 8"), ("evidence", "D282: evidence"))
LIMIT = 8
MAX_INPUT = 32768
STUB_FLOOR = 0.3  # recall.min_similarity's default for an http provider
RAW = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts, 5.0, 1.0, 3.0) LIMIT 100"


class Embedder:
    """One way of embedding (stub or e5): the provider, recall's floor, and a runtime built on a store."""

    def __init__(self, name: str, provider: Any, floor: float, kind: str) -> None:
        self.name, self.provider, self.floor, self.kind = name, provider, floor, kind

    def attach(self, store: Any) -> Runtime:
        pending = vectors.pending(store.conn, 1 << 30)
        texts = [cut_text(title, content, MAX_INPUT) for _, title, content, _ in pending]
        embedded: list[list[float]] = []
        for i in range(0, len(texts), 64):
            embedded += self.provider.embed(texts[i : i + 64], query=False, timeout=3600)
        model = self.provider.model
        vectors.put(store.conn, model, [(m, t, d, v) for (m, t, _, d), v in zip(pending, embedded, strict=True)])
        return Runtime(self.provider, 600_000, self.kind)


def recall(store: Any, runtime: Runtime | None, floor: float, prompt: str, flt: Filter, rule: str) -> list[int]:
    store.limits = Limits(recall_min_similarity=floor) if runtime is not None else Limits()
    got, _ = recall_mod.matching(store, runtime, prompt, flt, LIMIT, rule)
    return [int(m["id"][1:]) for m in got]


def timed(store: Any, prompts: list[str], flt: Filter, rule: str) -> tuple[float, float]:
    """p50 ms of the rule's selection (embeddings off) and of a raw FTS5 bm25 query of the same terms."""
    ours, raw = [], []
    for prompt in prompts:
        t = time.perf_counter()
        recall(store, None, 0.0, prompt, flt, rule)
        ours.append(time.perf_counter() - t)
        words = floor_terms(prompt)
        if words:
            t = time.perf_counter()
            list(store.conn.execute(RAW, (match_expression(words),)))
            raw.append(time.perf_counter() - t)
    return bl.ms(bl.median(ours)), bl.ms(bl.median(raw))


def repository(base: str, embedders: list[Embedder | None], verbose: bool) -> list[tuple[Any, ...]]:
    data = json.loads(DATA.read_text("utf-8"))
    store = open_store(str(Path(base) / "repo.db"))
    me = owner()
    ids: dict[str, int] = {}
    for memory in data["memories"]:
        p = NewMemory(SPACE, memory["content"], kind=memory["kind"], title=memory.get("title", ""),
                      tags=memory["tags"])  # fmt: skip
        ids[memory["key"]] = int(add(store.conn, store.limits, me, p, None)["id"][1:])
    flt = Filter(readable=Readable(everything=True), spaces=(SPACE, "user"), hide_states=HIDDEN_STATES)
    questions, unrelated = data["questions"], data["unrelated"]
    cjk = [q for q in questions if CJK_RUN.search(q["q"])]
    rows: list[tuple[Any, ...]] = []
    for embedder in embedders:
        runtime = embedder.attach(store) if embedder is not None else None
        floor = embedder.floor if embedder is not None else 0.0
        label = embedder.name if embedder is not None else "off"
        for rule, name in RULES:
            missed = [q for q in questions if ids[q["a"]] not in recall(store, runtime, floor, q["q"], flt, rule)]
            injected = [p for p in unrelated if recall(store, runtime, floor, p, flt, rule)]
            cjk_hit = sum(q not in missed for q in cjk)
            p50, raw = timed(store, [q["q"] for q in questions] + unrelated, flt, rule)
            rows.append((name, label, f"{len(questions) - len(missed)}/{len(questions)}",
                         (len(questions) - len(missed)) / len(questions), f"{cjk_hit}/{len(cjk)}",
                         f"{len(injected)}/{len(unrelated)}", len(injected) / len(unrelated), p50, raw))  # fmt: skip
            if verbose:
                for q in missed:
                    print(f"  miss [{name}, {label}]: {q['q']}", file=sys.stderr)
                for p in injected:
                    print(f"  injects [{name}, {label}]: {p}", file=sys.stderr)
    store.close()
    return rows


def locomo(base: str, root: Path, name: str, embedders: list[Embedder | None], others: int,
           unrelated: list[str], rules: list[str]) -> list[tuple[Any, ...]]:  # fmt: skip
    corpus, qfile = SETS[name]
    docs = bl.read_jsonl(root / corpus)
    queries = bl.read_jsonl(root / qfile)
    store = open_store(str(Path(base) / f"{name}.db"))
    me = owner()
    by_memory: dict[int, str] = {}
    for doc in docs:
        p = NewMemory(space_name(doc["conversation"]), doc["text"], kind="note", title="", tags=[])
        by_memory[int(add(store.conn, store.limits, me, p, None)["id"][1:])] = doc["id"]
    spaces = list(dict.fromkeys(space_name(d["conversation"]) for d in docs))
    everyone = Readable(everything=True)
    rows: list[tuple[Any, ...]] = []
    for embedder in embedders:
        try:
            runtime = embedder.attach(store) if embedder is not None else None
            if embedder is not None:  # every question's vector too (e5 reads them from the cache)
                embedder.provider.embed([q["query"] for q in queries] + unrelated, query=True, timeout=3600)
        except KeyError:  # e5 without a cache of the split: skipped, said below the table
            print(f"{name}: e5 vectors not cached; run bench_hybrid.py --sets {name} first", file=sys.stderr)
            continue
        floor = embedder.floor if embedder is not None else 0.0
        label = embedder.name if embedder is not None else "off"
        for rule, rule_name in [r for r in RULES if r[0] in rules]:
            t = time.perf_counter()
            gold = false = trials = noise = 0
            for q in queries:
                own = space_name(q["conversation"])
                flt = Filter(readable=everyone, spaces=(own,), hide_states=HIDDEN_STATES)
                got = recall(store, runtime, floor, q["query"], flt, rule)
                gold += any(by_memory[m] in q["gold_ids"] for m in got)
                at = spaces.index(own)
                for step in range(1, others + 1):
                    other = spaces[(at + step) % len(spaces)]
                    flt = Filter(readable=everyone, spaces=(other,), hide_states=HIDDEN_STATES)
                    false += bool(recall(store, runtime, floor, q["query"], flt, rule))
                    trials += 1
            for space in spaces:
                flt = Filter(readable=everyone, spaces=(space,), hide_states=HIDDEN_STATES)
                noise += sum(bool(recall(store, runtime, floor, p, flt, rule)) for p in unrelated)
            rows.append((name, rule_name, label, len(queries), gold / len(queries), trials, false / trials,
                         noise / (len(unrelated) * len(spaces)), round(time.perf_counter() - t)))  # fmt: skip
            print(f"{name} {rule_name} {label}: done", file=sys.stderr, flush=True)
    store.close()
    return rows


class CachedOnly:
    """bench_hybrid.py's e5 cache, read only: a text not in it raises KeyError (unless --embed)."""

    def __init__(self, embed: bool) -> None:
        from bench_hybrid import Cached
        from hivemem.embeddings.local import E5, LocalProvider

        self.cached = Cached(LocalProvider(Settings(provider="local", model=E5)), bl.OUT / "hybrid-e5-recall.npz")
        self.model, self.embed_missing = self.cached.model, embed

    def embed(self, texts: list[str], *, query: bool, timeout: float) -> list[list[float]]:
        if not self.embed_missing:
            return [self.cached.vectors[self.cached.key(t, query)] for t in texts]
        out = self.cached.embed(list(texts), query=query, timeout=timeout)
        return out


@contextmanager
def embedders(names: list[str], embed: bool) -> Iterator[tuple[list[Embedder | None], list[Embedder | None]]]:
    """The embedders for the repository part and for LoCoMo (e5 there only from the cache unless `embed`)."""
    with running(width=64) as stub:
        repo: list[Embedder | None] = []
        large: list[Embedder | None] = []
        for name in names:
            if name == "off":
                repo.append(None)
                large.append(None)
            elif name == "stub":
                from hivemem.embeddings.http import HttpProvider

                provider = HttpProvider(Settings(provider="http", base_url=stub.base_url, model="stub-a"))
                repo.append(Embedder("stub", provider, STUB_FLOOR, "http"))
                large.append(repo[-1])
            elif name == "e5":
                from hivemem.embeddings.local import E5, defaults

                floor = defaults(E5)["recall.min_similarity"]
                repo.append(Embedder("e5", CachedOnly(True), floor, "local"))
                large.append(Embedder("e5", CachedOnly(embed), floor, "local"))
        yield repo, large
        for e in repo:
            if e is not None and isinstance(e.provider, CachedOnly):
                e.provider.cached.save()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embeddings", default="off,stub,e5", help="off, stub and/or e5 (default all three)")
    parser.add_argument("--sets", default="turns,observations", help="LoCoMo splits ('' for none)")
    parser.add_argument("--others", type=int, default=3, help="other conversations each question is recalled in")
    parser.add_argument("--rules", default="near,evidence", help="rules measured on LoCoMo (default D126's and D282)")
    parser.add_argument("--repository", action=argparse.BooleanOptionalAction, default=True,
                        help="measure the repository set (default yes)")  # fmt: skip
    parser.add_argument("--embed", action="store_true", help="embed LoCoMo with e5 when not cached (slow)")
    parser.add_argument("--verbose", action="store_true", help="list the repository part's misses and injections")
    args = parser.parse_args()
    bl.print_machine("Recall on natural questions and unrelated prompts (docs/decisions.md D282)")
    from bench_hybrid import UNRELATED

    names = [n for n in args.embeddings.split(",") if n]
    with tempfile.TemporaryDirectory() as base, embedders(names, args.embed) as (repo_e, large_e):
        data = json.loads(DATA.read_text("utf-8"))
        cjk = sum(bool(CJK_RUN.search(q["q"])) for q in data["questions"])
        rows = repository(base, repo_e, args.verbose) if args.repository else []
        print(
            f"Repository: {len(data['questions'])} questions ({cjk} in Chinese, Japanese or Korean), "
            f"{len(data['unrelated'])} unrelated prompts, {len(data['memories'])} memories"
        )
        bl.table(("rule on words", "embeddings", "recalled", "share", "CJK", "unrelated inject", "share",
                  "p50 ms", "raw FTS5 p50 ms"), rows)  # fmt: skip
        root = bl.locomo_root() if args.sets else None
        if root is not None:
            large: list[tuple[Any, ...]] = []
            for name in args.sets.split(","):
                large += locomo(base, root, name, large_e, args.others, UNRELATED, args.rules.split(","))
            print(f"LoCoMo: every question in its own conversation's space and in {args.others} others; "
                  "100 unrelated prompts in every space")  # fmt: skip
            bl.table(("set", "rule on words", "embeddings", "questions", "gold recalled", "other-conversation "
                      "recalls", "false injection", "unrelated inject", "seconds"), large)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
