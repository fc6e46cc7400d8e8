"""Embedding providers behind one small interface (docs/embeddings.md). Importing this package does no I/O.

A provider turns texts into unit vectors: `embed(texts, query=..., timeout=...)` returns one list of floats
per text, in order, or raises `EmbeddingError`. `model` is the name stored beside every vector it makes; two
models are never compared. `make(settings)` builds the configured one; each provider module is imported only
when it is chosen, so a store with embeddings off never loads numpy, urllib or a model.
"""

from __future__ import annotations

from collections.abc import Callable

from hivemem.embeddings.base import EmbeddingError, Provider, Settings, cut_text, unit, unit_vectors

__all__ = [
    "EXTRAS",
    "PROVIDERS",
    "EmbeddingError",
    "Provider",
    "Settings",
    "cut_text",
    "make",
    "require_numpy",
    "unit",
    "unit_vectors",
]


def _http(settings: Settings) -> Provider:
    from hivemem.embeddings.http import HttpProvider

    return HttpProvider(settings)


def _local(settings: Settings) -> Provider:
    from hivemem.embeddings.local import LocalProvider

    return LocalProvider(settings)


def _fake(settings: Settings) -> Provider:
    from hivemem.embeddings.fake import FakeProvider

    return FakeProvider(settings)


# `fake` is registered like the others so that ranking tests and benchmarks run the same code path; the
# config only offers off, http and local (docs/operations.md).
PROVIDERS: dict[str, Callable[[Settings], Provider]] = {"http": _http, "local": _local, "fake": _fake}


def make(settings: Settings) -> Provider | None:
    """The configured provider, or None when embeddings are off."""
    if settings.provider == "off":
        return None
    require_numpy(settings.provider)
    return PROVIDERS[settings.provider](settings)


EXTRAS = {"local": "local", "http": "embeddings", "fake": "embeddings"}  # the extra that brings each one's needs


def require_numpy(provider: str) -> None:
    """The vector index runs on NumPy, which comes with the `embeddings` and `local` extras (docs/embeddings.md);
    without it, an EmbeddingError names the install."""
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise EmbeddingError(f"embeddings need NumPy: pip install 'hivemem[{EXTRAS[provider]}]'") from exc
