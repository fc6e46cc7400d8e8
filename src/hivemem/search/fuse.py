"""Reciprocal Rank Fusion (SPEC 9.1 step 4). Pure."""

from __future__ import annotations

K = 60


def rrf(lists: dict[str, list[int]]) -> list[tuple[int, float, dict[str, int]]]:
    """(id, score, {list name: rank}) ordered by score, then highest id."""
    ranks: dict[int, dict[str, int]] = {}
    for name, ids in lists.items():
        for rank, memory in enumerate(ids, start=1):
            ranks.setdefault(memory, {})[name] = rank
    scored = [(m, sum(1.0 / (K + r) for r in rs.values()), rs) for m, rs in ranks.items()]
    scored.sort(key=lambda t: (-t[1], -t[0]))
    return scored
