"""Session lineage (docs/verbs.md): start, end, get, list, chain, purge. Lineage is a claim, never authority."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from hivemem.auth import Principal
from hivemem.errors import NotFound
from hivemem.records import Chain, Session, SessionEnded, SessionPage, SessionPurged, SessionStarted
from hivemem.store.base import NewSession, SessionQuery
from hivemem.store.connection import Connection, Key, Lock, Value
from hivemem.store.sqlite import audit
from hivemem.store.sqlite.db import Row, all_rows, atomic, now, one

CHAIN_MAX = 256
COLUMNS = "id, harness, harness_session, parent, relation, cwd, principal, label, started, ended"
Visible = Callable[[int, str], bool]  # (session number, reporter principal) -> readable?


def number(session: str) -> int:
    return int(session[1:])


def sid(n: int) -> str:
    return f"s{n}"


def shape(row: Row, conn: Connection | None = None, visible: Visible | None = None) -> Session:
    """A sessions row as the JSON Session of docs/verbs.md; absent members omitted, an unreadable parent too."""
    n, harness, harness_session, parent, relation, cwd, principal, label, started, ended = row
    out: dict[str, object] = {"session": sid(n), "harness": harness}
    if harness_session is not None:
        out["harness_session"] = harness_session
    if parent is not None and _parent_visible(conn, int(parent), visible):
        out["parent"] = sid(parent)
    if relation is not None:
        out["relation"] = relation
    if cwd is not None:
        out["cwd"] = cwd
    out["reported_by"] = {"principal": principal, **({"label": label} if label else {})}
    out["started"] = started
    if ended is not None:
        out["ended"] = ended
    return cast(Session, out)  # the members of a Session, in the wire's order


def _parent_visible(conn: Connection | None, parent: int, visible: Visible | None) -> bool:
    if conn is None or visible is None:
        return True
    found = row(conn, parent)
    return found is not None and visible(parent, str(found[6]))


def row(conn: Connection, n: int, lock: Lock | None = None) -> Row | None:
    return one(conn, f"SELECT {COLUMNS} FROM sessions WHERE id = ?", (n,), lock=lock)


def require(conn: Connection, session: str, visible: Visible | None = None, lock: Lock | None = None) -> Row:
    """The session row, or not_found.session (also when the caller cannot read it)."""
    found = row(conn, number(session), lock)
    if found is None or (visible is not None and not visible(int(found[0]), str(found[6]))):
        raise NotFound("session", f"{session} not found")
    return found


def existing(conn: Connection, harness: str, harness_session: str | None) -> int | None:
    """The session already recorded for (harness, harness_session), if any."""
    if harness_session is None:
        return None
    found = one(
        conn,
        "SELECT id FROM sessions WHERE harness = ? AND harness_session = ?",
        (harness, harness_session),
        lock=Key("session", harness, harness_session),
    )  # no row holds it yet: two starts take turns
    return int(found[0]) if found else None


def start(conn: Connection, actor: Principal, new: NewSession) -> SessionStarted:
    """A new session, or the existing one for the same (harness, harness_session)."""
    with atomic(conn):
        found = existing(conn, new.harness, new.harness_session)
        if found is not None:
            return {"session": sid(found), "changed": False}
        parent = number(new.parent) if new.parent else None
        if parent is not None and row(conn, parent, Lock.ROW) is None:
            raise NotFound("session", f"{new.parent} not found")
        conn.execute(
            "INSERT INTO sessions(harness, harness_session, parent, relation, cwd, principal, label, started) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (
                new.harness,
                new.harness_session,
                parent,
                new.relation,
                new.cwd,
                actor.id,
                actor.label,
                now(),
            ),
        )
        n = conn.last_insert_rowid()
        data: dict[str, str | None] = {"harness": new.harness}
        if parent is not None:
            data.update(parent=new.parent, relation=new.relation)
        audit.append(conn, "session.started", actor, session=n, data=data)
    return {"session": sid(n), "changed": True}


def end(conn: Connection, actor: Principal, n: int) -> SessionEnded:
    with atomic(conn):
        found = row(conn, n, Lock.ROW)
        if found is None:
            raise NotFound("session", f"{sid(n)} not found")
        if found[9] is not None:
            return {"session": sid(n), "ended": found[9], "changed": False}
        ended = now()
        conn.execute("UPDATE sessions SET ended = ? WHERE id = ?", (ended, n))
        audit.append(conn, "session.ended", actor, session=n)
    return {"session": sid(n), "ended": ended, "changed": True}


def purge(conn: Connection, actor: Principal, n: int) -> SessionPurged:
    """Remove the row: children keep `relation` and lose `parent`; memories lose `session`."""
    with atomic(conn):
        if row(conn, n, Lock.ROW) is None:
            raise NotFound("session", f"{sid(n)} not found")
        conn.execute("DELETE FROM sessions WHERE id = ?", (n,))
        audit.append(conn, "session.purged", actor, session=n)
    return {"session": sid(n)}


def chain(conn: Connection, n: int, visible: Visible) -> Chain:
    """The session and its ancestors, oldest first; `truncated` when it stops early, without saying why."""
    rows: list[Row] = []
    current = row(conn, n)
    truncated = False
    while current is not None:
        if len(rows) == CHAIN_MAX or not visible(int(current[0]), str(current[6])):
            truncated = True
            break
        rows.append(current)
        if current[3] is None:
            truncated = current[4] is not None  # a relation without a parent: the parent was purged
            break
        current = row(conn, int(current[3]))
        truncated = current is None
    return {"chain": [shape(r, conn, visible) for r in reversed(rows)], "truncated": truncated}


def lineage(conn: Connection, n: int, visible: Visible) -> list[int]:
    """Session numbers of the session and its readable ancestors."""
    return [number(s["session"]) for s in chain(conn, n, visible)["chain"]]


def list_sessions(
    conn: Connection, query: SessionQuery, visible: Visible, after: int | None, limit: int
) -> SessionPage:
    """Readable sessions, newest first, paged by an exclusive `after` id."""
    clauses: list[str] = ["1"]
    args: list[Value] = []
    for column, value in (("harness", query.harness), ("harness_session", query.harness_session)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if query.parent:
        clauses.append("parent = ?")
        args.append(number(query.parent))
    if after is not None:
        clauses.append("id < ?")
        args.append(after)
    found: list[Row] = []
    for r in all_rows(conn, f"SELECT {COLUMNS} FROM sessions WHERE {' AND '.join(clauses)} ORDER BY id DESC", args):
        if visible(int(r[0]), str(r[6])):
            found.append(r)
            if len(found) > limit:
                break
    page = found[:limit]
    return {
        "sessions": [shape(r, conn, visible) for r in page],
        "next": sid(int(page[-1][0])) if len(found) > limit else None,
    }
