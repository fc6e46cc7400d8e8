"""capture_key (SPEC 2.4): NFKC, casefold, each run of non-alphanumerics one space, trimmed.

ASCII text takes a translate table instead of a regex pass; it must give exactly the SPEC's key."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivemem.store.sqlite.memories import capture_key


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
