"""The full-text list of docs/embeddings.md on PostgreSQL text search, with hivemem's own tokens.

Documents and queries are cut by the very tokenizer the SQLite index uses (store/sqlite/fts5.py: porter,
unicode61 with diacritics removed, CJK runs as overlapping bigrams), run in-process on an in-memory SQLite
connection, so both backends see the same terms. Each live, active memory keeps its terms in
`memories.search`, a tsvector written as a parameter: title at weight A, tags B, content D, positions kept,
and a gap of two positions between columns. A term of several tokens (a CJK run's bigrams, `don't`) is a
phrase (`<->`), so a CJK run matches as a contiguous substring as on SQLite. Ranking is `ts_rank` with
weights in the ratio 5:3:1 (title:tags:content) normalized by document length, times each term's bm25 idf
(counted among the searched spaces' rows when the search is confined to spaces), then newest id first: not
bm25, so the order may differ from SQLite's (docs/decisions.md D153, D203).
"""

from __future__ import annotations

import math
import re
import threading
import time
import weakref
from collections.abc import Sequence
from itertools import pairwise

import apsw

from hivemem.records import Hit, MemoryRead
from hivemem.store.connection import Args, Row, Value
from hivemem.store.filters import Filter
from hivemem.store.postgres import conn as conn_module
from hivemem.store.postgres.conn import SPECIALS, Connection
from hivemem.store.sqlite import search as sqlite_search
from hivemem.store.sqlite.db import harden, snapshot
from hivemem.store.sqlite.filters import condition
from hivemem.store.sqlite.fts5 import MARK, prepare
from hivemem.store.sqlite.memories import COLUMNS, INDEX, item, shape

LIST_MAX = sqlite_search.LIST_MAX
PAGE_COLUMNS = ", ".join(f"m.{c}" for c in COLUMNS.split(", "))
WEIGHTS = "{0.2, 0, 0.6, 1.0}"  # D, C, B, A: content 1, tags 3, title 5
MAX_POSITION = 16383
MAX_LEXEME = 2046

_lock = threading.Lock()
_side: apsw.Connection | None = None
_split_words: apsw.FTS5Tokenizer | None = None


def tokens(text: str, *, query: bool) -> list[str]:
    """The terms hivemem's FTS5 tokenizer makes of `text` (a document column, or one query term)."""
    global _side, _split_words
    if not text:
        return []
    with _lock:
        if _split_words is None:
            _side = apsw.Connection(":memory:")
            harden(_side)
            prepare(_side)
            _split_words = _side.fts5_tokenizer("hivemem", ["porter", "unicode61", "remove_diacritics", "2"])
        flags = apsw.FTS5_TOKENIZE_QUERY if query else apsw.FTS5_TOKENIZE_DOCUMENT
        found = _split_words(text.encode("utf-8"), flags, None, include_offsets=False, include_colocated=False)
    return [t for t in found if isinstance(t, str) and t and len(t.encode("utf-8")) <= MAX_LEXEME]


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def document(title: str, content: str, tags: str) -> str:
    """The tsvector text of one memory: every token with its positions and its column's weight."""
    positions: dict[str, list[str]] = {}
    at = 0
    for text, weight in ((title, "A"), (content, "D"), (tags, "B")):
        for token in tokens(text, query=False):
            at = min(at + 1, MAX_POSITION)
            positions.setdefault(token, []).append(f"{at}{weight}")
        at = min(at + 2, MAX_POSITION)
    return " ".join(f"{_quote(t)}:{','.join(p[:256])}" for t, p in positions.items())


def query(words: Sequence[str]) -> str | None:
    """The tsquery text of a list of terms: OR of each term, a term of several tokens as a phrase."""
    parts = []
    for word in words:
        found = tokens(word, query=True)
        if found:
            parts.append("(" + " <-> ".join(_quote(t) for t in found) + ")")
    return " | ".join(parts) if parts else None


def index(conn: Connection, memory: int) -> None:
    """Write the memory's terms if it is live and active (after its row is written)."""
    row = conn.run("SELECT title, content, tags FROM memories WHERE id = %s AND deleted IS NULL "
                   "AND status = 'active'", (memory,))  # fmt: skip
    if row:
        conn.run("UPDATE memories SET search = %s::tsvector WHERE id = %s", (document(*row[0]), memory))


def unindex(conn: Connection, memory: int) -> None:
    conn.run("UPDATE memories SET search = NULL WHERE id = %s AND search IS NOT NULL", (memory,))


def _number(value: Value) -> int:
    """An id or a count the portable statement bound (an int)."""
    if not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _add(conn: Connection, args: Args) -> list[Row]:
    memory, inserted = _number(args[0]), conn.indexed
    conn.indexed = None
    if memory != inserted:  # not the row the statement before inserted with its terms (D211)
        index(conn, memory)
    return []


def _remove(conn: Connection, args: Args) -> list[Row]:
    unindex(conn, _number(args[0]))
    return []


def _add_range(conn: Connection, args: Args) -> list[Row]:
    for (memory,) in conn.run(
        "SELECT id FROM memories WHERE id BETWEEN %s AND %s", (_number(args[0]), _number(args[1]))
    ):
        index(conn, int(memory))
    return []


def _live_duplicate(conn: Connection, args: Args) -> list[Row]:
    found = conn.run("SELECT id FROM memories WHERE space = %s AND content_sha256 = %s AND deleted IS NULL",
                     (args[0], args[1]))  # fmt: skip
    return [(args[0], args[1], found[0][0] if found else None)]


TERM = re.compile(r'"((?:[^"]|"")*)"')


def _match_limit(conn: Connection, args: Args) -> list[Row]:
    """Capture's candidate lookup (`search.sharing`): an FTS5 expression of quoted terms, some of them space
    tokens, answered by the same terms in PostgreSQL."""
    quoted = [t.replace('""', '"') for t in TERM.findall(str(args[0]))]
    spaces = [t[1:] for t in quoted if t.startswith(MARK)]
    q = query([t for t in quoted if not t.startswith(MARK)])
    if q is None:
        return []
    if spaces:
        sql = "SELECT id FROM memories WHERE search @@ %s::tsquery AND space = ANY(%s) LIMIT %s"
        return conn.run(sql, (q, spaces, _number(args[1])))
    return conn.run("SELECT id FROM memories WHERE search @@ %s::tsquery LIMIT %s", (q, _number(args[1])))


conn_module.DOCUMENT = document
SPECIALS.update({
    "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
    "FROM memory_fts_source WHERE id = ?": _add,
    "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
    "FROM memory_fts_source WHERE id = ?": _remove,
    "INSERT INTO memory_fts(memory_fts, rowid, title, content, tags) SELECT 'delete', id, title, content, tags "
    "FROM memories WHERE id = ? AND deleted IS NULL AND status = 'active'": _remove,
    "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? LIMIT ?": _match_limit,
    "INSERT INTO memory_fts(rowid, title, content, tags) SELECT id, title, content, tags "
    "FROM memory_fts_source WHERE id BETWEEN ? AND ?": _add_range,
    "SELECT ?1, ?2, (SELECT id FROM memories WHERE space = ?1 AND content_sha256 = ?2 AND deleted IS NULL)":
        _live_duplicate,
})  # fmt: skip


_COUNTS: weakref.WeakKeyDictionary[Connection, tuple[float, int, dict[str, int]]] = weakref.WeakKeyDictionary()
COUNTS_MAX = 4096
COUNTS_TTL = 10.0  # seconds a connection's document counts are reused


def document_counts(conn: Connection, terms: list[str]) -> tuple[int, list[int]]:
    """How many indexed rows there are, and how many match each term (bm25's document frequencies), kept per
    connection for COUNTS_TTL seconds: an estimate for ranking, which a search's own usage events must not
    invalidate at every call. Each term is counted through the GIN index."""
    cached = _COUNTS.get(conn)
    now = time.monotonic()
    if cached is None or now - cached[0] > COUNTS_TTL or len(cached[2]) >= COUNTS_MAX:
        total = int(conn.run("SELECT count(*) FROM memories WHERE search IS NOT NULL")[0][0])
        cached = (now, total, {})
        _COUNTS[conn] = cached
    known = cached[2]
    for term in terms:
        if term not in known:
            known[term] = int(conn.run("SELECT count(*) FROM memories WHERE search @@ %s::tsquery", (term,))[0][0])
    return cached[1], [known[t] for t in terms]


def ranked(conn: Connection, words: list[str], flt: Filter, limit: int = LIST_MAX) -> list[int]:
    """Up to `limit` ids of live, active memories the filter admits, best first (docs/embeddings.md)."""
    statement = _ranking(conn, words, flt, limit)
    if statement is None:
        return []
    sql, args = statement
    rows = conn.execute(sql, args).fetchall()
    _remember_total(conn, sqlite_search.space_set(flt), rows)
    return [int(r[0]) for r in rows]


def _ranking(conn: Connection, words: list[str], flt: Filter, limit: int) -> tuple[str, list[Value]] | None:
    """The statement ranking the filter's live, active memories for the words, as `(id, score, N)` rows best
    first, and its arguments; None when nothing can match. Each term's `ts_rank` (title 5, tags 3, content 1,
    length-normalized) times its bm25 inverse document frequency, summed, so a rare term counts for more than
    one every memory holds; ties newest first.

    A search confined to spaces is one statement (docs/decisions.md D203): each term's document frequency is
    counted inside it among the matching rows the filter admits, and N is the spaces' live rows, counted by
    the same statement (an index-only count) and then reused by the connection for COUNTS_TTL seconds
    (space_total). A search of the whole store counts over the whole index, kept per connection
    (document_counts)."""
    terms = [q for q in (query([w]) for w in words) if q is not None]
    spaces = sqlite_search.space_set(flt)
    if not terms or spaces == ():
        return None
    where, args = condition(flt, "m")
    rank = [f"ts_rank('{WEIGHTS}'::real[], h.search, ?::tsquery, 1)" for _ in terms]
    hit = f"SELECT m.id, m.search FROM memories m WHERE m.search @@ ?::tsquery AND {where}"
    if spaces is None:
        total, counts = document_counts(conn, terms)
        idf = [max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6) for n in counts]
        score = " + ".join(f"?::float8 * {r}" for r in rank)
        scored = [v for pair in zip(idf, terms, strict=True) for v in pair]
        sql = f"SELECT h.id, {score} AS s, ?::bigint AS total FROM ({hit}) h ORDER BY s DESC, h.id DESC LIMIT ?"
        return sql, [*scored, total, " | ".join(terms), *args, limit]
    marks = ",".join("?" * len(spaces))
    known = space_total(conn, spaces)
    live = f"(SELECT count(*) FROM memories d WHERE d.space IN ({marks}) AND d.deleted IS NULL)"
    counted, n_args = ([f"{live} AS total"], [*spaces]) if known is None else (["?::bigint AS total"], [known])
    counted += [f"count(*) FILTER (WHERE search @@ ?::tsquery) AS n{i}" for i in range(len(terms))]
    score = " + ".join(f"greatest(ln((greatest(df.total - df.n{i}, 0) + 0.5)::float8 / (df.n{i} + 0.5)), 1e-6) * {r}"
                       for i, r in enumerate(rank))  # fmt: skip
    sql = (f"WITH hit AS MATERIALIZED ({hit}), df AS MATERIALIZED (SELECT {', '.join(counted)} FROM hit) "
           f"SELECT h.id, {score} AS s, df.total FROM hit h, df ORDER BY s DESC, h.id DESC LIMIT ?")  # fmt: skip
    return sql, [" | ".join(terms), *args, *n_args, *terms, *terms, limit]


_TOTALS: weakref.WeakKeyDictionary[Connection, dict[tuple[str, ...], tuple[float, int]]] = weakref.WeakKeyDictionary()


def space_total(conn: Connection, spaces: tuple[str, ...]) -> int | None:
    """The live rows of `spaces` a ranking statement of this connection counted within COUNTS_TTL seconds, if
    any (bm25's N: an estimate, like the whole store's counts); None when the statement must count them."""
    found = _TOTALS.get(conn, {}).get(spaces)
    return found[1] if found is not None and time.monotonic() - found[0] <= COUNTS_TTL else None


def _remember_total(conn: Connection, spaces: tuple[str, ...] | None, rows: Sequence[Row]) -> None:
    if spaces and rows and space_total(conn, spaces) is None:
        known = _TOTALS.setdefault(conn, {})
        if len(known) >= COUNTS_MAX:
            known.clear()
        known[spaces] = (time.monotonic(), int(rows[0][-1]))


def hits(conn: Connection, words: list[str], flt: Filter, limit: int) -> list[Hit]:
    """The best `limit` memories the filter admits, best first, as list items with FTS5's snippet: one
    statement ranks them and reads their rows, so it needs no snapshot around it."""
    statement = _ranking(conn, words, flt, min(limit, LIST_MAX))
    if statement is None:
        return []
    sql, args = statement
    page = (f"SELECT {PAGE_COLUMNS}, top.total FROM ({sql}) top JOIN memories m ON m.id = top.id "
            "ORDER BY top.s DESC, top.id DESC")  # fmt: skip
    found = conn.execute(page, args).fetchall()
    _remember_total(conn, sqlite_search.space_set(flt), found)
    rows = [r[:-1] for r in found]
    texts = {int(r[0]): (r[INDEX["title"]], r[INDEX["content"]], r[INDEX["tags"]]) for r in rows}
    cut = sqlite_search.snippets(conn, words, texts) if texts else {}
    out = []
    for r in rows:
        hit = item(r)
        hit["snippet"] = cut.get(int(r[0]), hit["snippet"])
        out.append(hit)
    return out


def matching(conn: Connection, words: list[str], flt: Filter, limit: int) -> tuple[list[MemoryRead], int]:
    if not words:
        return [], 0
    with snapshot(conn):
        ids = ranked(conn, words, flt)
        rows = sqlite_search.page_rows(conn, ids[:limit], flt)
    return [shape(rows[m]) for m in ids[:limit] if m in rows], len(ids)


def near(conn: Connection, words: list[str], ids: list[int], window: int) -> set[int]:
    """Recall's rule on words (docs/decisions.md D126), as `hivemem_near` decides it on SQLite: those of `ids`
    holding two different terms at most `window` tokens apart in one column (the term, for one term)."""
    phrases = [p for p in (tokens(w, query=True) for w in words) if p]
    if not phrases or not ids:
        return set()
    rows = conn.run("SELECT id, title, content, tags FROM memories WHERE id = ANY(%s)", (list(ids),))
    out: set[int] = set()
    for memory, *columns in rows:
        found: list[list[tuple[int, int]]] = []
        for text in columns:
            cut = tokens(str(text or ""), query=False)
            found.append(sorted((at, n) for n, p in enumerate(phrases) for at in range(len(cut) - len(p) + 1)
                                if cut[at : at + len(p)] == p))  # fmt: skip
        if len(phrases) == 1:
            held = any(found)
        else:
            held = any(p != q and b - a <= window for f in found for (a, p), (b, q) in pairwise(f))
        if held:
            out.add(int(memory))
    return out


def held(conn: Connection, words: list[str], ids: list[int], window: int) -> dict[int, tuple[int, int, int]]:
    """Recall's evidence (docs/decisions.md D282), as `hivemem_held` finds it on SQLite: for each of `ids`
    holding a term, bit masks of the terms it holds, of those at most `window` tokens from another, and of
    those in its title or tags."""
    phrases = [tokens(w, query=True) for w in words]
    if not any(phrases) or not ids:
        return {}
    rows = conn.run("SELECT id, title, content, tags FROM memories WHERE id = ANY(%s)", (list(ids),))
    out: dict[int, tuple[int, int, int]] = {}
    for memory, *columns in rows:
        mask = close = titled = 0
        for column, text in enumerate(columns):
            cut = tokens(str(text or ""), query=False)
            found = sorted((at, n) for n, p in enumerate(phrases) if p for at in range(len(cut) - len(p) + 1)
                           if cut[at : at + len(p)] == p)  # fmt: skip
            for _, n in found:
                mask |= 1 << n
                titled |= 1 << n if column != 1 else 0
            for (a, p), (b, q) in pairwise(found):
                if p != q and b - a <= window:
                    close |= 1 << p | 1 << q
        if mask:
            out[int(memory)] = (mask, close, titled)
    return out


def counts(conn: Connection, words: list[str], flt: Filter) -> tuple[int, list[int]]:
    """How many memories the filter admits, and how many of them hold each term (recall's evidence)."""
    where, args = condition(flt, "m")
    rows = int(conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", args).fetchall()[0][0])
    out: list[int] = []
    for word in words:
        q = query([word])
        if q is None:
            out.append(0)
            continue
        sql = f"SELECT count(*) FROM memories m WHERE m.search @@ ?::tsquery AND {where}"
        out.append(int(conn.execute(sql, [q, *args]).fetchall()[0][0]))
    return rows, out


__all__ = [
    "COLUMNS",
    "counts",
    "document",
    "held",
    "hits",
    "index",
    "matching",
    "near",
    "query",
    "ranked",
    "tokens",
    "unindex",
]
