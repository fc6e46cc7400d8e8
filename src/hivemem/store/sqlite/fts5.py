"""The FTS5 pieces every connection registers: the `hivemem` tokenizer, the `hivemem_bm25` rank function and
`hivemem_near`, whether a row holds two of a query's phrases close together (recall's relevance floor).

The tokenizer wraps `porter unicode61 remove_diacritics 2` (so every English token is exactly what it was),
cuts Chinese, Japanese and Korean runs into overlapping bigrams (docs/embeddings.md), and adds a space token: a
document tokenized with a locale (the view behind memory_fts passes the memory's space as its locale) gets
`MARK + space` colocated with its first token. A colocated token takes no position, so it changes no
column size and bm25 ranks exactly as without it, yet `... AND "<MARK>space"` makes MATCH itself keep one
space. No text can produce a token starting with MARK: control characters are refused in stored text and
unicode61 drops them, and queries only ever quote word runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import apsw

from hivemem.search.terms import CJK_RUN, bigrams, may_hold_cjk

MARK = "\x01"
TOKENIZER = "hivemem"
RANK = "hivemem_bm25"
NEAR = "hivemem_near"
HELD = "hivemem_held"
WEIGHTS = (5.0, 1.0, 3.0)  # title, content, tags (docs/embeddings.md)
K1, B = 1.2, 0.75  # FTS5's bm25 constants

Tokens = list[Any]


def prepare(conn: apsw.Connection) -> None:
    """Register the tokenizer and the rank function on a connection (each connection needs its own)."""
    conn.register_fts5_tokenizer(TOKENIZER, tokenizer_factory)
    conn.register_fts5_function(RANK, bm25)
    conn.register_fts5_function(NEAR, near)
    conn.register_fts5_function(HELD, held)


def tokenizer_factory(conn: apsw.Connection, args: list[str]) -> Callable[[bytes, int, str | None], Tokens]:
    inner = conn.fts5_tokenizer(args[0], args[1:])
    aux, query, document, mark = apsw.FTS5_TOKENIZE_AUX, apsw.FTS5_TOKENIZE_QUERY, apsw.FTS5_TOKENIZE_DOCUMENT, MARK

    def plain(utf8: bytes, flags: int) -> Tokens:
        if flags & aux:  # highlight and snippet need offsets; indexing and queries do not
            found = inner(utf8, flags, None)
        else:
            found = inner(utf8, flags, None, include_offsets=False, include_colocated=False)
        return found if isinstance(found, list) else list(found)  # APSW returns a list

    # Called for every column of every indexed row: the common case (no CJK) stays one call into FTS5's own.
    def tokenize(utf8: bytes, flags: int, locale: str | None) -> Tokens:
        if not utf8:
            return []
        if flags & query and utf8[:1] == b"\x01":
            return [utf8.decode("utf-8")]
        if utf8.isascii():
            found = plain(utf8, flags)
        elif may_hold_cjk(utf8) and CJK_RUN.search(text := utf8.decode("utf-8")):
            found = mixed(text, flags, plain)
        else:
            found = plain(utf8, flags)
        if locale and found and flags & document:  # DOCUMENT tokens carry no offsets: a bare token
            found[0] = (found[0], mark + locale)
        return found

    return tokenize


def mixed(text: str, flags: int, plain: Callable[[bytes, int], Tokens]) -> Tokens:
    """Text holding CJK runs: each run as bigrams (with byte offsets), the text between them as `plain` does."""
    offsets = bool(flags & apsw.FTS5_TOKENIZE_AUX)
    out: Tokens = []
    at = byte = 0
    for match in CJK_RUN.finditer(text):
        if match.start() > at:
            byte = _gap(out, text[at : match.start()], byte, flags, plain)
        run = match.group()
        ends = [byte]
        for ch in run:  # every listed script is outside the 2-byte range; U+10000 and up take 4 bytes
            ends.append(ends[-1] + (3 if ord(ch) < 0x10000 else 4))
        for i, gram in enumerate(bigrams(run)):
            out.append((ends[i], ends[i + len(gram)], gram) if offsets else gram)
        byte, at = ends[-1], match.end()
    if at < len(text):
        _gap(out, text[at:], byte, flags, plain)
    return out


def _gap(out: Tokens, gap: str, byte: int, flags: int, plain: Callable[[bytes, int], Tokens]) -> int:
    """Tokenize the text between CJK runs as usual; returns the byte offset after it."""
    utf8 = gap.encode("utf-8")
    found = plain(utf8, flags)
    out.extend(_shift(found, byte) if flags & apsw.FTS5_TOKENIZE_AUX else found)
    return byte + len(utf8)


def _shift(found: Tokens, by: int) -> Tokens:
    return [(start + by, end + by, *rest) for start, end, *rest in found]


def bm25(api: apsw.FTS5ExtensionApi, *document_counts: apsw.SQLiteValue) -> float:
    """FTS5's bm25 with weights 5, 1, 3, computed over the first len(document_counts) phrases only.

    `document_counts[i]` is the number of rows that match phrase i in the whole index, which FTS5's own bm25
    counts on every query by reading the phrase's whole doclist; the caller passes it (cached) instead. The
    arithmetic is FTS5's own, operation for operation, so scores are bit-identical to
    bm25(memory_fts, 5.0, 1.0, 3.0) over the same phrases; phrases after them (the space token) add nothing.
    """
    data = api.aux_data
    if data is None:
        rows = api.row_count
        idf = tuple(enumerate(_idf(rows, int(n)) for n in document_counts))  # type: ignore[arg-type]
        data = api.aux_data = (idf, api.column_total_size(-1) / rows)
    idf, avgdl = data
    norm = K1 * (1 - B + B * api.column_size(-1) / avgdl)
    columns, offsets = api.phrase_columns, api.phrase_column_offsets
    score = 0.0
    # A phrase absent from the row adds exactly 0.0 to FTS5's sum, so skipping it keeps the score bit-identical;
    # asking which columns hold a phrase is cheaper than listing its offsets in every column.
    for phrase, weight in idf:
        present = columns(phrase)
        if present:
            freq = 0.0
            for column in present:
                freq += WEIGHTS[column] * len(offsets(phrase, column))
            score += weight * ((freq * (K1 + 1.0)) / (freq + norm))
    return -1.0 * score


def near(api: apsw.FTS5ExtensionApi, *args: apsw.SQLiteValue) -> int:
    """1 when the row holds the query's only phrase, or two different phrases at most `window` tokens apart
    in one column; else 0 (recall's relevance floor, docs/decisions.md D126)."""
    located = [api.phrase_locations(phrase) for phrase in range(api.phrase_count)]
    span = int(args[0])  # type: ignore[arg-type]  # the window, in tokens
    if len(located) == 1:
        return int(any(located[0]))
    for column in range(api.column_count):
        found = sorted((at, phrase) for phrase, cols in enumerate(located) for at in cols[column])
        # the closest pair of different phrases is always a neighbouring pair in offset order
        if any(p != q and b - a <= span for (a, p), (b, q) in pairwise(found)):
            return 1
    return 0


def held(api: apsw.FTS5ExtensionApi, *args: apsw.SQLiteValue) -> str:
    """Which of the query's phrases the row holds, which of those lie at most `window` tokens from another held
    phrase in one column, and which it holds in its title or tags: three bit masks in hex, `"<held> <near>
    <titled>"` (recall's evidence, D282)."""
    located = [api.phrase_locations(phrase) for phrase in range(api.phrase_count)]
    span = int(args[0])  # type: ignore[arg-type]  # the window, in tokens
    mask = close = titled = 0
    for phrase, cols in enumerate(located):
        if any(cols):
            mask |= 1 << phrase
            if cols[0] or cols[2]:  # title, tags
                titled |= 1 << phrase
    if mask & (mask - 1):  # two phrases or more: look for neighbours
        for column in range(api.column_count):
            found = sorted((at, phrase) for phrase, cols in enumerate(located) for at in cols[column])
            for (a, p), (b, q) in pairwise(found):
                if p != q and b - a <= span:
                    close |= 1 << p | 1 << q
    return f"{mask:x} {close:x} {titled:x}"


def _idf(rows: int, hits: int) -> float:
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else 1e-6
