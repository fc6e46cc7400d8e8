"""Query terms of docs/embeddings.md: tokens, their word runs, and Chinese, Japanese and Korean bigrams.

Pure text functions, shared by the query side (which FTS5 strings a query becomes) and the index side (the
store's tokenizer cuts the same scripts into the same bigrams), so both always agree.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

from hivemem.errors import InvalidParams

WORD = re.compile(r"\w+")
# Scripts written without spaces between words, indexed and searched as overlapping character bigrams: Han
# (with the iteration and numeral marks), Hiragana, Katakana (with its prolonged sound mark and the halfwidth
# forms) and Hangul. Only letters and numbers are listed, so a run of them is always inside a \w run.
CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c"  # 々 〆 〇, Hangzhou numerals, kana repeat marks
    "\u3041-\u3096\u309d-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana, ー prolonged sound mark, ヽ ヾ ヿ
    "\u3131-\u318e\u31f0-\u31ff"  # Hangul compatibility Jamo, Katakana phonetic extensions
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs and extension A
    "\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7fb"  # Hangul Jamo extended A, syllables, Jamo extended B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f\uffa0-\uffdc"  # halfwidth Katakana (ｰ included) and Hangul
    "\U0001aff0-\U0001b16f"  # Kana extended and supplement
    "\U00020000-\U0003134f"  # CJK extensions B to H, compatibility supplement
)
CJK_RUN = re.compile(f"[{CJK}]+")


def _cjk_prefixes() -> tuple[bytes, ...]:
    """The first UTF-8 bytes of every CJK character: its lead byte where many of the lead's second bytes begin one,
    else each lead-and-second-byte pair. Text holding none of them holds no CJK (a cheap test before CJK_RUN)."""
    ranges = re.findall(r"(.)(?:-(.))?", CJK, re.S)
    seconds: dict[int, set[int]] = {}
    for low, high in ranges:
        first, last = ord(low), ord(high or low)
        for point in [*range(first, last + 1, 64), last]:
            utf8 = chr(point).encode("utf-8")
            seconds.setdefault(utf8[0], set()).add(utf8[1])
    out: list[bytes] = []
    for lead, after in sorted(seconds.items()):
        out += [bytes([lead])] if len(after) > 8 else [bytes([lead, b]) for b in sorted(after)]
    return tuple(out)


CJK_PREFIXES = _cjk_prefixes()


def may_hold_cjk(utf8: bytes) -> bool:
    """False when UTF-8 text holds no CJK character: none of their first bytes occurs (a byte search each, where
    CJK_RUN tests every character); True means CJK_RUN decides."""
    return any(prefix in utf8 for prefix in CJK_PREFIXES)


@cache
def stopwords() -> frozenset[str]:
    """The fixed English stopword list shipped with the package."""
    text = resources.files("hivemem.search").joinpath("stopwords-en.txt").read_text("utf-8")
    return frozenset(w.strip().lower() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run; a run of one character is itself."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def pieces(run: str) -> Iterator[tuple[str, bool]]:
    """A word run cut into (text, is_cjk) pieces: CJK runs and the other letters between them."""
    at = 0
    for match in CJK_RUN.finditer(run):
        if match.start() > at:
            yield run[at : match.start()], False
        yield match.group(), True
        at = match.end()
    if at < len(run):
        yield run[at:], False


def tokens(query: str) -> list[str]:
    """Query tokens after dropping no-word tokens, stopword-only tokens and repeats (unless none would remain)."""
    if not query.strip():
        raise InvalidParams("query", "the query is empty", param="query")
    # FTS5 reads its query as a C string, so a NUL separates tokens like whitespace does.
    worded = [t for t in query.replace("\x00", " ").split() if WORD.search(t)]
    stop = stopwords()
    kept: list[str] = []
    seen: set[str] = set()
    for token in worded:
        runs = [r.lower() for r in WORD.findall(token)]
        if all(r in stop for r in runs) or token.lower() in seen:
            continue
        seen.add(token.lower())
        kept.append(token)
    return kept or worded


def units(words: list[str]) -> list[tuple[str, bool]]:
    """Every word run of `words` in order, CJK runs already cut into bigrams: (unit, is_bigram_or_cjk)."""
    out: list[tuple[str, bool]] = []
    for word in words:
        for run in WORD.findall(word):
            for piece, cjk in pieces(run):
                if cjk:
                    out.extend((gram, True) for gram in bigrams(piece))
                else:
                    out.append((piece, False))
    return out


def select(found: list[tuple[str, bool]], *, floor: bool) -> list[str]:
    """Drop stopword runs (bigrams are never stopwords) and repeats; the floor also drops one-character units."""
    stop = stopwords()
    kept: list[str] = []
    seen: set[str] = set()
    for unit, cjk in found:
        low = unit.lower()
        if (not cjk and low in stop) or low in seen or (floor and len(unit) == 1):
            continue
        seen.add(low)
        kept.append(unit)
    return kept


def terms(query: str) -> list[str]:
    """The FTS5 strings of a search: each kept token's word runs, CJK runs as bigrams, stopwords and repeats
    dropped unless that would drop them all (docs/embeddings.md)."""
    found = units(tokens(query))
    return select(found, floor=False) or [unit for unit, _ in found]


def floor_terms(query: str) -> list[str]:
    """The relevance floor of recall (docs/hooks.md): as `terms`, never falling back, without one-character runs."""
    return select(units(query.replace("\x00", " ").split()), floor=True)
