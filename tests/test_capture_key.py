"""capture_key (docs/memories.md): NFKC, casefold, each run of non-alphanumerics one space, trimmed.

ASCII text takes a translate table instead of a regex pass; it must give exactly the key of docs/memories.md."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivemem.store.sqlite.memories import capture_key, nfkc


def reference(content: str) -> str:
    return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", content).casefold()).strip()


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ("Use  PNPM, not npm!", "use pnpm not npm"),
        ("__init__.py", "init py"),
        ("  tabs\tand\nnewlines  ", "tabs and newlines"),
        ("ＦＵＬＬ width", "full width"),  # NFKC folds full-width letters (the non-ASCII path)
        ("Straße", "strasse"),  # casefold, not lower
        ("", ""),
        ("---", ""),
    ],
)
def test_examples(content: str, key: str) -> None:
    assert capture_key(content) == key


def test_every_ascii_character_is_keyed_as_the_spec_says() -> None:
    for code in range(128):
        text = f"a{chr(code)}b {chr(code)}"
        assert capture_key(text) == reference(text), repr(chr(code))


def test_random_ascii_and_mixed_texts_match_the_reference() -> None:
    rng = random.Random(20261201)
    alphabet = [chr(c) for c in range(128)] + ["é", "ß", "Ⅷ", "中", "\u00a0", "Ω"]
    for n in range(3000):
        pool = alphabet if n % 3 == 0 else alphabet[:128]
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 60)))
        assert capture_key(text) == reference(text), repr(text)


def test_every_code_point_is_keyed_as_the_reference_keys_it() -> None:
    """Each character outside ASCII is folded and replaced on its own; every code point, between ASCII letters
    and beside its neighbours, must key exactly as the regex over the whole text does."""
    points = [chr(c) for c in range(128, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    for at in range(0, len(points), 4096):
        block = points[at : at + 4096]
        text = "Ab".join(block) + " " + "".join(block) + " x"
        assert capture_key(text) == reference(text), f"block from U+{ord(block[0]):04X}"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80))
def test_any_text_keys_as_the_reference(text: str) -> None:
    assert capture_key(text) == reference(text)


# Characters that normalization moves, splits or joins (combining marks of several classes, Hangul jamo that
# compose, compatibility forms, a singleton, a character NFKC turns into a line's worth of text), line feeds
# and other line ends among them.
TRICKY = ["a", "e", "A", " ", "\n", "\n", "\r", "\u0085", "\u2028", "\u0301", "\u0327", "\u0323", "\u0344",
          "\u0f73", "\u1100", "\u1161", "\u11a8", "\uac00", "\u2026", "\ufb01", "\u212b", "\u00c5", "\u1e9b",
          "\u3300", "\u00a0", "\u00bd", "é", "ß"]  # fmt: skip


def test_nfkc_by_lines_is_nfkc_of_the_whole_text() -> None:
    """nfkc normalizes only the lines that are not ASCII: it must equal NFKC of the whole text, whatever
    stands on either side of a line feed."""
    rng = random.Random(20261205)
    for n in range(20000):
        pool = TRICKY if n % 2 else [*TRICKY, *(chr(c) for c in range(32, 127))]
        text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 40)))
        assert nfkc(text) == unicodedata.normalize("NFKC", text), repr(text)
        assert capture_key(text) == reference(text), repr(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20), max_size=6))
def test_any_lines_normalize_as_the_whole_text(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_every_code_point_beside_a_line_feed_normalizes_as_the_whole_text() -> None:
    points = [chr(c) for c in range(128, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    for at in range(0, len(points), 4096):
        block = points[at : at + 4096]
        text = "A\n".join(block) + "\n" + "\n".join(block) + "e\n\u0301"
        assert nfkc(text) == unicodedata.normalize("NFKC", text), f"block from U+{ord(block[0]):04X}"
