"""Validation of a whole import document before anything is written (docs/operations.md).

Every member is checked with the same rules as the verb params it becomes (memory.add, session.start), so an
imported memory obeys every bound a new one does, secret scanning included. The first problem is
`invalid_params.import` (or `invalid_params.secret_content`) with a JSON pointer in `data.at`.
"""

from __future__ import annotations

import copy
import errno
import functools
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hivemem import progress, secrets
from hivemem.auth import SPACE_RE
from hivemem.errors import Denied, HivememError, InvalidParams
from hivemem.manifest import BY_NAME, STATUSES, Param
from hivemem.params import CANONICAL_TIME, ID_RE, INT64, MAX_TAGS, check, has_control, no_secret, valid_tag, valid_time

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


class Scan(Protocol):
    """The secret scan of a document's memories when it runs beside the daemon's own checks (D201): the
    memories are checked for everything else first, and for secrets while the import goes on."""

    def bind(self, items: list[Any], limit: int) -> None:
        """The memories as parsed (the daemon's own copy), once every other check of theirs has passed."""

    def clear(self, stop: int) -> None:
        """Return once memories [0, stop) are scanned and hold no secret; else raise the document's first
        problem (a secret there or anywhere: the whole document is settled first)."""

    def finish(self) -> None:
        """Return once every memory is scanned and none holds a secret; else raise the first one found."""


class Scanned:
    """The scan of a document checked whole in this process: nothing is left to wait for."""

    def bind(self, items: list[Any], limit: int) -> None:
        pass

    def clear(self, stop: int) -> None:
        pass

    def finish(self) -> None:
        pass


Item = dict[str, Any]  # a checked item of a document: its members as docs/operations.md describes them


@dataclass
class Document:
    """A validated document: its items, the session numbers given to its sessions while it is applied, and
    the secret scan of its memories, which may still be running (`scan`; D201)."""

    store_id: str
    memories: list[Item]
    relations: list[Item]
    sessions: list[Item]
    session_ids: dict[str, int] = field(default_factory=dict)
    scan: Scan = field(default_factory=Scanned)

    def settle(self) -> None:
        """Raise the document's first problem if it has one (called before any other error is reported, so
        that a refused document is refused for its own first problem, as when it was checked whole first)."""
        self.scan.finish()


def pointer(*parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def bad(at: str, why: str) -> InvalidParams:
    return InvalidParams("import", f"the import document is invalid at {at or '/'}: {why}", at=at, param="path")


def read(path: str) -> Any:
    """The parsed document at `path` (absolute); one that cannot be read or parsed is refused."""
    return parse(read_bytes(path))


def read_bytes(path: str, max_bytes: int = 256 << 20) -> bytes:
    """The bytes of the document at `path` (absolute): only a regular file of this user's, opened without
    following a symbolic link and without blocking (a FIFO or device is refused before any read), and only if it
    holds at most `max_bytes` (`import.max_bytes`; docs/security.md)."""
    if not os.path.isabs(path):
        raise InvalidParams("path", f"{path} is not an absolute path", param="path")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Denied("path", f"{path} is a symbolic link; hivemem does not follow it", path=path) from None
        raise InvalidParams("path", f"cannot read {path}: {exc.strerror}", param="path", path=path) from None
    try:  # checked before `fdopen`, which raises for a directory and leaves the descriptor open
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidParams("path", f"{path} is not a regular file", param="path", path=path)
        if st.st_uid != os.getuid():
            raise Denied("path", f"{path} is owned by another user", path=path)
        if st.st_size > max_bytes:
            raise _too_large(path, max_bytes)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        raise _too_large(path, max_bytes)
    return data


def _too_large(path: str, max_bytes: int) -> InvalidParams:
    return InvalidParams("path", f"{path} is larger than import.max_bytes ({max_bytes} bytes)", param="path",
                         path=path, max_bytes=max_bytes,
                         fix="HIVEMEM_TOKEN=@owner hivemem config set --key import.max_bytes --value N")  # fmt: skip


def parse(text: bytes) -> Any:
    """The document's JSON value; a document that is not JSON is refused."""
    try:
        return json.loads(text)
    except RecursionError:
        raise bad("", "it is nested too deeply") from None
    except UnicodeDecodeError:
        raise bad("", "it is not UTF-8") from None
    except ValueError as exc:
        raise bad("", f"it is not JSON ({exc})") from None


def document(doc: Any, max_content_bytes: int, space_map: dict[str, str], scan: Scan | None = None) -> Document:
    """The checked document with `space_map` applied; the first problem raises (nothing is written before).

    With `scan`, the memories are checked here for everything but secrets, and `scan` looks for those while
    the document is applied (D201). The first problem is still the one a whole check finds: a problem of a
    memory here is raised only after the memories before it have been scanned in this process, and a problem
    of the relations (which follow the memories) only once `scan` has finished."""
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
    session_ids = {s["session"] for s in sessions}
    if scan is not None:
        return _scanned_beside(doc, items, sessions, max_content_bytes, space_map, scan)
    memories = _memories(items["memories"], max_content_bytes, session_ids, space_map)
    relations = _relations(items["relations"], max_content_bytes, {m["id"] for m in memories})
    return Document(doc["store_id"], memories, relations, sessions)


def _scanned_beside(doc: dict[str, Any], items: dict[str, list[Any]], sessions: list[dict[str, Any]], limit: int,
                    space_map: dict[str, str], scan: Scan) -> Document:  # fmt: skip
    """`document`'s memories and relations when `scan` looks for the memories' secrets (D201)."""
    session_ids = {s["session"] for s in sessions}
    try:
        memories = _memories(items["memories"], limit, session_ids, space_map, scanned=False)
    except HivememError:
        _memories(items["memories"], limit, session_ids, space_map)  # a secret before the problem comes first
        raise
    scan.bind(items["memories"], limit)
    try:
        relations = _relations(items["relations"], limit, {m["id"] for m in memories})
    except HivememError:
        scan.finish()  # the memories come before the relations
        raise
    return Document(doc["store_id"], memories, relations, sessions, scan=scan)


def _array(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key, [] if key != "memories" else None)
    if not isinstance(value, list):
        raise bad(pointer(key), f"{key} must be an array")
    return value


def _item(item: Any, at: str, rules: dict[str, Param], required: tuple[str, ...], limit: int,
          scanned: bool = True) -> dict[str, Any]:  # fmt: skip
    if not isinstance(item, dict):
        raise bad(at, "each item must be an object")
    out: dict[str, Any] = {}
    for key, value in item.items():
        rule = rules.get(key)
        if rule is None:
            raise bad(pointer_in(at, key), "unknown member")
        out[key] = _member(rule, value, at, limit, key, scanned)
    for key in required:
        if key not in out:
            raise bad(pointer_in(at, key), f"{key} is required")
    return out


def pointer_in(at: str, *parts: Any) -> str:
    return at + pointer(*parts)


def _member(rule: Param, value: Any, at: str, limit: int, key: str | None = None, scanned: bool = True) -> Any:
    """One member checked by its param's rules (without the secret scan when not `scanned`); the error says
    where (`at`, or member `key` of the item at `at`: that pointer is built only for an error), and a secret
    stays a secret refusal."""
    if rule.type == "object" and rule.name in ("author", "updated_by", "reported_by"):
        here = at if key is None else f"{at}/{key}"  # pointer_in(at, key): a rule's name has nothing to escape
        by = _item(value, here, BY_PARAMS, ("principal",), limit)
        if scanned and rule.name == "author" and _has_secret(str(by.get("label", ""))):
            _member(AUTHOR_LABEL, by["label"], pointer_in(here, "label"), limit)  # raises the refusal
        return by
    if rule.name == "provenance" and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in DAEMON_ONLY}
    if rule.format == "space" and isinstance(value, str) and not _has_secret(value):
        scanned = False  # names repeat on every item: each distinct one is scanned once
    if rule.scanned and not scanned:
        rule = _unscanned(rule)
    try:
        return check(rule, value, limit)
    except HivememError as exc:
        here = at if key is None else pointer_in(at, key)
        if exc.code == "invalid_params.secret_content":
            raise _secret(here, exc) from None
        raise bad(here, exc.message) from None


def _secret(here: str, exc: HivememError) -> InvalidParams:
    return InvalidParams("secret_content", f"{here} contains a secret ({exc.data.get('kind')}); nothing was imported",
                         at=here, param="path", kind=exc.data.get("kind"))  # fmt: skip


@functools.lru_cache(maxsize=64)
def _unscanned(rule: Param) -> Param:
    """The rule without its secret scan (every other check is the same)."""
    out = copy.copy(rule)
    out.scanned = False
    return out


def scan_memories(items: list[Any], start: int, stop: int, limit: int) -> None:
    """Scan memories [start, stop) of a document whose every other check has passed: the first secret, in the
    order a whole check meets them, raises its refusal (`invalid_params.secret_content` with `data.at`), the
    one `_member` raises (the other checks of a member come before its scan, and they pass here)."""
    for i in range(start, stop):
        at = f"/memories/{i}"
        for key, value in items[i].items():
            if key == "author":
                if _has_secret(str(value.get("label", ""))):
                    _member(AUTHOR_LABEL, value["label"], f"{at}/author/label", limit)  # raises the refusal
            elif MEMORY[key].scanned and (key != "space" or _has_secret(str(value))):  # a space: once per name
                if key == "provenance" and isinstance(value, dict):
                    value = {k: v for k, v in value.items() if k not in DAEMON_ONLY}
                try:
                    no_secret(key, value)
                except HivememError as exc:
                    raise _secret(f"{at}/{key}", exc) from None


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


def _memories(items: list[Any], limit: int, session_ids: set[str], space_map: dict[str, str],
              scanned: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        progress.every("checking", i + 1, len(items))
        at = f"/memories/{i}"  # pointer("memories", i): nothing in it to escape
        if not scanned and plain(item, limit):
            m = _copied(item)
        else:
            m = _item(item, at, MEMORY, ("id", "space", "content"), limit, scanned)
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


# A memory as exports write it, checked without the rules' general machinery (D216). `plain` answers True only
# for an item every rule of MEMORY accepts unchanged (secrets aside: the caller scans them), and it is stricter
# than the rules: ASCII text only, no provenance, no member it does not know. Anything else, and anything wrong,
# goes through `_item`, which finds the first problem exactly as before. tests/test_import_plain.py holds the two
# to the same answers on memories built from every member's edge values and on a real export.
_MEMORY_ID, _SESSION_ID = ID_RE["memory_id"], ID_RE["session_id"]


def plain(item: Any, limit: int) -> bool:
    """Whether `_item` would return a copy of `item` without raising (the secret scan aside), decided cheaply."""
    if type(item) is not dict or "id" not in item or "space" not in item or "content" not in item:
        return False
    return all(_PLAIN.get(key, _never)(value, limit) for key, value in item.items())


def _never(value: Any, limit: int) -> bool:
    return False


def _text(test: Callable[[str, int], bool]) -> Callable[[Any, int], bool]:
    return lambda value, limit: type(value) is str and value.isascii() and test(value, limit)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, int], bool]:
    return _text(lambda value, _: value in choices)


def _time(value: str, limit: int) -> bool:
    return not value or (CANONICAL_TIME.match(value) is not None and valid_time(value))


def _bounded(max_bytes: int | None) -> Callable[[Any, int], bool]:
    return _text(lambda value, _: len(value) <= (max_bytes or 0) and not has_control(value))


def _plain_tags(tags: Any, limit: int) -> bool:
    return (type(tags) is list and len(tags) <= MAX_TAGS
            and all(type(t) is str and valid_tag(t) for t in tags)
            and len(set(tags)) == len(tags))  # fmt: skip


def _plain_by(by: Any, limit: int) -> bool:
    return (
        type(by) is dict
        and "principal" in by
        and all(
            k in ("principal", "label") and type(v) is str and v.isascii() and len(v) <= 128 and not has_control(v)
            for k, v in by.items()
        )
    )


_PLAIN: dict[str, Callable[[Any, int], bool]] = {
    "id": _text(lambda value, _: _MEMORY_ID.match(value) is not None),
    "space": _text(lambda value, _: len(value) <= 128 and SPACE_RE.match(value) is not None),
    "content": _text(lambda value, limit: len(value) <= limit and bool(value.strip())
                     and not has_control(value, "\t\r\n")),
    **{name: _one_of(MEMORY[name].choices) for name in ("kind", "status", "confidence_state", "review", "embedding")},
    **{name: _text(_time) for name in ("created", "updated", "deleted", "review_after", "expires_at")},
    "title": _bounded(MEMORY["title"].max_bytes),
    "source": _bounded(MEMORY["source"].max_bytes),
    "session": _text(lambda value, _: _SESSION_ID.match(value) is not None),
    "tags": _plain_tags,
    "author": _plain_by,
    "updated_by": _plain_by,
    "confidence": lambda value, _: type(value) in (int, float) and 0.0 <= value <= 1.0,
    "revision": lambda value, _: type(value) is int and 1 <= value < INT64,
}  # fmt: skip


def _copied(item: dict[str, Any]) -> dict[str, Any]:
    """What `_item` returns for a plain memory: the same members, its lists and objects copied."""
    out = dict(item)
    for key in ("tags", "author", "updated_by"):
        if key in out:
            out[key] = out[key].copy()
    return out
