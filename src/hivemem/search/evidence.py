"""Recall's rule on words (docs/decisions.md D282): how much evidence a memory's shared words carry.

Each floor term of the prompt weighs what it tells apart in the read path: its inverse document frequency
there, as a share of the most a term could weigh (one held by no memory), so the scale is the same for a
store of 50 memories and of 100,000. A term is common when many of the path's memories hold it, or when it
is a common word of ordinary language (common-words.txt: *time*, *difference*, *work*, `怎么`), which weighs a
quarter. A memory's evidence is the sum of the weights of the terms it holds; terms held within
NEAR_TOKENS tokens of another held term count half as much again. It enters recall on words at
THRESHOLD: one rare word (`protobuf`, `test_payment_retry`, `部署` in a store that mentions it once) is
enough, one common word is not, and common words near each other add up.

Each word of the prompt (of three characters or more, not a common one) that no candidate holds raises the
threshold by UNKNOWN_STEP, for up to UNKNOWN_MAX words: a prompt mostly about things the path never mentions
needs more. A prompt of one word that is not a common one recalls what holds it, however many memories do (there is no
other evidence to weigh). A prompt that names something the path never mentions (a capitalized word that is
not a sentence's first, held by no memory, such as a person or a place) is about something else: it needs
ABSENT_NAME_THRESHOLD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources

from hivemem.search.terms import CJK_RUN, WORD, bigrams

THRESHOLD = 0.6  # evidence a memory needs: one term held by at most about N**0.4 of the path's N memories
ABSENT_NAME_THRESHOLD = 2.5  # the same when the prompt names what the path never mentions
UNKNOWN_STEP, UNKNOWN_MAX = 0.05, 3  # added to THRESHOLD per prompt word no candidate holds, for up to 3
NEAR_TOKENS = 8  # terms this close in one field count NEAR_BONUS more
NEAR_BONUS = 0.5
TITLE_BONUS = 0.5  # a term in the memory's title or tags: what it is about
COMMON_WEIGHT = 0.25  # a common word's share of its weight
MIN_ROWS = 50  # a smaller path is weighed as if it held this many memories (a new store's words are all rare)
SUFFIXES = ("s", "es", "ed", "ing", "ly")
SENTENCE = re.compile(r"(?:^|[.!?。！？]\s*)(\w+)")


@cache
def common_words() -> frozenset[str]:
    """The shipped list of common words, CJK entries as their bigrams."""
    text = resources.files("hivemem.search").joinpath("common-words.txt").read_text("utf-8")
    out: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        for word in line.split():
            if CJK_RUN.fullmatch(word):
                out.update(bigrams(word))
            else:
                out.add(word.lower())
    return frozenset(out)


def is_common(term: str) -> bool:
    """Whether a term is a common word, inflected or not (`works`, `worked`, `working` as `work`)."""
    low = term.lower()
    common = common_words()
    if low in common:
        return True
    return any(low.endswith(suffix) and low[: -len(suffix)] in common for suffix in SUFFIXES)


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")  # fmt: skip
CALENDAR = frozenset((*MONTHS, "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))


def names(prompt: str) -> set[str]:
    """Lower-cased words of the prompt that look like names: capitalized, not a sentence's first word, not a
    month or a day, at least three letters."""
    first = {m.start(1) for m in SENTENCE.finditer(prompt)}
    out: set[str] = set()
    for match in WORD.finditer(prompt):
        word = match.group()
        low = word.lower()
        if (match.start() not in first and word[:1].isupper() and not word.isupper() and len(word) > 2
                and low not in CALENDAR):  # fmt: skip
            out.add(low)
    return out


def weight(term: str, held_by: int, rows: int) -> float:
    """A term's weight in [0, 1]: its idf among `rows` memories (at least MIN_ROWS) over a unique term's."""
    total = max(rows, MIN_ROWS, held_by)
    idf = math.log1p((total - held_by + 0.5) / (held_by + 0.5))
    share = idf / math.log1p((total + 0.5) / 0.5)
    return share * COMMON_WEIGHT if is_common(term) else share


def evidence(weights: Sequence[float], held: int, near: int, titled: int) -> float:
    """The evidence of a memory holding the terms of bit mask `held`: those of `near` lie close to another,
    those of `titled` are in its title or tags (what the memory is about)."""
    total = 0.0
    for n, w in enumerate(weights):
        if held >> n & 1:
            total += w * (1.0 + (NEAR_BONUS if near >> n & 1 else 0.0) + (TITLE_BONUS if titled >> n & 1 else 0.0))
    return total
