"""Export and import documents (docs/operations.md): the daemon writes and reads them; they never cross the socket.

An export is written row by row to a private temporary file beside its destination, so the store is never held
in memory, then published under its name without replacing anything. An import is validated whole first
(`transfer_check`), then planned and applied in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from hivemem import progress
from hivemem.auth import Principal
from hivemem.records import Author, Exported, Imported, Planned, Session
from hivemem.store import files
from hivemem.store.base import Encoded, NewMemory, Visible
from hivemem.store.connection import Connection, Lock, Value
from hivemem.store.limits import Limits
from hivemem.store.sqlite import audit, memories, sessions
from hivemem.store.sqlite.db import all_rows, atomic, now, scalar, snapshot
from hivemem.store.transfer_check import Document, Item

FORMAT, VERSION = "hivemem.export", 1
Keep = Callable[[str, int], bool]  # (space, memory) -> may the caller export it


def store_id(conn: Connection) -> str:
    return str(scalar(conn, "SELECT value FROM meta WHERE key = 'store_id'"))


def export(conn: Connection, actor: Principal, dest: str, keep: Keep, spaces: list[str] | None,
           include_deleted: bool, visible: Visible | None) -> Exported:  # fmt: skip
    """Write the export document of what `keep` lets through to `dest` (0600, fsynced, never replacing a file)
    and record `memory.exported`; returns {path, memories, bytes}. Sessions: every one (`visible` None: the
    owner's whole export), else those the memories name and their ancestors that `visible` lets the caller read."""
    with atomic(conn), files.private_output(dest) as out:
        count, seen = _write_document(conn, out, keep, spaces, include_deleted, visible)
        size = out.size
        data = {"memories": count, "bytes": size, "spaces": sorted(seen)}
        audit.append(conn, "memory.exported", actor, data=data)
    return {"path": dest, "memories": count, "bytes": size}


def _write_document(conn: Connection, out: files.Output, keep: Keep, spaces: list[str] | None,
                    include_deleted: bool, visible: Visible | None) -> tuple[int, set[str]]:  # fmt: skip
    head = {"format": FORMAT, "version": VERSION, "exported": now(), "store_id": store_id(conn)}
    out.write(_json(head)[:-1] + ',"memories":[')
    ids: set[int] = set()
    used_sessions: set[int] = set()
    seen: set[str] = set()
    where, args = _where(spaces, include_deleted)
    total = int(scalar(conn, f"SELECT count(*) FROM memories{where}", args, lock=Lock.EXPORT) or 0)  # one state
    for done, row in enumerate(conn.execute(f"SELECT {memories.COLUMNS} FROM memories{where} ORDER BY id", args), 1):
        progress.every("memories", done, total)
        if not keep(row[1], row[0]):
            continue
        out.write(("," if ids else "") + _json(memories.shape(row, deleted=True)))
        ids.add(row[0])
        seen.add(row[1])
        if row[18] is not None:
            used_sessions.add(int(row[18]))
    out.write('],"relations":')
    out.write(_json(_relations(conn, ids)))
    out.write(',"sessions":')
    out.write(_json(_sessions(conn, None if visible is None else used_sessions, visible)) + "}\n")
    return len(ids), seen


_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # compact, as written and as measured


def _where(spaces: list[str] | None, include_deleted: bool) -> tuple[str, list[Value]]:
    """The WHERE clause (with its leading space, or empty) of the memories an export reads, and its arguments."""
    where = [] if include_deleted else ["deleted IS NULL"]
    args: list[Value] = []
    if spaces is not None:
        where.append(f"space IN ({','.join('?' * len(spaces))})")
        args += spaces
    return (f" WHERE {' AND '.join(where)}" if where else ""), args


def _relations(conn: Connection, ids: set[int]) -> list[dict[str, str | Author]]:
    """Relations whose both ends are exported."""
    rows = all_rows(conn, "SELECT source_memory, target_memory, relation, reason, principal, label, created "
                          "FROM memory_relations ORDER BY id")  # fmt: skip
    out: list[dict[str, str | Author]] = []
    for source, target, relation, reason, principal, label, created in rows:
        if source in ids and target in ids:
            item: dict[str, str | Author] = {"source": memories.mid(source), "target": memories.mid(target),
                                             "relation": relation}  # fmt: skip
            if reason:
                item["reason"] = reason
            item.update(author=memories.by(principal, label), created=created)
            out.append(item)
    return out


def _sessions(conn: Connection, used: set[int] | None, visible: Visible | None) -> list[Session]:
    """Every session (`used` None), or those the exported memories name and their ancestors, oldest first; of
    those, only the ones `visible` lets through, and a parent left out is not named (docs/security.md)."""
    rows = all_rows(conn, f"SELECT {sessions.COLUMNS} FROM sessions ORDER BY id")
    if visible is not None:
        rows = [r for r in rows if visible(int(r[0]), str(r[6]))]
        kept = {int(r[0]) for r in rows}
        rows = [r if r[3] is None or int(r[3]) in kept else (*r[:3], None, None, *r[5:]) for r in rows]
    if used is not None:
        parent = {int(r[0]): r[3] for r in rows}
        wanted: set[int] = set()
        for start in used:
            n: int | None = start
            while n is not None and n not in wanted:  # ids only grow along a chain, so this ends
                wanted.add(n)
                n = parent.get(n)
        rows = [r for r in rows if int(r[0]) in wanted]
    return [sessions.shape(r) for r in rows]


@dataclass
class Plan:
    """What applying a document does: its counts, the memories to add (with their content's digest), and for each
    duplicate the memory it duplicates (a store id, or the document id of an earlier item being added)."""

    counts: Planned
    adds: list[tuple[Item, bytes]]
    same: dict[str, int | str]
    ends: list[int]  # for each memory to add, how many of the document's memories end with it


def plan(conn: Connection, doc: Document, lock: Lock | None = None) -> Plan:
    """{add, duplicate, skip} of applying `doc` now (deleted memories are skipped), and what it would add; an
    import that goes on to write it says so with `lock`."""
    out = Plan({"add": 0, "duplicate": 0, "skip": 0}, [], {}, [])  # fmt: skip
    live = [(n, m) for n, m in enumerate(doc.memories, 1) if not m.get("deleted")]
    out.counts["skip"] = len(doc.memories) - len(live)
    keys = [(m["space"], memories.sha256(m["content"])) for _, m in live]
    stored = _stored(conn, keys, lock)
    first: dict[tuple[str, bytes], str] = {}
    for (n, m), key in zip(live, keys, strict=True):
        earlier = stored.get(key) or first.get(key)
        if earlier is not None:
            out.same[m["id"]] = earlier
            out.counts["duplicate"] += 1
        else:
            first[key] = m["id"]
            out.adds.append((m, key[1]))
            out.ends.append(n)
            out.counts["add"] += 1
    return out


def _stored(conn: Connection, keys: list[tuple[str, bytes]], lock: Lock | None) -> dict[tuple[str, bytes], int]:
    """The live memories holding each (space, content digest), looked up with one statement run for every key (the
    first under `lock`, when given)."""
    sql = "SELECT ?1, ?2, (SELECT id FROM memories WHERE space = ?1 AND content_sha256 = ?2 AND deleted IS NULL)"
    if not keys:
        return {}
    rows = all_rows(conn, sql, keys[0], lock=lock) + (conn.executemany(sql, keys[1:]).fetchall() if keys[1:] else [])
    return {(space, digest): int(n) for space, digest, n in rows if n is not None}


def dry_run(conn: Connection, doc: Document) -> Imported:
    doc.scan.finish()
    with snapshot(conn):
        return {"planned": plan(conn, doc).counts, "applied": False}


BATCH = 2000  # memories written with one statement each (and one progress report)


def apply(conn: Connection, limits: Limits, actor: Principal, doc: Document) -> Imported:
    """Apply a validated document in one transaction: sessions, then memories, then relations."""
    with atomic(conn):
        planned = plan(conn, doc, Lock.IMPORT)  # no other writer changes a memory while the plan holds
        wanted = _needed_sessions(doc, {m["id"] for m, _ in planned.adds})
        session_ids = {s["session"]: _import_session(conn, actor, s, doc) for s in doc.sessions
                       if s["session"] in wanted or s.get("harness_session")}  # fmt: skip
        at = now()
        ids: dict[str, int] = {}
        total = len(planned.adds)
        for start in range(0, total, BATCH):
            batch = planned.adds[start : start + BATCH]
            doc.scan.clear(planned.ends[start + len(batch) - 1])  # nothing is written before it is scanned
            items = [_new_memory(m, digest, session_ids.get(m.get("session", "")), doc) for m, digest in batch]
            added = memories.insert_many(conn, limits, actor, items, "import")
            ids.update(zip((m["id"] for m, _ in batch), added, strict=True))
            progress.report("writing", start + len(batch), total)
        doc.scan.finish()
        for key, earlier in planned.same.items():
            ids[key] = earlier if isinstance(earlier, int) else ids[earlier]
        for r in doc.relations:
            if r["source"] in ids and r["target"] in ids:
                _import_relation(conn, actor, ids[r["source"]], ids[r["target"]], r, at)
    return {"planned": planned.counts, "applied": True}


def _needed_sessions(doc: Document, adds: set[str]) -> set[str]:
    """The sessions that memories being added name, with their ancestors. A session the store may already
    hold is found by its harness session id; one without that id is imported only when needed, so importing
    the same document again adds nothing."""
    parent = {s["session"]: s.get("parent") for s in doc.sessions}
    wanted: set[str] = set()
    for m in doc.memories:
        n = m.get("session") if m["id"] in adds else None
        while n is not None and n not in wanted:  # parents have lower numbers: this ends
            wanted.add(n)
            n = parent.get(n)
    return wanted


def _import_session(conn: Connection, actor: Principal, s: Item, doc: Document) -> int:
    found = sessions.existing(conn, s["harness"], s.get("harness_session"))
    if found is not None:
        return found
    parent = doc.session_ids.get(s.get("parent", ""))
    conn.execute(
        "INSERT INTO sessions(harness, harness_session, parent, relation, cwd, principal, label, started, ended) "
        "VALUES (?,?,?,?,?,?,?,?,?)",
        (s["harness"], s.get("harness_session"), parent, s.get("relation") if parent else None, s.get("cwd"),
         actor.id, actor.label, s["started"], s.get("ended")),
    )  # fmt: skip
    n = int(conn.last_insert_rowid())
    doc.session_ids[s["session"]] = n
    audit.append(conn, "session.started", actor, session=n, data={"imported": s["session"]})
    return n


def _new_memory(m: Item, digest: bytes, session: int | None, doc: Document) -> memories.New:
    p = NewMemory(m["space"], m["content"], kind=m.get("kind"), title=m.get("title"), tags=m.get("tags") or (),
                  source=m.get("source"), provenance=Encoded(_provenance_text(m, doc.store_id)),
                  confidence=m.get("confidence"), confidence_state=m.get("confidence_state"),
                  review_after=m.get("review_after"), expires_at=m.get("expires_at"))  # fmt: skip
    # {"original_id": ..., "original_store": ...} as audit writes it (sorted, compact), from pieces
    data = audit.Compact(f'{{"original_id":{_json(m["id"])},"original_store":{_json(doc.store_id)}}}')
    return p, digest, session, m.get("status", "active"), data


PROVENANCE_BYTES = 2048


def provenance(m: Item, original_store: str) -> dict[str, object]:
    """`kind: import` with the original store, id and author label; the claim's other members are kept while
    the whole stays within its bound (docs/verbs.md)."""
    merged, origin = _provenances(m, original_store)
    return merged if _fits(merged) else origin


def _provenances(m: Item, original_store: str) -> tuple[dict[str, object], dict[str, object]]:
    """The provenance with the claim's members, and without them."""
    author = m.get("author", {})
    origin: dict[str, object] = {
        "kind": "import", "surface": "import", "original_store": original_store, "original_id": m["id"],
        "original_author": str(author.get("label") or author.get("principal") or ""),
    }  # fmt: skip
    claim = {k: v for k, v in (m.get("provenance") or {}).items() if k not in origin}
    return {**claim, **origin}, origin


def _fits(value: dict[str, object]) -> bool:
    return len(_json(value).encode("utf-8")) <= PROVENANCE_BYTES


def _provenance_text(m: Item, original_store: str) -> str:
    """`provenance(m, original_store)` as the memories row stores it (memories._json), encoded once: the stored
    form, with its spaces, is never shorter than the compact one the bound is measured on."""
    merged, origin = _provenances(m, original_store)
    text = memories._sorted(merged)
    if (len(text) if text.isascii() else len(text.encode("utf-8"))) <= PROVENANCE_BYTES or _fits(merged):
        return text
    return memories._sorted(origin)


def _import_relation(conn: Connection, actor: Principal, source: int, target: int, r: Item,
                     at: str) -> None:  # fmt: skip
    conn.execute(
        conn.dialect.add_relation,
        (source, target, r["relation"], r.get("reason"), actor.id, actor.label, at),
    )
    if conn.changes():
        space = memories.space_of(conn, source)
        data = {"target": memories.mid(target), "relation": r["relation"]}
        audit.append(conn, "relation.created", actor, space=space, memory=source, data=data)
