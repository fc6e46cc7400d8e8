"""Row filters shared by list, search and forget: spaces, kinds, tags, sessions, readability."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def where(self, alias: str = "m") -> tuple[str, list[Any]]:
        """A SQL condition over `alias` and its bound arguments."""
        clauses: list[str] = []
        args: list[Any] = []
        if not self.include_deleted:
            clauses.append(f"{alias}.deleted IS NULL")
        if self.status is not None:
            clauses.append(f"{alias}.status = ?")
            args.append(self.status)
        _in(clauses, args, f"{alias}.space", self.spaces)
        _in(clauses, args, f"{alias}.kind", self.kinds or None)
        _in(clauses, args, f"{alias}.session", self.sessions)
        for tag in self.tags:
            clauses.append(f"instr(' ' || {alias}.tags || ' ', ?) > 0")
            args.append(f" {tag} ")
        if self.before is not None:
            clauses.append(f"{alias}.updated < ?")
            args.append(self.before)
        if self.hide_states:
            marks = ",".join("?" * len(self.hide_states))
            clauses.append(f"({alias}.confidence_state IS NULL OR {alias}.confidence_state NOT IN ({marks}))")
            args.extend(self.hide_states)
        _readable(clauses, args, alias, self.readable)
        return " AND ".join(clauses) or "1", args


def _in(clauses: list[str], args: list[Any], column: str, values: tuple[Any, ...] | None) -> None:
    if values is None:
        return
    clauses.append(f"{column} IN ({','.join('?' * len(values))})" if values else "0")
    args.extend(values)


def _readable(clauses: list[str], args: list[Any], alias: str, readable: Readable) -> None:
    if readable.everything:
        return
    parts = []
    if readable.spaces:
        parts.append(f"{alias}.space IN ({','.join('?' * len(readable.spaces))})")
        args.extend(sorted(readable.spaces))
    for prefix in readable.prefixes:
        # Every name under `p/` sorts in [`p/`, `p0`): '0' follows '/'. A range is an index-friendly compare.
        parts.append(f"({alias}.space >= ? AND {alias}.space < ?)")
        args.extend((prefix + "/", prefix + "0"))
    if readable.memories:
        parts.append(f"{alias}.id IN ({','.join('?' * len(readable.memories))})")
        args.extend(sorted(readable.memories))
    clauses.append("(" + " OR ".join(parts) + ")" if parts else "0")
