"""What a read selects, shared by list, search, recall and forget: spaces, kinds, tags, sessions, readability.

Backend-neutral data; each backend compiles it (the SQLite one: `store/sqlite/filters.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from hivemem.auth import Readable


@dataclass(frozen=True)
class Filter:
    """Which memory rows a read may see (docs/embeddings.md)."""

    readable: Readable
    spaces: tuple[str, ...] | None = None
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sessions: tuple[int, ...] | None = None
    status: str | None = "active"
    include_deleted: bool = False
    before: str | None = None
    hide_states: tuple[str, ...] = ()  # confidence states left out (recall never shows `deprecated`)
    # The window [since, until) on `on` (updated or created) and who created the memory (principal or label):
    # memory.search and memory.list (docs/decisions.md D290).
    since: str | None = None
    until: str | None = None
    on: str = "updated"
    authors: tuple[str, ...] = ()

    @property
    def windowed(self) -> bool:
        return self.since is not None or self.until is not None
