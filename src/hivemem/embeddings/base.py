"""What every provider shares: the interface, settings, errors and unit vectors. Pure; no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["EmbeddingError", "Provider", "Settings", "cut_text", "unit", "unit_vectors"]


class EmbeddingError(Exception):
    """The provider failed: unreachable, timed out, a bad status, or a reply that is not vectors."""


class Provider(Protocol):
    model: str

    def embed(self, texts: Sequence[str], *, query: bool, timeout: float) -> list[list[float]]: ...


@dataclass(frozen=True)
class Settings:
    """The `[embeddings]` config keys a provider needs (docs/operations.md)."""

    provider: str = "off"
    base_url: str = ""
    model: str = ""
    dimensions: int = 0
    api_key: str = ""
    max_input_bytes: int = 32768
    query_timeout_ms: int = 2000
    batch_timeout_ms: int = 30000


def unit(vector: Sequence[float], dimensions: int = 0) -> list[float]:
    """`vector` scaled to length 1; EmbeddingError for a wrong length, a non-number, NaN, ∞ or zero."""
    if dimensions and len(vector) != dimensions:
        raise EmbeddingError(f"a vector of {len(vector)} numbers, expected {dimensions}")
    if not vector:
        raise EmbeddingError("an empty vector")
    values = []
    for x in vector:
        if type(x) not in (int, float):
            raise EmbeddingError("a vector holds something other than numbers")
        values.append(float(x))
    norm = math.sqrt(math.fsum(x * x for x in values))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingError("a vector with NaN, infinity or zero length")
    return [x / norm for x in values]


def unit_vectors(raw: Sequence[Sequence[float]], count: int, dimensions: int = 0) -> list[list[float]]:
    """`count` unit vectors of one length (`dimensions`, or the first one's)."""
    if len(raw) != count:
        raise EmbeddingError(f"{len(raw)} vectors for {count} texts")
    width = dimensions or (len(raw[0]) if raw else 0)
    return [unit(v, width) for v in raw]


def cut_text(title: str, content: str, max_bytes: int) -> str:
    """`title + "\\n\\n" + content` cut at a UTF-8 boundary to `max_bytes` (docs/embeddings.md)."""
    data = (title + "\n\n" + content).encode("utf-8")[:max_bytes]
    return data.decode("utf-8", errors="ignore")
