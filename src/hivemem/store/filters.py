"""What a read selects, shared by list, search, recall and forget: spaces, kinds, tags, sessions, readability.

Backend-neutral data; each backend compiles it (the SQLite one: `store/sqlite/filters.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from hivemem.auth import Readable


@dataclass(frozen=True)
class Filter:
    """Which memory rows a read may see (SPEC 9.1 step 1)."""

    readable: Readable
    spaces: tuple[str, ...] | None = None
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sessions: tuple[int, ...] | None = None
    status: str | None = "active"
    include_deleted: bool = False
    before: str | None = None
    hide_states: tuple[str, ...] = ()  # confidence states left out (recall never shows `deprecated`)
