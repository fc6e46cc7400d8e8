"""Session lineage lookups used by memory verbs (SPEC 7)."""

from __future__ import annotations

import apsw

from hivemem.errors import NotFound
from hivemem.store.db import one

CHAIN_MAX = 256


def number(session: str) -> int:
    return int(session[1:])


def require(conn: apsw.Connection, session: str) -> int:
    """The row id of session `s<N>`, or not_found.session."""
    sid = number(session)
    if one(conn, "SELECT 1 FROM sessions WHERE id = ?", (sid,)) is None:
        raise NotFound("session", f"{session} not found", session=session)
    return sid


def lineage(conn: apsw.Connection, sid: int) -> list[int]:
    """The session and its ancestors, newest first, up to CHAIN_MAX."""
    chain: list[int] = []
    current: int | None = sid
    while current is not None and len(chain) < CHAIN_MAX and current not in chain:
        chain.append(current)
        row = one(conn, "SELECT parent FROM sessions WHERE id = ?", (current,))
        current = int(row[0]) if row and row[0] is not None else None
    return chain
