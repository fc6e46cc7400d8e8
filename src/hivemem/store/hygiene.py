"""What a hygiene report reads from a store (`memory.hygiene`), in backend-neutral terms.

A backend fills a `Scan` from one read snapshot; `hivemem.search.hygiene` turns it into findings. The scan
holds the live memories a filter admits (any status), every relation with the state of both ends, and the
newest `memory.recalled` time of each memory; it never holds anything the caller's filter does not admit,
except a relation's far end, which the report shows only when the caller may read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Row:
    """One live memory, as the report needs it."""

    id: int
    space: str
    kind: str
    status: str
    title: str
    content: str
    capture_key: str
    tags: str
    source: str | None
    provenance: str | None
    confidence: float
    confidence_state: str | None
    review_after: str | None
    expires_at: str | None
    revision: int
    created: str
    updated: str


@dataclass(slots=True)
class End:
    """One end of a relation: its space and whether it is live (None space: the row is gone)."""

    id: int
    space: str | None
    live: bool


@dataclass(slots=True)
class Relation:
    source: End
    target: End
    relation: str


@dataclass
class Scan:
    """Everything one report reads, from one snapshot; `usage_recorded`: some search recorded usage.

    The memories are `rows` followed by `pages`: a backend may leave `rows` empty and read its memories a page
    at a time as `pages` is iterated, in the caller's snapshot, so that a large report never holds them all in
    the daemon (D223)."""

    rows: list[Row] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    recalled: dict[int, str] = field(default_factory=dict)
    usage_recorded: bool = False
    pages: Iterable[list[Row]] = ()
