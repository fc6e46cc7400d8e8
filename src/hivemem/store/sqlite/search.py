"""The full-text list of docs/embeddings.md: FTS5 quoting, bm25 ranking that scales with the spaces searched, snippets.

Every path ranks exactly as `bm25(memory_fts, 5.0, 1.0, 3.0)` over the quoted terms, then highest rowid
(docs/decisions.md D62):

- **Restricted** (a few small spaces): MATCH itself keeps the spaces (`(terms) AND "<MARK>space"`, see
  store/fts5.py), so the cost follows the spaces, not the store. FTS5's own bm25 would count each term's
  rows in the whole index on every query, and would score the space phrase too, so the rank is
  `hivemem_bm25`: the same arithmetic over the terms only, with the per-term row counts passed in and
  cached per connection until the next committed change.
- **Whole index** (no space filter, spaces that hold every live row, or spaces too large for the above):
  FTS5's bm25 itself, joined to `memories` only when a filter needs a column of it.

Snippets and rows are fetched for the returned page only.
"""

from __future__ import annotations

import heapq
import weakref
from collections import Counter
from itertools import chain, pairwise
from operator import itemgetter

import apsw

from hivemem.records import Hit, MemoryRead
from hivemem.store.connection import Connection, Value
from hivemem.store.filters import Filter
from hivemem.store.sqlite import db
from hivemem.store.sqlite.db import Row, all_rows, harden, one, scalar, snapshot
from hivemem.store.sqlite.filters import condition
from hivemem.store.sqlite.fts5 import HELD, MARK, NEAR, RANK, TOKENIZER, prepare
from hivemem.store.sqlite.memories import COLUMNS, INDEX, item, shape

LIST_MAX = 100
SMALL = 8  # spaces holding at most 1/SMALL of the store are searched inside MATCH
COUNTS_MAX = 20_000  # cached per-term row counts per connection, before the cache starts over
BM25 = "bm25(memory_fts, 5.0, 1.0, 3.0)"
TOKENIZE = (TOKENIZER, "porter", "unicode61", "remove_diacritics", "2")  # memory_fts's tokenizer and its arguments


def match_expression(words: list[str]) -> str:
    """Each term as an FTS5 string, `"` doubled, joined with OR: never query syntax."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def in_spaces(expression: str, spaces: tuple[str, ...]) -> str:
    """The expression restricted to rows of `spaces` by their space tokens."""
    return f"({expression}) AND ({match_expression([MARK + s for s in spaces])})"


def ranked(conn: Connection, words: list[str], flt: Filter, limit: int = LIST_MAX) -> list[int]:
    """Up to `limit` ids of live, active memories the filter admits, best first (docs/embeddings.md)."""
    if not words:
        return []
    expression = match_expression(words)
    spaces = space_set(flt)
    where, args = condition(flt, "m")
    joined = JOINED
    bounds = id_range(conn, flt)
    if bounds is not None:  # a narrow time window: MATCH reads only the doclists' stretch of its ids
        if not bounds:
            return []
        joined, args = BOUNDED, [*bounds, *args]
    if spaces is None:
        if _everything(flt):
            return _ids(conn, WHOLE.format(rank=BM25), (expression, limit))
        return _ids(conn, joined.format(rank=BM25, where=where), (expression, *args, limit))
    alone = _only_spaces(flt, spaces)  # the spaces are the whole filter
    cached = _cached(conn)
    covers, small = _plan(conn, spaces, cached)
    if alone and covers:
        return _ids(conn, WHOLE.format(rank=BM25), (expression, limit))
    if not small:
        return _ids(conn, joined.format(rank=BM25, where=where), (expression, *args, limit))
    counts = document_counts(conn, words, cached)
    rank = f"{RANK}(memory_fts, {', '.join('?' * len(counts))})"
    match = in_spaces(expression, spaces)
    if alone:
        return _ids(conn, WHOLE.format(rank=rank), (*counts, match, limit))
    return _ids(conn, joined.format(rank=rank, where=where), (*counts, match, *args, limit))


NARROW = 4096  # a window holding at most this many live memories bounds the ids MATCH reads


def id_range(conn: Connection, flt: Filter) -> tuple[int, int] | tuple[()] | None:
    """The least and greatest id of the live memories in the filter's time window, when it holds at most
    NARROW of them (`()` when it holds none); None without a window or for a wide one. Read from the window's
    index (schema 3, `memories_updated` / `memories_created`), at most NARROW + 1 entries. FTS5 reads each
    term's doclist only between the two ids; the filter's own condition still decides every row, and bm25
    still counts the whole index, so the order is that of the unbounded search (docs/decisions.md D292)."""
    if not flt.windowed or flt.on not in ("updated", "created"):
        return None
    bounds = ((f"{flt.on} >= ?", flt.since), (f"{flt.on} < ?", flt.until))
    window = " AND ".join(c for c, v in bounds if v is not None)
    args = [v for _, v in bounds if v is not None]
    sql = (f"SELECT count(*), min(id), max(id) FROM (SELECT id FROM memories INDEXED BY memories_{flt.on} "
           f"WHERE deleted IS NULL AND {window} LIMIT ?)")  # fmt: skip
    found = one(conn, sql, (*args, NARROW + 1))
    if found is None or int(found[0]) > NARROW:
        return None
    return (int(found[1]), int(found[2])) if found[0] else ()


BY_HITS = itemgetter(1, 0)  # a (memory, hits) pair's rank: more hits, then the higher id


def sharing(conn: Connection, words: list[str], flt: Filter, limit: int, keep: int = 8,
            cap: int = 200) -> list[int]:  # fmt: skip
    """Up to `limit` ids of live, active memories the filter admits that hold the most of the `keep` rarest
    `words` (rarity: rows matched in the filter's spaces, read no further than `cap` per word), then newest.

    Capture's candidates (docs/governance.md): scoring an OR of a whole text with bm25 reads most of a large space."""
    spaces = space_set(flt)
    confine = bool(spaces) and not _covers_store(conn, spaces or ())
    found: list[tuple[int, int, list[int]]] = []
    for n, word in enumerate(words):
        expression = match_expression([word])
        match = in_spaces(expression, spaces or ()) if confine else expression
        rows = all_rows(conn, "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?", (match, cap + 1))
        ids: list[int] = [row[0] for row in rows]  # rowids are ints already: up to 16 x 201 of them per capture
        if ids:
            found.append((len(ids), n, ids))
    hits = Counter(chain.from_iterable(ids for _, _, ids in sorted(found)[:keep]))
    # Best first: most hits, then highest id. The best `limit` are usually all admitted: only when some are
    # not is the rest sorted and checked, 4 x `limit` at a time.
    best = [m for m, _ in heapq.nlargest(limit, hits.items(), key=BY_HITS)]
    out = _admitted(conn, best, flt)
    if len(out) < limit < len(hits):
        rest = [m for m, _ in sorted(hits.items(), key=BY_HITS, reverse=True)[limit:]]
        for start in range(0, len(rest), 4 * limit):
            out += _admitted(conn, rest[start : start + 4 * limit], flt)
            if len(out) >= limit:
                break
    return out[:limit]


def _admitted(conn: Connection, ids: list[int], flt: Filter) -> list[int]:
    """Those of `ids` the filter admits, in their order."""
    if not ids:
        return []
    where, args = condition(flt, "m")
    sql = f"SELECT m.id FROM memories m WHERE m.id IN ({','.join('?' * len(ids))}) AND {where}"
    admitted = set(_ids(conn, sql, (*ids, *args)))
    return [m for m in ids if m in admitted]


def page_rows(conn: Connection, ids: list[int], flt: Filter) -> dict[int, Row]:
    """The rows of a page of ids that the filter admits: the filter is checked once more on the rows
    themselves, so an index out of step with them (a bug, a hand edit) can never show what it should not."""
    if not ids:
        return {}
    where, args = condition(flt, "m")
    marks = ",".join("?" * len(ids))
    rows = all_rows(conn, f"SELECT {COLUMNS} FROM memories m WHERE m.id IN ({marks}) AND {where}", (*ids, *args))
    return {int(r[0]): r for r in rows}


WHOLE = "SELECT rowid, {rank} AS r FROM memory_fts WHERE memory_fts MATCH ? ORDER BY r, rowid DESC LIMIT ?"
JOINED = """
SELECT m.id, {rank} AS r FROM memory_fts JOIN memories m ON m.id = memory_fts.rowid
WHERE memory_fts MATCH ? AND {where} ORDER BY r, m.id DESC LIMIT ?"""


# A narrow window (id_range): the index's matches between two ids drive the join (CROSS JOIN keeps memory_fts
# the outer loop; the planner would otherwise walk the window's rows and seek the index once per row).
BOUNDED = """
SELECT m.id, {rank} AS r FROM memory_fts CROSS JOIN memories m ON m.id = memory_fts.rowid
WHERE memory_fts MATCH ? AND memory_fts.rowid BETWEEN ? AND ? AND {where} ORDER BY r, m.id DESC LIMIT ?"""


def _ids(conn: Connection, sql: str, args: tuple[Value, ...]) -> list[int]:
    return [int(r[0]) for r in all_rows(conn, sql, args)]


def space_set(flt: Filter) -> tuple[str, ...] | None:
    """The spaces a search is confined to, when the filter names them (or the reader can read only those)."""
    if flt.spaces is not None:
        return tuple(sorted(set(flt.spaces)))
    r = flt.readable
    if not r.everything and not r.prefixes and not r.memories:
        return tuple(sorted(r.spaces))
    return None


def _plain(flt: Filter) -> bool:
    """No filter beyond live, active and space: the index alone answers."""
    return (flt.status == "active" and not flt.include_deleted and not flt.kinds and not flt.tags
            and flt.sessions is None and flt.before is None and not flt.hide_states and not flt.windowed
            and not flt.authors)  # fmt: skip


def _only_spaces(flt: Filter, spaces: tuple[str, ...]) -> bool:
    return _plain(flt) and all(flt.readable.covers(s) for s in spaces)


def _everything(flt: Filter) -> bool:
    return _plain(flt) and flt.readable.everything


def _covers_store(conn: Connection, spaces: tuple[str, ...]) -> bool:
    """Whether every live memory is in `spaces` (a few index seeks: nothing before, between or after them)."""
    if not spaces:
        return False
    gaps: list[tuple[str, tuple[str, ...]]] = [("space < ?", (spaces[0],)), ("space > ?", (spaces[-1],))]
    gaps += [("space > ? AND space < ?", pair) for pair in pairwise(spaces)]
    return not any(one(conn, f"SELECT 1 FROM memories WHERE deleted IS NULL AND {c} LIMIT 1", a) for c, a in gaps)


def _small(conn: Connection, spaces: tuple[str, ...]) -> bool:
    """Whether the spaces hold at most 1/SMALL of the store (counted no further than that)."""
    if not spaces:
        return False
    bound = int(scalar(conn, "SELECT max(id) FROM memories") or 0) // SMALL
    marks = ",".join("?" * len(spaces))
    held = scalar(
        conn,
        f"SELECT count(*) FROM (SELECT 1 FROM memories WHERE space IN ({marks}) AND deleted IS NULL LIMIT ?)",
        (*spaces, bound + 1),
    )
    return int(held) <= bound


class _Cached:
    """What a connection has learnt about the store at one version: per-term row counts and, per set of
    spaces, whether it covers the store and whether it is small (_covers_store, _small)."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.counts: dict[str, int] = {}
        self.plans: dict[tuple[str, ...], tuple[bool, bool]] = {}
        self.path: dict[tuple[Value, ...], int] = {}  # rows of a filter, and of them those holding a term


_CACHED: weakref.WeakKeyDictionary[Connection, _Cached] = weakref.WeakKeyDictionary()


def _cached(conn: Connection) -> _Cached:
    """The connection's cache, started over when the store changed or the cache grew large.

    Every committed change appends an audit event, so the events sequence, read inside the caller's snapshot,
    tells whether what is cached still describes the store (tombstone removal writes none, and touches no
    live row)."""
    version = int(scalar(conn, conn.dialect.last_event) or 0)
    cached = _CACHED.get(conn)
    if (
        cached is None
        or cached.version != version
        or len(cached.counts) + len(cached.plans) + len(cached.path) >= COUNTS_MAX
    ):
        cached = _CACHED[conn] = _Cached(version)
    return cached


def _plan(conn: Connection, spaces: tuple[str, ...], cached: _Cached) -> tuple[bool, bool]:
    """(_covers_store, _small) of the spaces, cached like the term counts (two to four statements saved)."""
    plan = cached.plans.get(spaces)
    if plan is None:
        plan = cached.plans[spaces] = (_covers_store(conn, spaces), _small(conn, spaces))
    return plan


def document_counts(conn: Connection, words: list[str], cached: _Cached | None = None) -> list[int]:
    """How many indexed rows match each term in the whole index (bm25's document frequency).

    Counting reads a term's whole doclist, so counts are kept per connection until the store changes
    (`_cached`). (fts5vocab counts a one-token term only 0-40% faster than this MATCH, measured.)"""
    counts = (cached or _cached(conn)).counts
    for word in words:
        if word not in counts:
            sql = "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?"
            counts[word] = int(scalar(conn, sql, (match_expression([word]),)))
    return [counts[w] for w in words]


_SIDE: weakref.WeakKeyDictionary[Connection, db.Connection] = weakref.WeakKeyDictionary()
WINDOW = 64  # snippet() tokens


def snippets(conn: Connection, words: list[str], texts: dict[int, tuple[str, str, str]]) -> dict[int, str]:
    """`snippet(memory_fts, 1, '', '', '…', 64)` for a page of rows ({id: (title, content, tags)}).

    A content of at most 64 tokens is its own snippet (FTS5 then shows the whole column). Longer ones are
    cut on an in-memory FTS5 table that holds only the page, with the same tokenizer and columns: a snippet
    depends only on its row's text and the query's phrases, so it is the same as the store's, and the
    store's index is not searched again for each row."""
    if not texts or not words:
        return {}
    side = _side(conn)
    tokenize = side.fts5_tokenizer(TOKENIZE[0], list(TOKENIZE[1:]))
    out: dict[int, str] = {}
    long: list[tuple[int, str, str, str]] = []
    for memory, (title, content, tags) in texts.items():
        if token_count(content, tokenize) <= WINDOW:
            out[memory] = content
        else:
            long.append((memory, title, content, tags))
    if long:
        side.execute("BEGIN")
        try:
            side.executemany("INSERT INTO s(rowid, title, content, tags) VALUES (?, ?, ?, ?)", long)
            sql = f"SELECT rowid, snippet(s, 1, '', '', '…', {WINDOW}) FROM s WHERE s MATCH ?"
            out |= {int(r[0]): str(r[1]) for r in all_rows(side, sql, (match_expression(words),))}
        finally:
            side.execute("ROLLBACK")
    return out


# For ASCII text FTS5's unicode61 tokens are exactly the runs of ASCII letters and digits (porter changes a
# token, never the count): letters and digits kept, every other byte a space, then split.
_ASCII_RUNS = bytes(c if chr(c).isalnum() and c < 128 else 32 for c in range(256))


def token_count(content: str, tokenize: apsw.FTS5Tokenizer) -> int:
    """How many tokens the index's tokenizer makes of `content`; ASCII text is counted without calling it."""
    if content.isascii():
        return len(content.encode("ascii").translate(_ASCII_RUNS).split())
    found = tokenize(content.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=False)
    return len(found) if isinstance(found, list) else sum(1 for _ in found)  # APSW returns a list


def _side(conn: Connection) -> db.Connection:
    """The in-memory connection that cuts snippets for `conn` (one per connection, like the thread using it)."""
    side = _SIDE.get(conn)
    if side is None:
        side = _SIDE[conn] = db.Connection(":memory:")
        harden(side)
        prepare(side)
        side.execute(f"CREATE VIRTUAL TABLE s USING fts5(title, content, tags, tokenize = '{' '.join(TOKENIZE)}')")
    return side


def hits(conn: Connection, words: list[str], flt: Filter, limit: int) -> list[Hit]:
    """The best `limit` memories the filter admits, best first, as list items whose snippet is FTS5's."""
    with snapshot(conn):
        ids = ranked(conn, words, flt, min(limit, LIST_MAX))
        return listed(conn, words, ids, set(ids), flt)


def listed(conn: Connection, words: list[str], ids: list[int], marked: set[int],
           flt: Filter) -> list[Hit]:  # fmt: skip
    """The memories `ids` the filter admits, in that order, as list items; those in `marked` get FTS5's
    snippet of the terms, the others the start of their text."""
    rows = page_rows(conn, ids, flt)
    found = [m for m in ids if m in rows]
    texts = {m: (rows[m][INDEX["title"]], rows[m][INDEX["content"]], rows[m][INDEX["tags"]])
             for m in found if m in marked}  # fmt: skip
    cut_ = snippets(conn, words, texts) if texts else {}
    out = []
    for memory in found:
        hit = item(rows[memory])
        hit["snippet"] = cut_.get(memory, hit["snippet"])
        out.append(hit)
    return out


def shaped(conn: Connection, ids: list[int], flt: Filter) -> list[MemoryRead]:
    """The memories `ids` the filter admits, whole, in that order."""
    rows = page_rows(conn, ids, flt)
    return [shape(rows[m]) for m in ids if m in rows]


def matching(conn: Connection, words: list[str], flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
    """The best `limit` memories for the terms, whole, and how many matched (at most LIST_MAX)."""
    if not words:
        return [], 0
    with snapshot(conn):
        ids = ranked(conn, words, flt)
        rows = page_rows(conn, ids[:limit], flt)
    return [shape(rows[m]) for m in ids[:limit] if m in rows], len(ids)


def near(conn: Connection, words: list[str], ids: list[int], window: int) -> set[int]:
    """Those of `ids` that hold two of the terms at most `window` tokens apart in one field (the only term,
    for one term): recall's relevance floor."""
    if not words or not ids:
        return set()
    out: set[int] = set()
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        sql = (f"SELECT rowid, {NEAR}(memory_fts, ?) FROM memory_fts WHERE memory_fts MATCH ? "
               f"AND rowid IN ({','.join('?' * len(part))})")  # fmt: skip
        out.update(int(r[0]) for r in all_rows(conn, sql, (window, match_expression(words), *part)) if r[1])
    return out


def held(conn: Connection, words: list[str], ids: list[int], window: int) -> dict[int, tuple[int, int, int]]:
    """For each of `ids` holding a term: bit masks of the terms it holds, of those at most `window` tokens from
    another held term in one field, and of those in its title or tags (recall's evidence, D282)."""
    if not words or not ids:
        return {}
    out: dict[int, tuple[int, int, int]] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        sql = (f"SELECT rowid, {HELD}(memory_fts, ?) FROM memory_fts WHERE memory_fts MATCH ? "
               f"AND rowid IN ({','.join('?' * len(part))})")  # fmt: skip
        for memory, masks in all_rows(conn, sql, (window, match_expression(words), *part)):
            mask, close, titled = (int(x, 16) for x in str(masks).split())
            if mask:
                out[int(memory)] = (mask, close, titled)
    return out


def counts(conn: Connection, words: list[str], flt: Filter) -> tuple[int, list[int]]:
    """How many memories the filter admits, and how many of them hold each term (recall's document
    frequencies in the read path, D282); kept per connection until the store changes, like bm25's."""
    cached = _cached(conn)
    where, args = condition(flt, "m")
    key: tuple[Value, ...] = (where, *args)
    rows = cached.path.get(key)
    if rows is None:
        rows = cached.path[key] = int(scalar(conn, f"SELECT count(*) FROM memories m WHERE {where}", args) or 0)
    spaces = space_set(flt)
    out: list[int] = []
    for word in words:
        found = cached.path.get((*key, word))
        if found is None:
            expression = match_expression([word])
            match = in_spaces(expression, spaces) if spaces else expression
            sql = (f"SELECT count(*) FROM memory_fts JOIN memories m ON m.id = memory_fts.rowid "
                   f"WHERE memory_fts MATCH ? AND {where}")  # fmt: skip
            found = 0 if spaces == () else int(scalar(conn, sql, (match, *args)) or 0)
            cached.path[(*key, word)] = found
        out.append(found)
    return rows, out


def newest(conn: Connection, flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
    """The `limit` most recently updated memories, whole, and how many the filter matches in all."""
    where, args = condition(flt, "m")
    rows = all_rows(
        conn, f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY m.updated DESC, m.id DESC LIMIT ?",
        (*args, limit),
    )  # fmt: skip
    matched = int(scalar(conn, f"SELECT COUNT(*) FROM memories m WHERE {where}", args) or 0)
    return [shape(r) for r in rows], matched
