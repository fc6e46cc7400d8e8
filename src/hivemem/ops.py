"""dispatch(store, principal, verb, params): validate against the manifest, authorize, call the store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from hivemem.errors import Denied, HivememError, NotFound, Unsupported
from hivemem.manifest import BY_NAME, Verb
from hivemem.params import validate
from hivemem.search.query import search as run_search
from hivemem.store import Store, audit, erasure, listing, memories, sessions
from hivemem.store.clients import Principal
from hivemem.store.db import atomic, scalar
from hivemem.store.filters import Filter

Handler = Callable[[Store, Principal, dict[str, Any]], dict[str, Any]]
FIX = "hivemem whoami --json  # set HIVEMEM_TOKEN to a client token with this right, or @owner"


def verb_for(name: Any) -> Verb:
    verb = BY_NAME.get(name) if isinstance(name, str) else None
    if verb is None:
        raise Unsupported("verb", f"unknown verb {name!r}", verb=str(name))
    return verb


def needs_writer(name: str, params: Any) -> bool:
    """Whether a request must run on the single writer connection."""
    verb = BY_NAME.get(name)
    if verb is None:
        return False
    return verb.writes or (name == "memory.search" and isinstance(params, dict) and params.get("record_usage") is True)


def dispatch(store: Store, principal: Principal, name: str, params: Any) -> dict[str, Any]:
    """Run one verb for `principal`: params are validated first, then authorized, then handled."""
    verb = verb_for(name)
    p = validate(verb, params if params is not None else {}, store.limits.max_content_bytes)
    if verb.right == "admin" and not principal.is_owner:
        raise denied(principal, "admin", verb.name)
    return HANDLERS[verb.name](store, principal, p)


def denied(principal: Principal, right: str, resource: str) -> Denied:
    return Denied(
        right,
        f"{principal.id} may not {right} {resource}",
        right=right,
        resource=resource,
        principal=principal.id,
        fix=FIX,
    )


def _memory(store: Store, principal: Principal, ident: str, right: str) -> int:
    """The memory's number once `principal` may `right` it; unreadable answers as absent."""
    memory = int(ident[1:])
    space = memories.space_of(store.conn, memory)
    if space is None or not principal.can("read", space, memory):
        raise NotFound("memory", f"{ident} not found", id=ident)
    if right != "read" and not principal.can(right, space, memory):
        raise denied(principal, right, f"memory:{ident}")
    return memory


def _write_space(principal: Principal, space: str) -> None:
    if not principal.can("write", space):
        raise denied(principal, "write", f"space:{space}")


def _filter(store: Store, principal: Principal, p: dict[str, Any], **kw: Any) -> Filter:
    spaces = p.get("spaces")
    for space in spaces or ():
        if not principal.can("read", space):
            raise denied(principal, "read", f"space:{space}")
    session_ids = None
    if p.get("session"):
        sid = sessions.require(store.conn, p["session"])
        session_ids = tuple(sessions.lineage(store.conn, sid)) if p.get("lineage") else (sid,)
    return Filter(
        readable=principal.scope("read"),
        spaces=tuple(spaces) if spaces is not None else None,
        kinds=tuple(p.get("kinds") or ()),
        tags=tuple(p.get("tags") or ()),
        sessions=session_ids,
        **kw,
    )


def add(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    _write_space(principal, p["space"])
    session = sessions.require(store.conn, p["session"]) if p.get("session") else None
    return memories.add(store.conn, store.limits, principal, p, session)


def get(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(store, principal, p["id"], "read")
    if p.get("revision") is not None:
        return memories.get_version(store.conn, memory, p["revision"], p["include_deleted"])
    return memories.get(store.conn, memory, p["include_deleted"])


def update(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return memories.update(store.conn, store.limits, principal, memory, p)


def delete(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return memories.delete(store.conn, store.limits, principal, memory, p["revision"])


def restore(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return memories.restore(store.conn, store.limits, principal, memory)


def history(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    return memories.history(store.conn, _memory(store, principal, p["id"], "read"))


def list_(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    flt = _filter(store, principal, p, status=p["status"], include_deleted=p["include_deleted"])
    after = int(p["after"][1:]) if p.get("after") else None
    return listing.list_memories(store.conn, flt, after, p["limit"])


def search(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    result = run_search(store.conn, p["query"], _filter(store, principal, p), p["limit"], p["mode"])
    if p["record_usage"] and result["results"]:
        _record_usage(store, principal, p["query"], result["results"])
    return result


def _record_usage(store: Store, principal: Principal, query: str, hits: list[dict[str, Any]]) -> None:
    digest = hashlib.sha256(query.encode("utf-8")).hexdigest()
    with atomic(store.conn):
        for hit in hits:
            data = {"query_sha256": digest, "hash": "sha256", "score": hit["score"], "space": hit["space"]}
            audit.append(
                store.conn, "memory.recalled", principal, space=hit["space"], memory=int(hit["id"][1:]), data=data
            )


def forget(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    for space in p["spaces"]:
        _write_space(principal, space)
    flt = _filter(store, principal, p, status=None, before=p.get("before") or None)
    chosen = listing.selection(store.conn, flt)
    if p["dry_run"]:
        return {"deleted": [{"id": memories.mid(m), "revision": r} for m, r in chosen], "failed": []}
    done: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for memory, revision in chosen:
        try:
            result = memories.delete(store.conn, store.limits, principal, memory, revision)
            done.append({"id": result["id"], "revision": result["revision"]})
        except HivememError as exc:
            failed.append({"id": memories.mid(memory), "code": exc.code})
    return {"deleted": done, "failed": failed}


def purge(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    memory = int(p["id"][1:])
    memories.purge(store.conn, principal, memory)
    store_id = str(scalar(store.conn, "SELECT value FROM meta WHERE key = 'store_id'"))
    erasure.scrub_backups(f"{store.data_dir}/backups", memory)
    erasure.scrub_exports(f"{store.data_dir}/exports", store_id, memory)
    erasure.checkpoint(store.conn)
    return {"id": p["id"]}


def space_list(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    return listing.spaces(store.conn, Filter(readable=principal.scope("read"), status=None))


def status(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    return listing.status(store.conn, store.path, store.sqlite_version)


def whoami(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    return {**principal.author(), "grants": principal.grant_list()}


def stop(store: Store, principal: Principal, p: dict[str, Any]) -> dict[str, Any]:
    return {"stopping": True}


HANDLERS: dict[str, Handler] = {
    "memory.add": add,
    "memory.get": get,
    "memory.update": update,
    "memory.delete": delete,
    "memory.restore": restore,
    "memory.history": history,
    "memory.list": list_,
    "memory.search": search,
    "memory.forget": forget,
    "memory.purge": purge,
    "space.list": space_list,
    "store.status": status,
    "daemon.stop": stop,
    "whoami": whoami,
}
