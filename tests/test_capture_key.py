"""capture_key (SPEC 2.4): NFKC, casefold, each run of non-alphanumerics one space, trimmed.

ASCII text takes a translate table instead of a regex pass; it must give exactly the SPEC's key."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

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
