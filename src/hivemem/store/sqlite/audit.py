"""The append-only audit log and its SHA-256 hash chain (docs/governance.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import cast

from hivemem.auth import Principal
from hivemem.records import Event
from hivemem.store.connection import Connection, Lock, Value
from hivemem.store.sqlite.db import Row, now, one

ZERO = bytes(32)
# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False), without building an encoder per call
_compact = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
COLUMNS = "id, ts, type, principal, label, space, memory, session, revision, data"
Data = Mapping[str, object]  # an event's `data`: a JSON object


def event_object(row: Row) -> dict[str, object]:
    """An event as `keep` sees it and as hashed: every member present, absent values null."""
    eid, ts, etype, principal, label, space, memory, session, revision, data = row[:10]
    return {
        "id": eid,
        "ts": ts,
        "type": etype,
        "principal": principal,
        "label": label,
        "space": space,
        "memory": f"m{memory}" if memory is not None else None,
        "session": f"s{session}" if session is not None else None,
        "revision": revision,
        "data": json.loads(data),
    }


def canonical(row: Row) -> dict[str, object]:
    """The event as hashed (docs/governance.md): the columns as stored, `data` parsed, absent values null."""
    keys = ("id", "ts", "type", "principal", "label", "space", "memory", "session", "revision", "data")
    event: dict[str, object] = dict(zip(keys, row[:10], strict=True))
    event["data"] = json.loads(row[9])
    return event


def link(previous: bytes, event: Mapping[str, object]) -> bytes:
    """SHA-256 of the previous chain followed by the canonical JSON of this event."""
    return hashlib.sha256(previous + _compact(event).encode("utf-8")).digest()


def append(
    conn: Connection,
    etype: str,
    actor: Principal,
    *,
    space: str | None = None,
    memory: int | None = None,
    session: int | None = None,
    revision: int | None = None,
    data: Data | None = None,
) -> int:
    """Write one event inside the caller's transaction."""
    return append_many(conn, actor, [(etype, space, memory, session, revision, data)])


class Compact(str):
    """An event's data already written as _compact writes it, an object whose keys are all strings (a bulk
    caller writes its events' data from pieces)."""


Pending = tuple[str, str | None, int | None, int | None, int | None, Data | Compact | None]
"""An event to write: (type, space, memory, session, revision, data)."""


def append_many(conn: Connection, actor: Principal, pending: list[Pending]) -> int:
    """Write events in order inside the caller's transaction, chaining each to the one before, with one read of
    the chain's end and one statement for them all; returns the last event's id."""
    last = one(conn, conn.dialect.chain_end, lock=Lock.STORE)  # held to the commit
    previous, eid = (bytes(last[0]), int(last[1])) if last else (ZERO, 0)
    at = now()
    rows = []
    # The canonical JSON of an event, in its sorted key order, from pieces: the same bytes as
    # _compact(canonical(row)) (tests/test_bulk_encoding.py), without a dict and two encodings per event.
    who = f',"principal":{_scalar(actor.id)},"revision":'
    label, stamp = f',"label":{_scalar(actor.label)},"memory":', f',"ts":{_scalar(at)},"type":'
    texts: dict[str | None, str] = {}
    sha = hashlib.sha256
    for etype, space, memory, session, revision, data in pending:
        eid += 1
        if type(data) is Compact:
            payload = body = str(data)
        else:
            payload = _compact(data or {})
            body = payload if _plain(data) else _compact(json.loads(payload))
        row = (eid, at, etype, actor.id, actor.label, space, memory, session, revision, payload)
        space_text = texts.get(space) or texts.setdefault(space, _scalar(space))
        type_text = texts.get(etype) or texts.setdefault(etype, _scalar(etype))
        event = (f'{{"data":{body},"id":{eid}{label}{_scalar(memory)}{who}{_scalar(revision)},"session":'
                 f'{_scalar(session)},"space":{space_text}{stamp}{type_text}}}')  # fmt: skip
        previous = sha(previous + event.encode("utf-8")).digest()
        rows.append((*row, previous))
    conn.executemany(f"INSERT INTO events({COLUMNS}, chain) VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    return eid


def _scalar(value: str | int | None) -> str:
    """A column's value as _compact writes it (strings, integers and null are all an event row holds)."""
    if value is None:
        return "null"
    if type(value) is int:
        return int.__repr__(value)
    return _compact(value)


def _plain(value: object) -> bool:
    """Whether `value` comes back from its own JSON unchanged in encoding: every object key (at any depth) a
    string. (A non-string key is written as a string and so sorted as one once parsed, as the chain hashes it.)"""
    if isinstance(value, dict) and type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def shown(event: dict[str, object]) -> Event:
    """The event as printed: absent members omitted, `data` always present."""
    return cast(Event, {k: v for k, v in event.items() if v is not None or k == "data"})  # its members, in order


def verify_chain(conn: Connection) -> int | None:
    """The id of the first event whose chain does not verify, or None."""
    previous = ZERO
    for row in conn.execute(f"SELECT {COLUMNS}, chain FROM events ORDER BY id"):
        expected = link(previous, canonical(row))
        if expected != bytes(row[10]):
            return int(row[0])
        previous = expected
    return None


def list_events(
    conn: Connection,
    keep: Callable[[dict[str, object]], bool],
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int = 50,
    types: tuple[str, ...] = (),
    spaces: tuple[str, ...] = (),
) -> list[dict[str, object]]:
    """Events kept by `keep(event)`, newest first below `before`, or oldest first above `after`."""
    clauses: list[str] = ["1"]
    args: list[Value] = []
    if types:
        clauses.append(f"type IN ({','.join('?' * len(types))})")
        args.extend(types)
    if spaces:
        clauses.append(f"space IN ({','.join('?' * len(spaces))})")
        args.extend(spaces)
    if before is not None:
        clauses.append("id < ?")
        args.append(before)
    if after is not None:
        clauses.append("id > ?")
        args.append(after)
    order = "ASC" if after is not None else "DESC"
    out: list[dict[str, object]] = []
    cursor = conn.execute(f"SELECT {COLUMNS} FROM events WHERE {' AND '.join(clauses)} ORDER BY id {order}", args)
    try:
        for row in cursor:
            event = event_object(row)
            if keep(event):
                out.append(event)
                if len(out) > limit:
                    break
    finally:
        cursor.close()  # never leave a read transaction open on a pooled connection
    return out
