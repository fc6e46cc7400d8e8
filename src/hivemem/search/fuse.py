"""Reciprocal Rank Fusion (docs/embeddings.md). Pure."""

from __future__ import annotations

K = 60


Fused = list[tuple[int, float, dict[str, int]]]


def rrf(lists: dict[str, list[int]], weights: dict[str, float] | None = None) -> Fused:
    """(id, score, {list name: rank}) ordered by score, then highest id; a list's terms are scaled by its weight
    (1.0 unless given)."""
    weights = weights or {}
    ranks: dict[int, dict[str, int]] = {}
    for name, ids in lists.items():
        for rank, memory in enumerate(ids, start=1):
            ranks.setdefault(memory, {})[name] = rank
    scored = [(m, sum(weights.get(n, 1.0) / (K + r) for n, r in rs.items()), rs) for m, rs in ranks.items()]
    scored.sort(key=lambda t: (-t[1], -t[0]))
    return scored
