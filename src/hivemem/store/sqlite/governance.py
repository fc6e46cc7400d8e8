"""Governance (docs/governance.md): capture and confirm, review, challenge, archive, relations, move and a
memory's audit.

Each write is one `atomic()` transaction committing row, index, version and event together (docs/architecture.md).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hivemem.auth import Principal
from hivemem.errors import Conflict, InvalidParams, NotFound
from hivemem.records import Captured, Challenged, EventPage, MemoryPage, Moved, Related, Relating, Restored, Written
from hivemem.search.terms import stopwords
from hivemem.store.base import MemoryChange, NewMemory
from hivemem.store.connection import Connection, Key, Lock, Value
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits
from hivemem.store.sqlite import audit, memories, search, vectors
from hivemem.store.sqlite.db import all_rows, atomic, format_time, now, one, scalar
from hivemem.store.sqlite.filters import condition
from hivemem.store.sqlite.memories import COLUMNS, capture_key, item, mid

EXHAUSTIVE_MAX = 100  # spaces with at most this many active memories are compared in full (docs/governance.md)
RELATED_MAX = 20
SIMILAR = 0.5
DESTRUCTIVE = ("stale", "wrong", "superseded")
CANDIDATE_TERMS = 16  # the draft's distinct terms weighed to find FTS candidates in a large space
RARE_TERMS = 8  # of which the rarest pick the candidates (docs/decisions.md D91)


def _key_match(conn: Connection, space: str, key: str) -> int | None:
    """A live memory of any status in `space` with this capture key (the index holds a 32-character prefix)."""
    found = scalar(
        conn,
        "SELECT id FROM memories WHERE space = ? AND substr(capture_key, 1, 32) = ? AND capture_key = ? "
        "AND deleted IS NULL ORDER BY id LIMIT 1",
        (space, key[:32], key),
        lock=Key("capture", space, key),  # no row holds it yet: two captures of one key take turns
    )
    return int(found) if found is not None else None


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def candidates(conn: Connection, key: str, flt: Filter) -> list[int]:
    """Up to 20 active memories of the space sharing the draft's rarest words, best first (no stopwords)."""
    words = list(dict.fromkeys(key.split()))
    kept = [w for w in words if w not in stopwords()] or words
    return search.sharing(conn, kept[:CANDIDATE_TERMS], flt, RELATED_MAX, RARE_TERMS)


def related(conn: Connection, key: str, flt: Filter) -> tuple[list[Related], bool]:
    """Active memories the filter admits whose capture-key token sets are similar to `key`'s, and whether every
    one of them was compared (a space of at most 100) or only FTS candidates were."""
    where, args = condition(flt, "m")
    # In id order the planner walks memories_space, whose first rows share a few pages; unordered it took
    # memories_capture_key, whose entries point all over the table (101 page reads in a large space).
    count = int(scalar(conn, f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} ORDER BY m.id LIMIT ?)",
                       (*args, EXHAUSTIVE_MAX + 1)))  # fmt: skip
    exhaustive = count <= EXHAUSTIVE_MAX
    if exhaustive:
        rows = all_rows(conn, f"SELECT m.id, m.capture_key FROM memories m WHERE {where}", args)
    else:
        ids = candidates(conn, key, flt)[:RELATED_MAX]
        marks = ",".join("?" * len(ids))
        rows = all_rows(conn, f"SELECT id, capture_key FROM memories WHERE id IN ({marks})", ids) if ids else []
    mine = set(key.split())
    scored = [(jaccard(mine, set(str(k).split())), int(i)) for i, k in rows]
    best = sorted((s for s in scored if s[0] >= SIMILAR), key=lambda s: (-s[0], -s[1]))[:RELATED_MAX]
    return [{"id": mid(i), "similarity": round(s, 4)} for s, i in best], exhaustive


def capture(conn: Connection, limits: Limits, actor: Principal, new: NewMemory, session: int | None,
            flt: Filter) -> Captured:  # fmt: skip
    """A draft, unless a live memory of the space has the same capture key (then nothing is written)."""
    key = capture_key(new.content)
    with atomic(conn):
        dup = _key_match(conn, new.space, key)
        if dup is not None:
            return {"duplicate_of": mid(dup), "changed": False, "related": [], "exhaustive": True}
        found, exhaustive = related(conn, key, flt)
        memory = memories.insert(conn, limits, actor, new, session, status="draft", action="capture")
    return {"id": mid(memory), "revision": 1, "status": "draft", "changed": True, "related": found,
            "exhaustive": exhaustive, "independent": exhaustive and not found}  # fmt: skip


def _current(conn: Connection, memory: int, revision: int) -> memories.Fields:
    f = memories._fields(memories.load(conn, memory, lock=Lock.ROW))
    memories._check_revision(memory, f["revision"], revision)
    return f


def _status_conflict(memory: int, status: str, wanted: str) -> Conflict:
    return Conflict("memory_status", f"{mid(memory)} is {status}, not {wanted}", id=mid(memory), status=status)


def confirm(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int,
            change: MemoryChange) -> Written:  # fmt: skip
    """A draft becomes active, user_confirmed, confidence 1.0, with any edits given (content, title, kind, tags)."""
    with atomic(conn):
        f = _current(conn, memory, revision)
        if f["status"] != "draft":
            raise _status_conflict(memory, f["status"], "draft")
        edits = memories._changes(f, change)
        if "content" in edits:
            dup = memories._live_duplicate(conn, f["space"], memories.sha256(edits["content"]))
            if dup is not None and dup[0] != memory:
                raise Conflict("memory_duplicate", f"{mid(dup[0])} already holds this content", id=mid(dup[0]))
        before = f["content"]
        new = {**edits, "status": "active", "confidence_state": "user_confirmed", "confidence": 1.0}
        f.update(new)
        sets = ", ".join(f"{k} = ?" for k in new)
        extra = (memories.sha256(f["content"]), capture_key(f["content"]))
        memories._bump(conn, f, actor, f"{sets}, content_sha256 = ?, capture_key = ?", (*new.values(), *extra))
        memories._index(conn, memory)
        if {"title", "content"} & edits.keys():
            vectors.drop(conn, memory)  # the text it was made from is gone (docs/embeddings.md)
        memories._version(conn, limits, f, "confirm", actor, before)
        data = {"fields": sorted(edits)}
        rev = f["revision"]
        audit.append(conn, "memory.confirmed", actor, space=f["space"], memory=memory, revision=rev, data=data)
    return {"id": mid(memory), "revision": f["revision"], "changed": True}


def _review_after(limits: Limits, kind: str) -> str | None:
    days = limits.review_days.get(kind)
    return format_time(datetime.now(UTC) + timedelta(days=days)) if days else None


def _effect(limits: Limits, f: memories.Fields, outcome: str) -> dict[str, Value]:
    """The columns an outcome sets (docs/governance.md)."""
    if outcome == "still_valid":
        return {"confidence_state": "user_confirmed", "review_after": _review_after(limits, f["kind"])}
    if outcome == "needs_review":
        return {"confidence_state": "needs_review"}
    archived: dict[str, Value] = {"status": "archived", "confidence_state": "deprecated"}
    return archived | ({"confidence": 0.0} if outcome == "wrong" else {})


def challenge(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int, outcome: str,
              reason: str | None, confirm: bool, replacement: int | None) -> Challenged:  # fmt: skip
    """Apply an outcome; a destructive one without `confirm` is only previewed and writes nothing."""
    with atomic(conn):
        f = _current(conn, memory, revision)
        if f["status"] != "active":
            raise _status_conflict(memory, f["status"], "active")
        if replacement is not None:
            _live_active(conn, replacement)
        if outcome in DESTRUCTIVE and not confirm:
            return {"id": mid(memory), "revision": f["revision"], "outcome": outcome, "applied": False,
                    "effect": "archive"}  # fmt: skip
        new = _effect(limits, f, outcome)
        if new.get("status") == "archived":
            memories.unindex(conn, memory)
        f.update(new)
        memories._bump(conn, f, actor, ", ".join(f"{k} = ?" for k in new), tuple(new.values()))
        memories._version(conn, limits, f, "challenge", actor)
        data: dict[str, object] = {"outcome": outcome, "fields": sorted(new)}
        if reason:
            data["reason"] = reason
        if replacement is not None:
            data["replacement"] = mid(replacement)
            _link(conn, actor, replacement, memory, "supersedes", reason)
        audit.append(conn, "memory.challenged", actor, space=f["space"], memory=memory, revision=f["revision"],
                     data=data)  # fmt: skip
    return {"id": mid(memory), "revision": f["revision"], "outcome": outcome, "applied": True}


def _live_active(conn: Connection, memory: int) -> None:
    row = one(conn, "SELECT status FROM memories WHERE id = ? AND deleted IS NULL", (memory,), lock=Lock.SHARE)
    if row is None or row[0] != "active":
        raise NotFound("memory", f"{mid(memory)} is not a live active memory", id=mid(memory), param="replacement")


def archive(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int) -> Restored:
    """Archive a live memory (active or draft); an archived one is returned as it is."""
    with atomic(conn):
        f = _current(conn, memory, revision)
        if f["status"] == "archived":
            return {"id": mid(memory), "revision": f["revision"]}
        was = f["status"]
        memories.unindex(conn, memory)
        f["status"] = "archived"
        memories._bump(conn, f, actor, "status = ?", ("archived",))
        memories._version(conn, limits, f, "archive", actor)
        audit.append(conn, "memory.archived", actor, space=f["space"], memory=memory, revision=f["revision"],
                     data={"was": was})  # fmt: skip
    return {"id": mid(memory), "revision": f["revision"]}


def _link(conn: Connection, actor: Principal, source: int, target: int, relation: str,
          reason: str | None) -> bool:  # fmt: skip
    """Insert a relation and its event inside the caller's transaction; False if it was already there."""
    conn.execute(
        conn.dialect.add_relation,
        (source, target, relation, reason or None, actor.id, actor.label, now()),
    )
    if not conn.changes():
        return False
    space = memories.space_of(conn, source)
    data = {"target": mid(target), "relation": relation}
    audit.append(conn, "relation.created", actor, space=space, memory=source, data=data)
    return True


def relate(conn: Connection, actor: Principal, source: int, target: int, relation: str,
           reason: str | None) -> Relating:  # fmt: skip
    """Record `source relation target` between two live memories."""
    if source == target:
        raise InvalidParams("range", "a memory cannot be related to itself", param="target")
    with atomic(conn):
        memories.load(conn, source, lock=Lock.ROW)  # neither is deleted, moved or purged while related
        memories.load(conn, target, lock=Lock.ROW)
        changed = _link(conn, actor, source, target, relation, reason)
    return {"source": mid(source), "target": mid(target), "relation": relation, "changed": changed}


def unrelate(conn: Connection, actor: Principal, source: int, target: int, relation: str) -> Relating:
    """Remove a relation; one that is not there is `changed: false`."""
    with atomic(conn):
        conn.execute(
            "DELETE FROM memory_relations WHERE source_memory = ? AND target_memory = ? AND relation = ?",
            (source, target, relation),
        )
        changed = bool(conn.changes())
        if changed:
            data = {"target": mid(target), "relation": relation}
            space = memories.space_of(conn, source)
            audit.append(conn, "relation.deleted", actor, space=space, memory=source, data=data)
    return {"source": mid(source), "target": mid(target), "relation": relation, "changed": changed}


def move(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int,
         space: str) -> Moved:  # fmt: skip
    """A new memory in `space` with the old one's fields and author; the old one soft-deleted; one transaction."""
    with atomic(conn):
        f = _current(conn, memory, revision)
        if f["space"] == space:
            raise InvalidParams("space", f"{mid(memory)} is already in {space}", param="space")
        dup = memories._live_duplicate(conn, space, memories.sha256(f["content"]))
        if dup is not None:
            raise Conflict("memory_duplicate", f"{mid(dup[0])} already holds this content", id=mid(dup[0]))
        copy = NewMemory(space, f["content"], kind=f["kind"], title=f["title"], tags=f["tags"].split(),
                         source=f["source"], provenance=json.loads(f["provenance"] or "null"),
                         confidence=f["confidence"], confidence_state=f["confidence_state"],
                         review_after=f["review_after"], expires_at=f["expires_at"])  # fmt: skip
        data: dict[str, object] = {"from": mid(memory)}
        if f["status"] == "archived":  # the new memory is restored to what the old one was before its archive
            data["was"] = memories.unarchived_status(conn, memory)
        created = memories.insert(conn, limits, actor, copy, f["session"], status=f["status"], action="move",
                                  author=(f["principal"], f["label"]), data=data)  # fmt: skip
        memories.unindex(conn, memory)
        memories._bump(conn, f, actor, "deleted = ?", (now(),))
        memories._version(conn, limits, f, "move", actor)
        moved = {"to": mid(created), "space": space}
        audit.append(conn, "memory.moved", actor, space=f["space"], memory=memory, revision=f["revision"], data=moved)
    return {"id": mid(created), "from": mid(memory), "revision": 1}


def due_key(fields: memories.Fields, at: str) -> str:
    """When a memory fell due: its earliest passed review or expiry time (needs_review: its last change)."""
    times = [fields[k] for k in ("review_after", "expires_at") if fields[k] and fields[k] <= at]
    if fields["confidence_state"] == "needs_review":
        times.append(fields["updated"])
    return str(min(times) if times else fields["updated"])


def review(conn: Connection, flt: Filter, after: int | None, limit: int) -> MemoryPage:
    """Live active memories due for review or expired, oldest due first, paged after a memory id."""
    at = now()
    where, args = condition(flt, "m")
    cond = "(m.review_after <= ? OR m.expires_at <= ? OR m.confidence_state = 'needs_review')"
    keys = all_rows(
        conn,
        f"SELECT m.id, m.review_after, m.expires_at, m.confidence_state, m.updated FROM memories m "
        f"WHERE {where} AND {cond}",
        (*args, at, at),
    )
    names = ("id", "review_after", "expires_at", "confidence_state", "updated")
    order = sorted((due_key(dict(zip(names, r, strict=True)), at), int(r[0])) for r in keys)
    if after is not None:
        row = one(conn, "SELECT id, review_after, expires_at, confidence_state, updated FROM memories WHERE id = ?",
                  (after,))  # fmt: skip
        if row is not None:
            cursor = (due_key(dict(zip(names, row, strict=True)), at), after)
            order = [o for o in order if o > cursor]
    page = [i for _, i in order[:limit]]
    if not page:  # `IN ()` is SQLite's alone: PostgreSQL refuses it
        return {"memories": [], "next": None}
    rows = {int(r[0]): r for r in all_rows(conn, f"SELECT {COLUMNS} FROM memories WHERE id IN "
                                                  f"({','.join('?' * len(page))})", page)}  # fmt: skip
    nxt = mid(page[-1]) if len(order) > limit else None
    return {"memories": [item(rows[i]) for i in page if i in rows], "next": nxt}


def audited_space(conn: Connection, memory: int) -> str | None:
    """The space of a memory as its newest event names it: a purged memory's row is gone, its events are not."""
    row = one(conn, "SELECT space FROM events WHERE memory = ? AND space IS NOT NULL ORDER BY id DESC LIMIT 1",
              (memory,))  # fmt: skip
    return str(row[0]) if row else None


def audit_events(conn: Connection, memory: int, before: int | None, limit: int) -> EventPage:
    """The memory's events, newest first, paged below an event id."""
    sql = f"SELECT {audit.COLUMNS} FROM events WHERE memory = ?" + (" AND id < ?" if before else "")
    args: tuple[Value, ...] = (memory, before) if before else (memory,)
    rows = all_rows(conn, sql + " ORDER BY id DESC LIMIT ?", (*args, limit + 1))
    page = [audit.shown(audit.event_object(r)) for r in rows[:limit]]
    return {"events": page, "next": page[-1]["id"] if len(rows) > limit else None}


def live_space(conn: Connection, memory: int) -> str | None:
    """The space of a live (not deleted) memory, or None."""
    row = one(conn, "SELECT space FROM memories WHERE id = ? AND deleted IS NULL", (memory,))
    return str(row[0]) if row else None
