"""Memory verbs: one BEGIN IMMEDIATE transaction commits row, FTS, version and event together."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from hivemem.auth import Principal
from hivemem.errors import Conflict, NotFound
from hivemem.records import Author, Deleted, History, Hit, MemoryRead, Relation, Restored, Written
from hivemem.store.base import Encoded, MemoryChange, NewMemory
from hivemem.store.connection import Connection, Lock, Value
from hivemem.store.limits import Limits
from hivemem.store.sqlite import audit, fts_index, vectors
from hivemem.store.sqlite.db import Row, all_rows, atomic, format_time, now, one, scalar

COLUMNS = (
    "id, space, kind, title, content, tags, status, source, provenance, confidence, confidence_state, review_after, "
    "expires_at, revision, principal, label, updated_by, updated_label, session, created, updated, deleted"
)
NAMES = tuple(COLUMNS.split(", "))
INDEX = {name: i for i, name in enumerate(NAMES)}  # a column's place in a row of COLUMNS
EDITABLE = ("kind", "title", "content", "tags", "source", "provenance", "confidence", "confidence_state",
            "review_after", "expires_at")  # fmt: skip
META = ("source", "provenance", "confidence", "confidence_state", "review_after", "expires_at")
SNIPPET_BYTES = 240
Fields = dict[str, Any]  # a memories row by column name (COLUMNS), its cells as the driver reads them


def mid(memory: int) -> str:
    return f"m{memory}"


def sha256(content: str) -> bytes:
    """SHA-256 of the NFC form: two spellings that differ only in normalization are one memory (docs/verbs.md)."""
    if content.isascii():  # ASCII text is its own NFC form
        return hashlib.sha256(content.encode("ascii")).digest()
    return hashlib.sha256(unicodedata.normalize("NFC", content).encode("utf-8")).digest()


# ASCII letters and digits as their lowercase selves, every other byte a space: for ASCII text, NFKC and casefold
# change nothing but case, and the letters and digits are exactly what `[\W_]` leaves out.
_ASCII_KEY = bytes(c + 32 if 65 <= c <= 90 else c if 48 <= c <= 57 or 97 <= c <= 122 else 32 for c in range(256))


def capture_key(content: str) -> str:
    """NFKC, casefold, each run of non-alphanumerics one space, trimmed (docs/verbs.md)."""
    if content.isascii():  # the same key, without a regex pass over the whole text
        spaced = content.encode("ascii").translate(_ASCII_KEY).decode("ascii")
        if "  " not in spaced and spaced[:1] != " " and spaced[-1:] != " ":
            return spaced  # already single-spaced: what the split and join below would give
        return " ".join(spaced.split())
    # ASCII bytes as above in one C pass; then each distinct other character, casefolded with every
    # non-alphanumeric it folds to a space, replaced throughout: the same key as the regex over the whole text
    # (tests/test_capture_key.py), at a fraction of its cost on mostly-ASCII text with a few curly quotes.
    text = nfkc(content).encode("utf-8").translate(_UTF8_KEY).decode("utf-8")
    for ch in set(_ASCII_RUN.sub("", text)):
        folded = _NOT_ALNUM.sub(" ", ch.casefold())
        if folded != ch:
            text = text.replace(ch, folded)
    return " ".join(text.split())


def nfkc(text: str) -> str:
    """`unicodedata.normalize("NFKC", text)`, normalizing only the lines that are not ASCII (an ASCII line is its
    own NFKC form). A line feed is a starter that no character composes with, so no normalization step reorders,
    decomposes or composes across it: NFKC(a + LF + b) is NFKC(a) + LF + NFKC(b) (tests/test_capture_key.py). On
    mostly-ASCII text with a few curly quotes or an ellipsis this skips most of the text, where `normalize`
    decomposes and recomposes every character once one is not in NFKC form."""
    if "\n" not in text:
        return unicodedata.normalize("NFKC", text)
    return "\n".join(line if line.isascii() else unicodedata.normalize("NFKC", line) for line in text.split("\n"))


# The same for the ASCII bytes of UTF-8 text, every byte of a multi-byte character kept as it is.
_UTF8_KEY = _ASCII_KEY[:128] + bytes(range(128, 256))
_ASCII_RUN = re.compile(r"[\x00-\x7f]+")
_NOT_ALNUM = re.compile(r"[\W_]")


def cut(text: str, limit: int = SNIPPET_BYTES) -> str:
    """The first `limit` bytes of text, at a UTF-8 boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def by(principal: str, label: str | None) -> Author:
    out: Author = {"principal": principal}
    if label:
        out["label"] = label
    return out


def review_state(fields: Fields, at: str) -> str | None:
    """`expired`, `due` or None (docs/verbs.md)."""
    if fields.get("expires_at") and fields["expires_at"] <= at:
        return "expired"
    if (fields.get("review_after") and fields["review_after"] <= at) or fields.get(
        "confidence_state"
    ) == "needs_review":
        return "due"
    return None


def shape(row: Row, *, deleted: bool = False) -> MemoryRead:
    """A memories row as the JSON Memory of docs/verbs.md; absent members omitted."""
    return cast(MemoryRead, _members(row, True, deleted))  # the members of a MemoryRead, in the wire's order


def item(row: Row, *, deleted: bool = False) -> Hit:
    """A list item: the memory without content, plus a 240-byte snippet."""
    out = _members(row, False, deleted)
    out["snippet"] = cut(row[4])
    return cast(Hit, out)  # the members of a Hit, in the wire's order


def _members(row: Row, content: bool, deleted: bool) -> dict[str, object]:
    """A memory's members from its row, in the order the wire shows them; `content` only when asked for."""
    c = dict(zip(NAMES, row, strict=True))
    out: dict[str, object] = {"id": mid(c["id"]), "space": c["space"], "kind": c["kind"]}
    if c["title"]:
        out["title"] = c["title"]
    if content:
        out["content"] = c["content"]
    out["tags"] = c["tags"].split() if c["tags"] else []
    out["status"] = c["status"]
    _optional(out, c, ("source",))
    if c["provenance"]:
        out["provenance"] = json.loads(c["provenance"])
    out["confidence"] = c["confidence"]
    _optional(out, c, ("confidence_state", "review_after", "expires_at"))
    if c["expires_at"] or c["review_after"] or c["confidence_state"] == "needs_review":  # else never under review
        review = review_state(c, now())
        if review:
            out["review"] = review
    out["revision"] = c["revision"]
    out["author"] = by(c["principal"], c["label"])
    out["updated_by"] = by(c["updated_by"], c["updated_label"])
    if c["session"] is not None:
        out["session"] = f"s{c['session']}"
    out["created"], out["updated"] = c["created"], c["updated"]
    if deleted and c["deleted"]:
        out["deleted"] = c["deleted"]
    return out


def _optional(out: dict[str, object], c: Fields, keys: tuple[str, ...]) -> None:
    for key in keys:
        if c[key] not in (None, ""):
            out[key] = c[key]


def load(conn: Connection, memory: int, *, include_deleted: bool = False, lock: Lock | None = None) -> Row:
    """The memories row, or not_found.memory (a deleted one is absent unless asked for); a verb that goes on to
    write it, or relies on it, says so with `lock`."""
    row = one(conn, f"SELECT {COLUMNS} FROM memories WHERE id = ?", (memory,), lock=lock)
    if row is None or (row[INDEX["deleted"]] is not None and not include_deleted):
        raise NotFound("memory", f"{mid(memory)} not found")
    return row


def space_of(conn: Connection, memory: int) -> str | None:
    """The space of a memory in any state (for authorization), or None."""
    row = one(conn, "SELECT space FROM memories WHERE id = ?", (memory,))
    return str(row[0]) if row else None


def _index(conn: Connection, memory: int) -> None:
    """Index the memory's row as written (memory_fts reads title, content, tags and space from it)."""
    fts_index.add(conn, memory)


def unindex(conn: Connection, memory: int) -> None:
    """Drop the memory's index entry. Call it before the row changes: FTS5 needs the indexed values to remove
    them, read from the row; only a live, active row is indexed."""
    fts_index.remove(conn, memory)


def _fields(row: Row) -> Fields:
    return dict(zip(COLUMNS.split(", "), row, strict=True))


def _version(conn: Connection, store_limits: Limits, f: Fields, action: str, actor: Principal,
             before: str | None = None) -> None:  # fmt: skip
    """Record revision f["revision"]. The newest version's content is the row's own (stored as ''), so the
    text is not kept twice; the version it supersedes gets the content as it was (`before`, default unchanged)."""
    if f["revision"] > 1:  # revision 1 supersedes nothing (and an UPDATE here would flush the FTS5 buffer early)
        conn.execute(
            "UPDATE memory_versions SET content = ? WHERE memory = ? AND content = ''",
            (f["content"] if before is None else before, f["id"]),
        )
    conn.execute("INSERT INTO memory_versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", _version_row(f, action, actor))
    if f["revision"] > store_limits.max_versions:  # nothing to trim before then
        conn.execute(
            "DELETE FROM memory_versions WHERE memory = ? AND revision <= ?",
            (f["id"], f["revision"] - store_limits.max_versions),
        )


def _version_row(f: Fields, action: str, actor: Principal) -> tuple[Value, ...]:
    """A memory_versions row for revision f["revision"], its content kept in the memory's row (stored as '')."""
    return (f["id"], f["revision"], action, f["kind"], f["title"], "", f["tags"], f["status"], _meta(f),
            actor.id, actor.label, f["updated"])  # fmt: skip


def _meta_of(f: Fields) -> str:
    """A version's `meta`: the fields of META, provenance as an object."""
    return json.dumps({k: (json.loads(f[k]) if k == "provenance" and f[k] else f[k]) for k in META}, sort_keys=True)


_ascii = json.encoder.encode_basestring_ascii


def _meta(f: Fields) -> str:
    """`_meta_of(f)`, written from pieces in its sorted key order (json.dumps's spacing, ASCII escapes): the
    stored provenance is already that JSON when it is ASCII, so it is not parsed again (7x cheaper; equal on
    random inputs, tests/test_bulk_encoding.py)."""
    prov = f["provenance"]
    if prov is not None and not prov.isascii():
        return _meta_of(f)
    text = [_ascii(v) if v is not None else "null" for v in (f["confidence_state"], f["expires_at"],
                                                              f["review_after"], f["source"])]  # fmt: skip
    return (
        f'{{"confidence": {float.__repr__(f["confidence"])}, "confidence_state": {text[0]}, "expires_at": '
        f'{text[1]}, "provenance": {prov or "null"}, "review_after": {text[2]}, "source": {text[3]}}}'
    )


def _default_review(limits: Limits, kind: str, at: str) -> str | None:
    days = limits.review_days.get(kind)
    if not days:
        return None
    return format_time(datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC) + timedelta(days=days))


def _live_duplicate(conn: Connection, space: str, digest: bytes) -> Row | None:
    return one(
        conn,
        "SELECT id, revision, status FROM memories WHERE space = ? AND content_sha256 = ? AND deleted IS NULL",
        (space, digest),
    )


def holding(conn: Connection, space: str, digest: bytes) -> int | None:
    """The live memory of `space` whose content has this SHA-256, if any (a cross-store move's copy, D396)."""
    row = _live_duplicate(conn, space, digest)
    return int(row[0]) if row is not None else None


def add(conn: Connection, limits: Limits, actor: Principal, new: NewMemory, session: int | None) -> Written:
    """Store a memory; the same live content in the space returns the existing one unchanged."""
    digest = sha256(new.content)
    with atomic(conn):
        dup = _live_duplicate(conn, new.space, digest)
        if dup is not None:
            out: Written = {"id": mid(dup[0]), "revision": dup[1], "changed": False}
            if dup[2] != "active":
                out["status"] = dup[2]
            return out
        memory = insert(conn, limits, actor, new, session, digest=digest)
    return {"id": mid(memory), "revision": 1, "changed": True}


def insert(conn: Connection, limits: Limits, actor: Principal, new: NewMemory, session: int | None, *,
           status: str = "active", action: str = "add", author: tuple[str, str | None] | None = None,
           data: Mapping[str, object] | None = None, digest: bytes | None = None) -> int:  # fmt: skip
    """Write a new memory at revision 1 with its index entry, version and event, inside the caller's transaction.

    `action` names the version and the event (`add` is memory.added, `capture` memory.captured, `move`
    memory.moved, `import` memory.imported); `author` keeps the creator of a moved memory; `digest` is
    `sha256(new.content)` when the caller has it already (memory.add looked for a duplicate with it)."""
    at = now()
    f = _new(limits, new, status, action, at)
    principal, label = author or (actor.id, actor.label)
    conn.execute(
        "INSERT INTO memories(space, kind, title, content, content_sha256, capture_key, tags, status, source, "
        "provenance, confidence, confidence_state, review_after, expires_at, revision, principal, label, "
        "updated_by, updated_label, session, created, updated) VALUES (" + ",".join("?" * 22) + ")",
        _row(f, sha256(f["content"]) if digest is None else digest, principal, label, actor, session, at),
    )
    f["id"] = conn.last_insert_rowid()
    if status == "active":  # only a live, active row is indexed: a draft's INSERT would select nothing
        _index(conn, f["id"])
    _version(conn, limits, f, action, actor)
    audit.append(conn, EVENTS[action], actor, space=f["space"], memory=f["id"], session=session, revision=1, data=data)
    return int(f["id"])


EVENTS = {"add": "memory.added", "capture": "memory.captured", "move": "memory.moved", "import": "memory.imported"}
New = tuple[NewMemory, bytes, int | None, str, Mapping[str, object] | audit.Compact | None]
"""A memory for `insert_many`: (the memory, SHA-256 of its content, session, status, data)."""


def insert_many(conn: Connection, limits: Limits, actor: Principal, items: list[New], action: str) -> list[int]:
    """`insert` for many new memories at once, in order, inside the caller's transaction: the same rows, index
    entries, versions and events, written with one statement each, and their ids (consecutive, after every id
    the store has ever given)."""
    if not items:
        return []
    at = now()
    first = int(scalar(conn, conn.dialect.last_memory, lock=Lock.IMPORT) or 0) + 1
    rows, versions = [], []
    events: list[audit.Pending] = []
    event = EVENTS[action]
    for n, (new, digest, session, status, data) in enumerate(items, start=first):
        f = _new(limits, new, status, action, at)
        rows.append((n, *_row(f, digest, actor.id, actor.label, actor, session, at)))
        f["id"] = n
        versions.append(_version_row(f, action, actor))
        events.append((event, f["space"], n, session, 1, data))
    conn.executemany(
        "INSERT INTO memories(id, space, kind, title, content, content_sha256, capture_key, tags, status, source, "
        "provenance, confidence, confidence_state, review_after, expires_at, revision, principal, label, "
        "updated_by, updated_label, session, created, updated) VALUES (" + ",".join("?" * 23) + ")",
        rows,
    )
    fts_index.add_range(conn, first, first + len(items) - 1)
    conn.executemany("INSERT INTO memory_versions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", versions)
    audit.append_many(conn, actor, events)
    return list(range(first, first + len(items)))


def _new(limits: Limits, new: NewMemory, status: str, action: str, at: str) -> Fields:
    """The fields of a new memory at revision 1, what its writer left out filled in."""
    f: Fields = {
        "space": new.space, "kind": new.kind or "note", "title": new.title or "",
        "content": new.content, "tags": " ".join(new.tags), "status": status,
        "source": new.source or None, "provenance": _json(new.provenance),
        "confidence": 1.0 if new.confidence is None else float(new.confidence),
        "confidence_state": new.confidence_state,
        "review_after": new.review_after or None, "expires_at": new.expires_at or None,
        "revision": 1, "updated": at,
    }  # fmt: skip
    if f["review_after"] is None and action not in ("move", "import"):  # these keep their dates as they were
        f["review_after"] = _default_review(limits, f["kind"], at)
    return f


def _row(f: Fields, digest: bytes, principal: str, label: str | None, actor: Principal,
         session: int | None, at: str) -> tuple[Value, ...]:  # fmt: skip
    """The values of a new memories row, from `space` to `updated`, in the order `insert` names them."""
    return (f["space"], f["kind"], f["title"], f["content"], digest, capture_key(f["content"]), f["tags"],
            f["status"], f["source"], f["provenance"], f["confidence"], f["confidence_state"], f["review_after"],
            f["expires_at"], 1, principal, label, actor.id, actor.label, session, at, at)  # fmt: skip


# json.dumps(v, sort_keys=True, ensure_ascii=False), without building an encoder per call
_sorted = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _json(value: Mapping[str, object] | Encoded | None) -> str | None:
    if type(value) is Encoded:
        return str(value)
    return _sorted(value) if value else None


def _check_revision(memory: int, current: int, given: int) -> None:
    if current != given:
        raise Conflict("memory_revision", f"{mid(memory)} is at revision {current}", current=current)


def _changes(old: Fields, change: MemoryChange) -> Fields:
    """The editable fields whose new value differs from the stored one."""
    new: Fields = {}
    for key in EDITABLE:
        value = getattr(change, key)
        if value is None:  # not given
            continue
        if key == "tags":
            value = " ".join(value)
        elif key == "provenance":
            value = _json(value)
        elif key == "confidence":
            value = float(value)
        elif key in ("source", "review_after", "expires_at", "confidence_state") and value == "":
            value = None
        if value != old[key]:
            new[key] = value
    return new


def update(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int,
           change: MemoryChange) -> Written:  # fmt: skip
    """Change a memory at the revision the caller read (compare-and-swap)."""
    with atomic(conn):
        f = _fields(load(conn, memory, lock=Lock.ROW))
        _check_revision(memory, f["revision"], revision)
        new = _changes(f, change)
        if not new:
            return {"id": mid(memory), "revision": f["revision"], "changed": False}
        if "content" in new:
            dup = _live_duplicate(conn, f["space"], sha256(new["content"]))
            if dup is not None and dup[0] != memory:
                raise Conflict("memory_duplicate", f"{mid(dup[0])} already holds this content", id=mid(dup[0]))
        reindex = f["status"] == "active" and bool({"title", "content", "tags"} & new.keys())
        before = f["content"]
        if reindex:
            unindex(conn, memory)
        f.update(new, revision=f["revision"] + 1, updated=now())
        sets = ", ".join(f"{k} = ?" for k in new)
        extra = (sha256(f["content"]), capture_key(f["content"]))
        conn.execute(
            f"UPDATE memories SET {sets}, content_sha256 = ?, capture_key = ?, revision = ?, updated_by = ?, "
            "updated_label = ?, updated = ? WHERE id = ?",
            (*new.values(), *extra, f["revision"], actor.id, actor.label, f["updated"], memory),
        )
        if reindex:
            _index(conn, memory)
        if {"title", "content"} & new.keys():
            vectors.drop(conn, memory)  # the text it was made from is gone (docs/embeddings.md)
        _version(conn, limits, f, "update", actor, before)
        data = {"fields": sorted(new)}
        audit.append(conn, "memory.updated", actor, space=f["space"], memory=memory, revision=f["revision"], data=data)
    return {"id": mid(memory), "revision": f["revision"], "changed": True}


def _bump(conn: Connection, f: Fields, actor: Principal, assignments: str, args: tuple[Value, ...]) -> None:
    f.update(revision=f["revision"] + 1, updated=now())
    conn.execute(
        f"UPDATE memories SET {assignments}, revision = ?, updated_by = ?, updated_label = ?, updated = ? WHERE id = ?",
        (*args, f["revision"], actor.id, actor.label, f["updated"], f["id"]),
    )


def delete(conn: Connection, limits: Limits, actor: Principal, memory: int, revision: int) -> Deleted:
    """Soft delete: the memory leaves search and lists; restore brings it back."""
    with atomic(conn):
        f = _fields(load(conn, memory, lock=Lock.ROW))
        _check_revision(memory, f["revision"], revision)
        deleted = now()  # the result's `deleted` must be the stored stamp, not a second clock read
        unindex(conn, memory)
        _bump(conn, f, actor, "deleted = ?", (deleted,))
        _version(conn, limits, f, "delete", actor)
        audit.append(conn, "memory.deleted", actor, space=f["space"], memory=memory, revision=f["revision"])
    return {"id": mid(memory), "revision": f["revision"], "deleted": deleted}


def restore(conn: Connection, limits: Limits, actor: Principal, memory: int) -> Restored:
    """Un-delete or un-archive; a live memory that is already active is returned as it is."""
    with atomic(conn):
        f = _fields(load(conn, memory, include_deleted=True, lock=Lock.ROW))
        if f["deleted"] is None and f["status"] != "archived":
            return {"id": mid(memory), "revision": f["revision"]}
        if f["deleted"] is not None:
            dup = _live_duplicate(conn, f["space"], sha256(f["content"]))
            if dup is not None:
                raise Conflict("memory_duplicate", f"{mid(dup[0])} already holds this content", id=mid(dup[0]))
        if f["deleted"] is None:  # un-archive: a draft comes back a draft, never active without confirm
            f["status"] = unarchived_status(conn, memory)
        _bump(conn, f, actor, "deleted = NULL, status = ?", (f["status"],))
        if f["status"] == "active":
            _index(conn, memory)
        _version(conn, limits, f, "restore", actor)
        audit.append(conn, "memory.restored", actor, space=f["space"], memory=memory, revision=f["revision"])
    return {"id": mid(memory), "revision": f["revision"]}


ARCHIVING = ("memory.archived", "memory.challenged", "memory.moved")


def unarchived_status(conn: Connection, memory: int) -> str:
    """The status an archived memory had before it was archived (docs/decisions.md D180): `draft` when its
    newest archiving event says so, the `memory.archived` of `memory.archive` or the `memory.moved` that made it
    from an archived memory; `active` otherwise (a challenge archives only active memories)."""
    rows = all_rows(conn, f"SELECT type, data FROM events WHERE memory = ? AND type IN "
                          f"({','.join('?' * len(ARCHIVING))}) ORDER BY id DESC", (memory, *ARCHIVING))  # fmt: skip
    for etype, data in rows:
        found = json.loads(data)
        if etype == "memory.moved" and "from" not in found:
            continue  # the event of the memory it was moved to
        return "draft" if etype != "memory.challenged" and found.get("was") == "draft" else "active"
    return "active"


def purge(conn: Connection, actor: Principal, memory: int) -> str:
    """Erase the memory, its versions, vector and relations; returns its space."""
    with atomic(conn):
        row = one(conn, "SELECT space, revision FROM memories WHERE id = ?", (memory,), lock=Lock.ROW)
        if row is None:
            raise NotFound("memory", f"{mid(memory)} not found")
        unindex(conn, memory)
        conn.execute("DELETE FROM memories WHERE id = ?", (memory,))
        audit.append(conn, "memory.purged", actor, space=row[0], memory=memory, revision=row[1])
    return str(row[0])


def remove_tombstones(conn: Connection, days: int) -> int:
    """Remove memories soft-deleted more than `days` ago, with their versions."""
    cutoff = format_time(datetime.now(UTC) - timedelta(days=days))
    with atomic(conn):
        conn.execute("DELETE FROM memories WHERE deleted IS NOT NULL AND deleted < ?", (cutoff,))
        return int(conn.changes())


def get(conn: Connection, memory: int, include_deleted: bool, model: str | None = None) -> MemoryRead:
    """The memory with its relations and embedding state (`off` without a model, else `ready` or `pending`)."""
    out = shape(load(conn, memory, include_deleted=include_deleted), deleted=True)
    out["embedding"] = "off" if model is None else "ready" if vectors.has(conn, memory, model) else "pending"
    out["relations"] = relations(conn, memory)
    return out


def relations(conn: Connection, memory: int) -> list[Relation]:
    rows = all_rows(
        conn,
        "SELECT relation, source_memory, target_memory FROM memory_relations "
        "WHERE source_memory = ? OR target_memory = ? ORDER BY id",
        (memory, memory),
    )
    return [
        {"relation": r, "target": mid(t), "direction": "out"} if s == memory else
        {"relation": r, "source": mid(s), "direction": "in"}
        for r, s, t in rows
    ]  # fmt: skip


def get_version(conn: Connection, memory: int, revision: int, include_deleted: bool) -> MemoryRead:
    """The memory as of `revision`, with that version's action."""
    current = shape(load(conn, memory, include_deleted=include_deleted), deleted=True)
    row = one(
        conn,
        "SELECT action, kind, title, content, tags, status, meta, principal, label, ts FROM memory_versions "
        "WHERE memory = ? AND revision = ?",
        (memory, revision),
    )
    if row is None:
        raise NotFound(
            "memory_revision", f"{mid(memory)} has no revision {revision}", id=mid(memory), revision=revision
        )
    action, kind, title, content, tags, status, meta, principal, label, ts = row
    out: dict[str, object] = {"id": current["id"], "space": current["space"], "author": current["author"],
                              "created": current["created"]}  # fmt: skip
    out.update(kind=kind, content=content or current["content"], tags=tags.split() if tags else [], status=status)
    if title:
        out["title"] = title
    out.update({k: v for k, v in json.loads(meta).items() if v not in (None, "")})
    out.update(revision=revision, updated_by=by(principal, label), updated=ts, action=action)
    return cast(MemoryRead, out)  # the members that version has, in the wire's order


def history(conn: Connection, memory: int) -> History:
    """Kept versions, newest first."""
    load(conn, memory, include_deleted=True)
    rows = all_rows(
        conn,
        f"SELECT v.revision, v.action, v.principal, v.label, v.ts, {conn.dialect.version_bytes} "
        "FROM memory_versions v JOIN memories m ON m.id = v.memory WHERE v.memory = ? ORDER BY v.revision DESC",
        (memory,),
    )
    return {
        "versions": [{"revision": r, "action": a, "by": by(p, lb), "ts": ts, "bytes": n} for r, a, p, lb, ts, n in rows]
    }
