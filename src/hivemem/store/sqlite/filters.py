"""A Filter compiled to a SQL condition over a memories row (`instr` for tags, a range for space prefixes)."""

from __future__ import annotations

from hivemem.auth import Readable
from hivemem.store.connection import Value
from hivemem.store.filters import Filter


def condition(flt: Filter, alias: str = "m") -> tuple[str, list[Value]]:
    """The filter as a SQL condition over the memories row `alias`, and its bound arguments."""
    clauses: list[str] = []
    args: list[Value] = []
    if not flt.include_deleted:
        clauses.append(f"{alias}.deleted IS NULL")
    if flt.status is not None:
        clauses.append(f"{alias}.status = ?")
        args.append(flt.status)
    _in(clauses, args, f"{alias}.space", flt.spaces)
    _in(clauses, args, f"{alias}.kind", flt.kinds or None)
    _in(clauses, args, f"{alias}.session", flt.sessions)
    for tag in flt.tags:
        clauses.append(f"instr(' ' || {alias}.tags || ' ', ?) > 0")
        args.append(f" {tag} ")
    if flt.before is not None:
        clauses.append(f"{alias}.updated < ?")
        args.append(flt.before)
    if flt.on not in ("updated", "created"):
        raise ValueError(flt.on)
    if flt.since is not None:
        clauses.append(f"{alias}.{flt.on} >= ?")
        args.append(flt.since)
    if flt.until is not None:
        clauses.append(f"{alias}.{flt.on} < ?")
        args.append(flt.until)
    if flt.authors:
        marks = ",".join("?" * len(flt.authors))
        clauses.append(f"({alias}.principal IN ({marks}) OR {alias}.label IN ({marks}))")
        args.extend((*flt.authors, *flt.authors))
    if flt.hide_states:
        marks = ",".join("?" * len(flt.hide_states))
        clauses.append(f"({alias}.confidence_state IS NULL OR {alias}.confidence_state NOT IN ({marks}))")
        args.extend(flt.hide_states)
    _readable(clauses, args, alias, flt.readable)
    return " AND ".join(clauses) or "1", args


def _in(clauses: list[str], args: list[Value], column: str, values: tuple[Value, ...] | None) -> None:
    if values is None:
        return
    clauses.append(f"{column} IN ({','.join('?' * len(values))})" if values else "0")
    args.extend(values)


def _readable(clauses: list[str], args: list[Value], alias: str, readable: Readable) -> None:
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
