"""Validation of a whole import document before anything is written (SPEC 12.1).

Every member is checked with the same rules as the verb params it becomes (memory.add, session.start), so an
imported memory obeys every bound a new one does, secret scanning included. The first problem is
`invalid_params.import` (or `invalid_params.secret_content`) with a JSON pointer in `data.at`.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from hivemem import progress, secrets
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import BY_NAME, STATUSES, Param
from hivemem.params import check

FORMAT, VERSION = "hivemem.export", 1
RELATIONS = ("supersedes", "contradicts", "related", "duplicates", "derived_from")
DAEMON_ONLY = ("original_store", "original_id", "original_author")


def _params(verb: str, *names: str) -> dict[str, Param]:
    return {p.name: p for p in BY_NAME[verb].params if p.name in names}


def _stamp(name: str) -> Param:
    return Param(name, "string", "", format="timestamp")


_ADD = ("space", "content", "kind", "title", "tags", "source", "provenance", "confidence", "confidence_state",
        "review_after", "expires_at", "session")  # fmt: skip
MEMORY: dict[str, Param] = {
    "id": Param("id", "string", "", format="memory_id"),
    **_params("memory.add", *_ADD),
    "status": Param("status", "string", "", choices=STATUSES),
    "review": Param("review", "string", "", choices=("due", "expired")),
    "revision": Param("revision", "integer", "", minimum=1),
    "author": Param("author", "object", ""),
    "updated_by": Param("updated_by", "object", ""),
    "created": _stamp("created"),
    "updated": _stamp("updated"),
    "deleted": _stamp("deleted"),
    "embedding": Param("embedding", "string", "", choices=("off", "pending", "ready")),
}
SESSION: dict[str, Param] = {
    "session": Param("session", "string", "", format="session_id"),
    **_params("session.start", "harness", "harness_session", "parent", "relation", "cwd"),
    "reported_by": Param("reported_by", "object", ""),
    "started": _stamp("started"),
    "ended": _stamp("ended"),
}
RELATION: dict[str, Param] = {
    "source": Param("source", "string", "", format="memory_id"),
    "target": Param("target", "string", "", format="memory_id"),
    "relation": Param("relation", "string", "", choices=RELATIONS),
    "reason": Param("reason", "string", "", max_bytes=500, format="source", scanned=True),
    "author": Param("author", "object", ""),
    "created": _stamp("created"),
}
AUTHOR_LABEL = Param("label", "string", "", max_bytes=128, scanned=True)
STORE_ID = Param("store_id", "string", "", max_bytes=128, format="source", scanned=True)
BY_PARAMS = {  # the principal objects {principal, label?}; only the author's label is kept (original_author)
    "principal": Param("principal", "string", "", max_bytes=128, format="source"),
    "label": Param("label", "string", "", max_bytes=128, format="source"),
}


@dataclass
class Document:
    """A validated document: its items, and the session numbers given to its sessions while it is applied."""

    store_id: str
    memories: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    sessions: list[dict[str, Any]]
    session_ids: dict[str, int] = field(default_factory=dict)


def pointer(*parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def bad(at: str, why: str) -> InvalidParams:
    return InvalidParams("import", f"the import document is invalid at {at or '/'}: {why}", at=at, param="path")


def read(path: str) -> Any:
    """The parsed document at `path` (absolute); one that cannot be read or parsed is refused."""
    if not os.path.isabs(path):
        raise InvalidParams("path", f"{path} is not an absolute path", param="path")
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise InvalidParams("path", f"cannot read {path}: {exc.strerror}", param="path", path=path) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise bad("", "it is nested too deeply") from None
    except UnicodeDecodeError:
        raise bad("", "it is not UTF-8") from None
    except ValueError as exc:
        raise bad("", f"it is not JSON ({exc})") from None


def document(doc: Any, max_content_bytes: int, space_map: dict[str, str]) -> Document:
    """The checked document with `space_map` applied; the first problem raises (nothing is written before)."""
    if not isinstance(doc, dict):
        raise bad("", "it must be a JSON object")
    if doc.get("format") != FORMAT:
        raise bad("/format", f"format must be {FORMAT!r}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise bad("/version", f"version must be {VERSION} (this hivemem reads version {VERSION})")
    for key in doc:
        if key not in ("format", "version", "exported", "store_id", "memories", "relations", "sessions"):
            raise bad(pointer(key), "unknown member")
    if not doc.get("store_id"):
        raise bad("/store_id", "store_id is required")
    _member(STORE_ID, doc["store_id"], "/store_id", max_content_bytes)  # it is kept in provenance
    if "exported" in doc:
        _member(_stamp("exported"), doc["exported"], "/exported", max_content_bytes)
    items = {key: _array(doc, key) for key in ("memories", "relations", "sessions")}
    sessions = _sessions(items["sessions"], max_content_bytes)
    memories = _memories(items["memories"], max_content_bytes, {s["session"] for s in sessions}, space_map)
    relations = _relations(items["relations"], max_content_bytes, {m["id"] for m in memories})
    return Document(doc["store_id"], memories, relations, sessions)


def _array(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key, [] if key != "memories" else None)
    if not isinstance(value, list):
        raise bad(pointer(key), f"{key} must be an array")
    return value


def _item(item: Any, at: str, rules: dict[str, Param], required: tuple[str, ...], limit: int) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise bad(at, "each item must be an object")
    out: dict[str, Any] = {}
    for key, value in item.items():
        rule = rules.get(key)
        if rule is None:
            raise bad(pointer_in(at, key), "unknown member")
        out[key] = _member(rule, value, at, limit, key)
    for key in required:
        if key not in out:
            raise bad(pointer_in(at, key), f"{key} is required")
    return out


def pointer_in(at: str, *parts: Any) -> str:
    return at + pointer(*parts)


def _member(rule: Param, value: Any, at: str, limit: int, key: str | None = None) -> Any:
    """One member checked by its param's rules; the error says where (`at`, or member `key` of the item at `at`:
    that pointer is built only for an error), and a secret stays a secret refusal."""
    if rule.type == "object" and rule.name in ("author", "updated_by", "reported_by"):
        here = at if key is None else pointer_in(at, key)
        by = _item(value, here, BY_PARAMS, ("principal",), limit)
        if rule.name == "author" and _has_secret(str(by.get("label", ""))):
            _member(AUTHOR_LABEL, by["label"], pointer_in(here, "label"), limit)  # raises the refusal
        return by
    if rule.name == "provenance" and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in DAEMON_ONLY}
    try:
        return check(rule, value, limit)
    except HivememError as exc:
        here = at if key is None else pointer_in(at, key)
        if exc.code == "invalid_params.secret_content":
            raise InvalidParams("secret_content", f"{here} contains a secret ({exc.data.get('kind')}); nothing was "
                                "imported", at=here, param="path", kind=exc.data.get("kind")) from None  # fmt: skip
        raise bad(here, exc.message) from None


@functools.lru_cache(maxsize=1024)
def _has_secret(label: str) -> bool:
    """Labels repeat on every item of a document: each distinct one is scanned once."""
    return secrets.find(label) is not None


def _unique(at: str, key: str, seen: set[str], value: str) -> None:
    if value in seen:
        raise bad(pointer_in(at, key), f"duplicate id {value}")
    seen.add(value)


def _sessions(items: list[Any], limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        at = pointer("sessions", i)
        s = _item(item, at, SESSION, ("session", "harness", "started"), limit)
        _unique(at, "session", seen, s["session"])
        out.append(s)
    out.sort(key=lambda s: int(s["session"][1:]))  # a parent's number is below its children's
    for s in out:
        if s.get("parent") not in (None, *seen):
            s.pop("parent")  # a parent left out of a filtered export: the session is imported without one
    return out


def _memories(items: list[Any], limit: int, session_ids: set[str], space_map: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        progress.every("checking", i + 1, len(items))
        at = pointer("memories", i)
        m = _item(item, at, MEMORY, ("id", "space", "content"), limit)
        _unique(at, "id", seen, m["id"])
        if m.get("session") is not None and m["session"] not in session_ids:
            raise bad(pointer_in(at, "session"), f"{m['session']} is not among the document's sessions")
        m["space"] = space_map.get(m["space"], m["space"])
        out.append(m)
    return out


def _relations(items: list[Any], limit: int, memory_ids: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        at = pointer("relations", i)
        r = _item(item, at, RELATION, ("source", "target", "relation"), limit)
        for end in ("source", "target"):
            if r[end] not in memory_ids:
                raise bad(pointer_in(at, end), f"{r[end]} is not among the document's memories")
        out.append(r)
    return out
