"""A deterministic provider for ranking tests: each word hashed into one of 64 buckets, then unit length.

Texts that share words get similar vectors; nothing is learnt, nothing is read from disk.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from hivemem.embeddings.base import Settings, unit

WIDTH = 64
_WORD = re.compile(r"\w+")


class FakeProvider:
    def __init__(self, settings: Settings) -> None:
        self.model = settings.model or "fake-64"

    def embed(self, texts: Sequence[str], *, query: bool, timeout: float) -> list[list[float]]:
        return [vector(t) for t in texts]


def vector(text: str) -> list[float]:
    out = [0.0] * WIDTH
    for word in _WORD.findall(text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        out[digest[0] % WIDTH] += 1.0 if digest[1] & 1 else -1.0
    if not any(out):
        out[0] = 1.0
    return unit(out)
