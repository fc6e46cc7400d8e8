"""The hygiene report (`memory.hygiene`): findings about readable memories, each with the verb call that fixes it.

Pure analysis of one `Scan` (store/hygiene.py) read from a snapshot; nothing here writes. Thresholds were
measured on a labelled set of LoCoMo fact pairs (bench/bench_hygiene.py, docs/hygiene.md):

- `duplicate`: the same capture key in one space (the text equal after NFKC, case folding and punctuation),
  or, with embeddings on, a cosine similarity of at least VECTOR_DUPLICATE;
- `near_duplicate`: word-set (Jaccard) similarity of at least NEAR, or, with embeddings, a cosine of at least
  VECTOR_NEAR;
- `contradiction_candidate`: two decisions, conventions or preferences of one space and kind on the same topic
  (Jaccard at least TOPICAL) whose content differs; only a candidate, never a verdict;
- `stale`, `unused`, `secret`, `orphan_relation`: from review dates, recall events, the secret detector and
  relations.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, cast

from hivemem import progress, secrets
from hivemem.errors import Failed
from hivemem.search.terms import CJK_RUN, bigrams, pieces, stopwords
from hivemem.store.hygiene import Relation, Row, Scan

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from hivemem.records import HygieneFinding, HygieneReport

KINDS = ("duplicate", "near_duplicate", "contradiction_candidate", "stale", "unused", "secret", "orphan_relation")
CONTESTED = ("decision", "convention", "preference")  # kinds where two different texts on one topic may disagree
NEAR = 0.6  # word-set Jaccard for near_duplicate (measured: docs/hygiene.md)
TOPICAL = 0.3  # word-set Jaccard for two contested memories to share a topic
VECTOR_DUPLICATE = 0.95  # cosine for a duplicate by meaning (multilingual-e5-small, measured)
VECTOR_NEAR = 0.92  # cosine for a near duplicate by meaning
VECTOR_EXACT_MAX = 20000  # spaces up to this size compare every pair of vectors; larger ones only word candidates
POSTING_MAX = 100  # a word shared by more memories than this is too common to propose pairs
PAIRS_PER_MEMORY = 3  # a memory appears in at most this many pair findings, its most similar ones
NEGATIONS = frozenset(("not", "no", "never", "don", "doesn", "isn", "aren", "won", "cannot", "without", "avoid"))
DIGIT = re.compile(r"\d")
WORKER_MIN_ROWS = 5000  # from this many memories the report runs in a worker process (start-up ~0.3 s)
WORKER_NICE = 10  # the worker yields the CPU to the daemon's writer
JOB_ROWS = 1000  # rows pickled to the worker at a time
SECRET_FIELDS = ("content", "title", "tags", "source", "provenance")
SCAN_ROWS = 200  # rows scanned as one text (measured: a third of the time of one scan per row)

CanRead = Callable[[str, int], bool]
Vectors = dict[int, "npt.NDArray[np.float32]"]  # memory id -> unit vector
Fetch = Callable[[list[int]], Vectors]  # the vectors of these memories (those that have one)


def words(key: str) -> frozenset[str]:
    """A capture key's words without English stopwords (all of them when that leaves none); CJK as bigrams."""
    units = key.split()
    if not key.isascii() and CJK_RUN.search(key):
        units = [u for word in units for piece, cjk in pieces(word) for u in (bigrams(piece) if cjk else (piece,))]
    every = frozenset(units)
    return (every - stopwords()) or every


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if a or b else 0.0


def similar_pairs(sets: Sequence[frozenset[str]], threshold: float) -> Iterator[tuple[int, int, float]]:
    """Every pair (i, j, jaccard) with Jaccard at least `threshold`, by prefix filtering (AllPairs, PPJoin):
    with each set's words ordered rarest first and sets taken smallest first, two sets that similar share a word
    among the first |s| - ceil(t|s|) + 1 of the later one and the first |s| - ceil(2t/(1+t)|s|) + 1 of the
    earlier one, so only those words are probed and indexed."""
    df = Counter(w for s in sets for w in s)
    rank = {w: r for r, (w, _) in enumerate(sorted(df.items(), key=lambda item: (item[1], item[0])))}
    coded = [frozenset(rank[w] for w in s) for s in sets]
    index: dict[int, list[int]] = defaultdict(list)
    shared = 2 * threshold / (1 + threshold)
    for i in sorted(range(len(coded)), key=lambda k: len(coded[k])):
        mine = coded[i]
        n = len(mine)
        if n == 0:
            continue
        ordered = sorted(mine)
        seen: set[int] = set()
        smallest = threshold * n
        for w in ordered[: n - math.ceil(threshold * n) + 1]:
            posting = index.get(w)
            if not posting or len(posting) > POSTING_MAX:
                continue
            for j in posting:
                if j in seen:
                    continue
                seen.add(j)
                other = coded[j]
                if len(other) < smallest:
                    continue
                inter = len(mine & other)
                score = inter / (n + len(other) - inter)
                if score >= threshold:
                    yield (j, i, score) if j < i else (i, j, score)
        for w in ordered[: n - math.ceil(shared * n) + 1]:
            index[w].append(i)


def vector_pairs(ids: Sequence[int], vectors: Vectors, threshold: float) -> Iterator[tuple[int, int, float]]:
    """Pairs (i, j, cosine) of positions in `ids` whose unit vectors have cosine at least `threshold`."""
    import numpy as np

    have = [k for k, m in enumerate(ids) if m in vectors]
    if len(have) < 2:
        return
    matrix = np.stack([vectors[ids[k]] for k in have]).astype(np.float32)
    chunk = 512
    for start in range(0, len(have), chunk):
        sims = matrix[start : start + chunk] @ matrix[start:].T
        rows, cols = np.nonzero(sims >= threshold)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            if c > r:
                yield have[start + r], have[start + c], float(sims[r, c])


def _word_scores(kept: list[Row], sets: list[frozenset[str]]) -> dict[tuple[int, int], list[float]]:
    """[jaccard, cosine (-1: none yet)] of the pairs above NEAR, and of contested pairs above TOPICAL."""
    scores: dict[tuple[int, int], list[float]] = {}
    for i, j, score in similar_pairs(sets, NEAR):
        scores[(i, j)] = [score, -1.0]
    for kind in CONTESTED:  # a lower bar between two decisions, conventions or preferences
        same = [k for k, r in enumerate(kept) if r.kind == kind]
        for i, j, score in similar_pairs([sets[k] for k in same], TOPICAL):
            scores[(same[i], same[j])] = [score, -1.0]
    return scores


def _vector_scores(kept: list[Row], sets: list[frozenset[str]], vectors: Vectors,
                   scores: dict[tuple[int, int], list[float]]) -> None:  # fmt: skip
    """Cosines: every pair above VECTOR_NEAR in a space up to VECTOR_EXACT_MAX, else the word candidates'."""
    ids = [r.id for r in kept]
    if len(kept) <= VECTOR_EXACT_MAX:
        for i, j, cos in vector_pairs(ids, vectors, VECTOR_NEAR):
            scores.setdefault((i, j), [jaccard(sets[i], sets[j]), -1.0])[1] = cos
        return
    for (i, j), pair in scores.items():
        a, b = vectors.get(ids[i]), vectors.get(ids[j])
        if a is not None and b is not None:
            pair[1] = float(a @ b)


def _keep_first(row: Row) -> tuple[bool, float, str, int]:
    """The better of duplicates: user-confirmed, then more confident, then newer."""
    return (row.confidence_state == "user_confirmed", row.confidence, row.updated, row.id)


def _cli(verb: str, params: Mapping[str, object]) -> str:
    parts = ["hivemem", *verb.split(".")]
    for name, value in params.items():
        text = str(value)
        parts += [f"--{name.replace('_', '-')}", f"'{text}'" if " " in text else text]
    return " ".join(parts)


def fix_text(verb: str, params: Mapping[str, object]) -> str:
    """A finding's `fix`: the CLI command that makes its verb call (a purge needs the owner key)."""
    return ("HIVEMEM_TOKEN=@owner " if verb == "memory.purge" else "") + _cli(verb, params)


def _finding(kind: str, rows: Sequence[Row], reason: str, verb: str, params: Mapping[str, object],
             similarity: float | None = None) -> HygieneFinding:  # fmt: skip
    out: HygieneFinding = {
        "kind": kind,
        "memories": [f"m{r.id}" for r in rows],
        "space": rows[0].space,
        "reason": reason,
        "fix": fix_text(verb, params),
        "action": {"verb": verb, "params": dict(params)},
    }
    if similarity is not None:
        out["similarity"] = round(similarity, 4)
    return out


def _supersede(old: Row, keep: Row, why: str) -> dict[str, object]:
    return {"id": f"m{old.id}", "revision": old.revision, "outcome": "superseded", "replacement": f"m{keep.id}",
            "reason": why}  # fmt: skip


def _negated(key: str) -> bool:
    return not NEGATIONS.isdisjoint(key.split())


def _changed(a: Row, b: Row, wa: frozenset[str], wb: frozenset[str]) -> str:
    """What sets two otherwise similar texts apart, when it changes their meaning: a number or version (`3.9` and
    `3.11`), or a negation (`use tabs`, `never use tabs`); "" when neither (docs/hygiene.md)."""
    if any(DIGIT.search(w) for w in wa ^ wb):
        return "a number or version"
    if _negated(a.capture_key) != _negated(b.capture_key):
        return "a negation"
    return ""


class Report:
    """Builds the findings of one scan; `run` returns the memory.hygiene result."""

    def __init__(self, scan: Scan, can_read: CanRead, vectors: Vectors | None, now: datetime, unused_days: int,
                 embeddings: str) -> None:  # fmt: skip
        self.scan, self.can_read, self.vectors, self.now = scan, can_read, vectors, now
        self.unused_days, self.embeddings = unused_days, embeddings
        self.found: list[HygieneFinding] = []

    def run(self, limit: int) -> HygieneReport:
        active = [r for r in self.scan.rows if r.status == "active"]
        by_space: dict[str, list[Row]] = defaultdict(list)
        for row in active:
            by_space[row.space].append(row)
        done = 0
        for space in sorted(by_space):
            progress.report("comparing", done, len(active))
            self._pairs(by_space[space])
            done += len(by_space[space])
        progress.report("comparing", done, len(active))
        self._stale(active)
        self._unused(active)
        self._secrets(self.scan.rows)
        self._orphans()
        order = {k: i for i, k in enumerate(KINDS)}
        self.found.sort(key=lambda f: (order[f["kind"]], f["space"], [int(m[1:]) for m in f["memories"]]))
        counts = dict.fromkeys(KINDS, 0)
        for f in self.found:
            counts[f["kind"]] += 1
        return {
            "findings": self.found[:limit],
            "counts": counts,
            "memories": len(self.scan.rows),
            "embeddings": self.embeddings,
            "usage_recorded": self.scan.usage_recorded,
            "truncated": len(self.found) > limit,
        }

    def _pairs(self, rows: list[Row]) -> None:
        """Duplicates by capture key, then pairs of the remaining (one per key) by words and vectors."""
        groups: dict[str, list[Row]] = defaultdict(list)
        for row in rows:
            groups[row.capture_key].append(row)
        kept: list[Row] = []
        for group in groups.values():
            keep = max(group, key=_keep_first)
            kept.append(keep)
            for old in sorted((r for r in group if r is not keep), key=lambda r: r.id):
                why = f"same text as m{keep.id} once case, width and punctuation are ignored (same capture key)"
                self.found.append(_finding("duplicate", (old, keep), why, "memory.challenge",
                                           _supersede(old, keep, f"duplicate of m{keep.id}")))  # fmt: skip
        if len(kept) > 1:
            self._similar(sorted(kept, key=lambda r: r.id))

    def _similar(self, kept: list[Row]) -> None:
        """Pairs of different texts of one space, by words and (with embeddings) vectors, most similar first."""
        related = self._related()
        sets = [words(r.capture_key) for r in kept]
        scores = _word_scores(kept, sets)
        if self.vectors is not None:
            _vector_scores(kept, sets, self.vectors, scores)
        used: Counter[int] = Counter()
        for (i, j), (score, cos) in sorted(scores.items(), key=lambda item: (-max(item[1]), item[0])):
            a, b = kept[i], kept[j]
            if frozenset((a.id, b.id)) in related or used[i] >= PAIRS_PER_MEMORY or used[j] >= PAIRS_PER_MEMORY:
                continue
            if self._pair(a, b, sets[i], sets[j], score, cos):
                used[i] += 1
                used[j] += 1

    def _pair(self, a: Row, b: Row, wa: frozenset[str], wb: frozenset[str], score: float, cos: float) -> bool:
        """Add the pair's finding, if any; whether one was added."""
        older, newer = (a, b) if _keep_first(a) < _keep_first(b) else (b, a)
        contested = a.kind == b.kind and a.kind in CONTESTED
        changed = _changed(a, b, wa, wb)
        if changed and (score >= NEAR or cos >= VECTOR_NEAR):  # near the same text, but a number or a "not" apart
            why = (f"the same statement as m{newer.id} but for {changed} (word similarity {score:.2f}): not a "
                   "duplicate; one may contradict the other")  # fmt: skip
            params = {"source": f"m{newer.id}", "target": f"m{older.id}", "relation": "contradicts",
                      "reason": "hygiene: contradiction candidate"}  # fmt: skip
            self.found.append(_finding("contradiction_candidate", (older, newer), why, "memory.relate", params,
                                       max(score, cos)))  # fmt: skip
            return True
        if cos >= VECTOR_DUPLICATE:
            why = f"same meaning as m{newer.id}: vector similarity {cos:.3f} >= {VECTOR_DUPLICATE}"
            self.found.append(_finding("duplicate", (older, newer), why, "memory.challenge",
                                       _supersede(older, newer, f"duplicate of m{newer.id}"), cos))  # fmt: skip
            return True
        differ = (wa ^ wb) and (
            any(DIGIT.search(w) for w in wa ^ wb) or _negated(a.capture_key) != _negated(b.capture_key)
        )
        if contested and score >= TOPICAL and (differ or (score < NEAR and cos < VECTOR_NEAR)):
            shared = ", ".join(sorted(wa & wb)[:6])[:80]
            why = (f"both {a.kind}s in {a.space} on the same topic (shared words: {shared}; word similarity "
                   f"{score:.2f}) but with different content: one may contradict the other")  # fmt: skip
            params = {"source": f"m{newer.id}", "target": f"m{older.id}", "relation": "contradicts",
                      "reason": "hygiene: contradiction candidate"}  # fmt: skip
            self.found.append(_finding("contradiction_candidate", (older, newer), why, "memory.relate", params, score))
            return True
        if score >= NEAR or cos >= VECTOR_NEAR:
            measure = f"word similarity {score:.2f}" + (f", vector similarity {cos:.3f}" if cos >= 0 else "")
            why = (
                f"nearly the same as m{newer.id} ({measure}): relate them, or merge by confirming one and "
                "superseding the other"
            )
            params = {"source": f"m{newer.id}", "target": f"m{older.id}", "relation": "duplicates",
                      "reason": "hygiene: near duplicate"}  # fmt: skip
            self.found.append(_finding("near_duplicate", (older, newer), why, "memory.relate", params,
                                       max(score, cos)))  # fmt: skip
            return True
        return False

    def _related(self) -> set[frozenset[int]]:
        return {frozenset((r.source.id, r.target.id)) for r in self.scan.relations}

    def _stale(self, rows: list[Row]) -> None:
        at = _stamp(self.now)
        for row in rows:
            if row.expires_at and row.expires_at <= at:
                why = f"expired at {row.expires_at}"
            elif row.review_after and row.review_after <= at:
                why = f"due for review since {row.review_after}"
            elif row.confidence_state == "needs_review":
                why = "flagged needs_review"
            else:
                continue
            params = {"id": f"m{row.id}", "revision": row.revision, "outcome": "stale",
                      "reason": f"hygiene: {why}"}  # fmt: skip
            self.found.append(_finding("stale", (row,), why + " (if it still holds: --outcome still_valid)",
                                       "memory.challenge", params))  # fmt: skip

    def _unused(self, rows: list[Row]) -> None:
        """Only when some search recorded usage: with recording off, "never recalled" would say nothing."""
        if not self.scan.usage_recorded:
            return
        cutoff = _stamp(self.now - timedelta(days=self.unused_days))
        for row in rows:
            last = self.scan.recalled.get(row.id)
            if row.created < cutoff and (last is None or last < cutoff):
                when = f"last recalled {last}" if last else "never recalled"
                why = f"{when}; not recalled or searched with usage recorded in {self.unused_days} days"
                params = {"id": f"m{row.id}", "revision": row.revision}
                self.found.append(_finding("unused", (row,), why, "memory.archive", params))

    def _secrets(self, rows: list[Row]) -> None:
        """Rows are scanned SCAN_ROWS at a time as one text, one line or more per field (the detector works
        line by line), and a chunk with a hit row by row: a clean chunk, the usual case, costs one scan."""
        for start in range(0, len(rows), SCAN_ROWS):
            progress.every("scanning for secrets", start, len(rows))
            chunk = rows[start : start + SCAN_ROWS]
            text = "\n".join(v for row in chunk for name in SECRET_FIELDS if (v := getattr(row, name)))
            if not text or secrets.find(text) is None:
                continue
            for row in chunk:
                hit = _secret(row)
                if hit is not None:
                    name, kind = hit
                    why = f"its {name} holds text the secret detector refuses today ({kind}); purge erases every copy"
                    self.found.append(_finding("secret", (row,), why, "memory.purge", {"id": f"m{row.id}"}))
        progress.report("scanning for secrets", len(rows), len(rows))

    def _orphans(self) -> None:
        """A relation from a live memory the caller reads to one that is gone or deleted (and that the caller may
        read: an unreadable end is never mentioned)."""
        live = {r.id: r for r in self.scan.rows}
        for rel in self.scan.relations:
            for here, there in ((rel.source, rel.target), (rel.target, rel.source)):
                row = live.get(here.id)
                if row is None or not here.live or there.live:
                    continue
                if there.space is not None and not self.can_read(there.space, there.id):
                    continue
                state = "purged" if there.space is None else "deleted"
                why = f"{rel.relation} relation between m{rel.source.id} and m{rel.target.id}; m{there.id} is {state}"
                params = {"source": f"m{rel.source.id}", "target": f"m{rel.target.id}", "relation": rel.relation}
                self.found.append(_finding("orphan_relation", (row,), why, "memory.unrelate", params))


def _secret(row: Row) -> tuple[str, str] | None:
    """(field, kind) of the first field of a row holding a secret."""
    for name in SECRET_FIELDS:
        value = getattr(row, name)
        kind = secrets.find(value) if value else None
        if kind is not None:
            return name, kind
    return None


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def report(scan: Scan, can_read: CanRead, fetch: Fetch | None, *, unused_days: int, limit: int,
           embeddings: str, now: datetime | None = None,
           read: Callable[[], None] = lambda: None) -> HygieneReport:  # fmt: skip
    """The memory.hygiene result for one scan: in this process for a small scan, else in a worker process at
    low CPU priority, so that the daemon's writer never waits on this thread for the interpreter lock or for
    a core (docs/decisions.md D173).

    The memories of a large scan are handed to the worker a page at a time as `scan.pages` yields them, each
    with its vectors from `fetch` (None: embeddings are off), and not kept here: at 100k memories of 384-wide
    vectors, holding them all would cost the daemon about 116 MB of rows and 154 MB of blobs (D221, D223).
    `read` is called once the last page is read (the caller's snapshot can end)."""
    moment = now or datetime.now(UTC)
    pages = iter(scan.pages)
    for page in pages:  # enough to know which way the report goes
        scan.rows.extend(page)
        if len(scan.rows) >= WORKER_MIN_ROWS:
            break
    if len(scan.rows) < WORKER_MIN_ROWS:
        vectors = None if fetch is None else _vectors(fetch, scan.rows)
        read()
        return Report(scan, can_read, vectors, moment, unused_days, embeddings).run(limit)
    return _in_worker(scan, pages, can_read, fetch, (moment, unused_days, embeddings, limit), read)


def _vectors(fetch: Fetch, rows: Sequence[Row]) -> Vectors:
    out: Vectors = {}
    for start in range(0, len(rows), JOB_ROWS):
        out.update(fetch([r.id for r in rows[start : start + JOB_ROWS]]))
    return out


def _in_worker(scan: Scan, pages: Iterator[list[Row]], can_read: CanRead, fetch: Fetch | None,
               job: tuple[datetime, int, str, int], read: Callable[[], None]) -> HygieneReport:  # fmt: skip
    ends = {e.id for r in scan.relations for e in (r.source, r.target) if e.space and can_read(e.space, e.id)}
    rest = Scan(relations=scan.relations, recalled=scan.recalled, usage_recorded=scan.usage_recorded)
    moment, unused_days, embeddings, limit = job
    with subprocess.Popen([sys.executable, "-m", "hivemem.search.hygiene"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:  # fmt: skip
        assert proc.stdin is not None and proc.stderr is not None
        try:
            pickle.dump((rest, ends, fetch is not None, moment, unused_days, embeddings, limit), proc.stdin)
            head, scan.rows = scan.rows, []
            _send_rows(proc.stdin, head, fetch)
            del head  # each page is freed once it is sent
            for page in pages:
                _send_rows(proc.stdin, page, fetch)
        except BrokenPipeError:
            pass  # the worker died: its exit code and stderr below say why
        finally:
            read()
        result = _heard(proc)
        err = proc.stderr.read()  # its output was read to the end; this waits for it to exit
    if proc.returncode != 0 or result is None:
        raise Failed("store", "the hygiene worker failed: " + err.decode("utf-8", "replace")[-500:])
    return result


def _heard(proc: subprocess.Popen[bytes]) -> HygieneReport | None:
    """What the worker says on its output: progress reports, passed on to whoever listens here, then the
    result (None if it ended without one)."""
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(BrokenPipeError):  # a worker that died early: its exit code says so
        proc.stdin.close()  # the end of the job
    while True:
        try:
            said = pickle.load(proc.stdout)
        except (EOFError, pickle.UnpicklingError):
            return None
        if said[0] == "progress":
            progress.report(*said[1:])
        else:
            return cast("HygieneReport", said[1])  # the worker's Report.run


def _send_rows(pipe: IO[bytes], rows: list[Row], fetch: Fetch | None) -> None:
    """Rows JOB_ROWS at a time, each piece with its vectors: pickling the whole scan at once is one long call
    that holds the interpreter lock (a few hundred milliseconds at 100k memories), and the daemon's writer
    would wait on it; pieces of JOB_ROWS let the writer in between (D192)."""
    for start in range(0, len(rows), JOB_ROWS):
        piece = rows[start : start + JOB_ROWS]
        pickle.dump((piece, None if fetch is None else fetch([r.id for r in piece])), pipe)


def _worker() -> None:
    """`python -m hivemem.search.hygiene`: a pickled job on stdin (from `report`): its header, then pieces of
    rows until the end of input; the result on stdout."""
    os.nice(WORKER_NICE)
    with open(0, "rb", closefd=False) as job:
        scan, ends, embedded, moment, unused_days, embeddings, limit = pickle.load(job)
        vectors: Vectors | None = {} if embedded else None
        while True:
            try:
                rows, part = pickle.load(job)
            except EOFError:
                break
            scan.rows.extend(rows)
            if vectors is not None:
                vectors.update(part)
    with open(1, "wb", closefd=False) as pipe:  # the parent's pipe, not a terminal: nothing is printed

        def say(stage: str, done: int, total: int) -> None:
            pickle.dump(("progress", stage, done, total), pipe)
            pipe.flush()

        report = Report(scan, lambda space, memory: memory in ends, vectors, moment, unused_days, embeddings)
        with progress.listening(say):
            out = report.run(limit)
        pickle.dump(("result", out), pipe)


if __name__ == "__main__":
    _worker()

__all__ = ["KINDS", "Relation", "report", "similar_pairs", "words"]
