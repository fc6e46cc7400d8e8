"""dispatch(store, principal, verb, params): validate against the manifest, authorize, call the store.

Ops speaks to the Store interface (`store/base.py`) alone: it never sees a connection or SQL, so any backend
serves every verb.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from hivemem.auth import Principal, can_see_event, can_session, session_scope
from hivemem.errors import Denied, HivememError, InvalidParams, NotFound, Unsupported
from hivemem.manifest import BY_NAME, Verb
from hivemem.params import validate
from hivemem.search.query import search as run_search
from hivemem.search.recall import recall as run_recall
from hivemem.store import files, transfer_scan
from hivemem.store import transfer_check as documents
from hivemem.store.base import Store, Visible
from hivemem.store.filters import Filter

Handler = Callable[[Store, Principal, dict[str, Any]], Mapping[str, Any]]
FIX = "hivemem whoami --json  # set HIVEMEM_TOKEN to a client token with this right, or @owner"


class Stream(dict[str, Any]):
    """The reply of a verb with the `stream` trait, carrying what follows it on the connection.

    `poll(store)` returns the next objects, oldest first, each sent as one `{verb.stream: object}` line; `[]`
    means nothing for now. A `live` stream (events.follow) then waits for the next commit and polls again; any
    other stream (a future export) ends there. The daemon runs `poll` on a reader, never on the writer.
    """

    __slots__ = ("live", "poll")

    def __init__(self, ok: dict[str, Any], poll: Callable[[Store], list[dict[str, Any]]], *, live: bool) -> None:
        super().__init__(ok)
        self.poll, self.live = poll, live


def poll(store: Store, principal: Principal, stream: Stream) -> list[dict[str, Any]]:
    """A stream's next objects; a client removed or expired since is cut off, as between requests."""
    store.clients.recheck(principal)
    return stream.poll(store)


def verb_for(name: Any) -> Verb:
    verb = BY_NAME.get(name) if isinstance(name, str) else None
    if verb is None:
        raise Unsupported("verb", f"unknown verb {name!r}", verb=str(name))
    return verb


def needs_writer(name: str, params: Any) -> bool:
    """Whether a request must run on the single writer connection."""
    verb = BY_NAME.get(name) if isinstance(name, str) else None
    return verb is not None and verb.writes_with(params)


def dispatch(store: Store, principal: Principal, name: str, params: Any) -> dict[str, Any]:
    """Run one verb for `principal`: params are validated first, then authorized, then handled."""
    return run(store, principal, check(name, params, store.limits.max_content_bytes))


def check(name: str, params: Any, max_content_bytes: int) -> tuple[Verb, dict[str, Any]]:
    """The verb and its params validated against the manifest (secret scanning included).

    Needs no store, so the daemon runs it on a reader thread before a write is queued: the single
    writer never spends its time scanning text (SPEC 6.1).
    """
    verb = verb_for(name)
    return verb, validate(verb, params if params is not None else {}, max_content_bytes)


def run(store: Store, principal: Principal, checked: tuple[Verb, dict[str, Any]]) -> dict[str, Any]:
    """Authorize and handle a request whose params `check` validated: a write is one transaction, its
    authorization read included, so a verb that fails halfway leaves nothing behind.

    A read-only store cannot open a write transaction; a write there fails where it first writes, as `read_only`.
    """
    verb, p = checked
    if store.readonly or not verb.writes_with(p):
        return _authorized(store, principal, verb, p)
    with store.transaction():
        return _authorized(store, principal, verb, p)


def _authorized(store: Store, principal: Principal, verb: Verb, p: dict[str, Any]) -> dict[str, Any]:
    store.clients.recheck(principal)  # a removed or expired client is cut off mid-connection
    if verb.right == "admin" and not principal.is_owner:
        raise denied(principal, "admin", verb.name)
    result = HANDLERS[verb.name](store, principal, p)
    return result if isinstance(result, dict) else dict(result)


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
    space = store.memories.space_of(memory)
    if space is None or not principal.can("read", space, memory):
        raise NotFound("memory", f"{ident} not found")
    if right != "read" and not principal.can(right, space, memory):
        raise denied(principal, right, f"memory:{ident}")
    return memory


def _write_space(principal: Principal, space: str) -> None:
    if not principal.can("write", space):
        raise denied(principal, "write", f"space:{space}")


def _readable_spaces(principal: Principal, spaces: list[str]) -> None:
    """denied.read for the first named space the caller cannot read, before any output (SPEC 4.3)."""
    for space in spaces:
        if not principal.can("read", space):
            raise denied(principal, "read", f"space:{space}")


def _filter(store: Store, principal: Principal, p: dict[str, Any], **kw: Any) -> Filter:
    spaces = p.get("spaces")
    _readable_spaces(principal, spaces or [])
    session_ids = None
    if p.get("session"):
        see = readable_sessions(principal)
        n = store.sessions.find(p["session"], see)[0]
        session_ids = tuple(store.sessions.lineage(n, see)) if p.get("lineage") else (n,)
    return Filter(
        readable=principal.scope("read"),
        spaces=tuple(spaces) if spaces is not None else None,
        kinds=tuple(p.get("kinds") or ()),
        tags=tuple(p.get("tags") or ()),
        sessions=session_ids,
        **kw,
    )


def readable_sessions(principal: Principal) -> Visible:
    return lambda n, reporter: can_session(principal, "read", n, reporter)


def add(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    _write_space(principal, p["space"])
    session = None
    if p.get("session"):
        session = store.sessions.find(p["session"], readable_sessions(principal))[0]
    return store.memories.add(principal, p, session)


def get(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "read")
    if p.get("revision") is not None:
        return store.memories.version(memory, p["revision"], p["include_deleted"])
    out = store.memories.get(memory, p["include_deleted"])
    if "relations" in out:  # relations never cross what the caller can read (SPEC 8.4)
        out["relations"] = [r for r in out["relations"] if _can_read_live(store, principal, r)]
    return out


def _can_read_live(store: Store, principal: Principal, relation: Mapping[str, Any]) -> bool:
    """Whether a relation's other end is a live memory the caller may read."""
    memory = int((relation.get("target") or relation["source"])[1:])
    space = store.governance.live_space(memory)
    return space is not None and principal.can("read", space, memory)


def update(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return store.memories.update(principal, memory, p)


def delete(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return store.memories.delete(principal, memory, p["revision"])


def restore(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return store.memories.restore(principal, memory)


def history(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.memories.history(_memory(store, principal, p["id"], "read"))


def list_(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    flt = _filter(store, principal, p, status=p["status"], include_deleted=p["include_deleted"])
    after = int(p["after"][1:]) if p.get("after") else None
    return store.memories.page(flt, after, p["limit"])


def search(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    result = run_search(store, p["query"], _filter(store, principal, p), p["limit"], p["mode"])
    if p["record_usage"] and result["results"]:
        digest = hashlib.sha256(p["query"].encode("utf-8")).hexdigest()
        store.events.recalled(principal, digest, result["results"])
    return result


def recall(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """The envelope for `spaces`: named ones must all be readable; of the fixed read path a client filled in,
    unreadable ones are skipped (SPEC 4.3)."""
    if not p["fixed_path"]:
        _readable_spaces(principal, p["spaces"])
    path = [space for space in p["spaces"] if principal.can("read", space)]
    return run_recall(store, principal.scope("read"), path, p.get("query"), p.get("limit"), store.limits)


def forget(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    for space in p["spaces"]:
        _write_space(principal, space)
    flt = _filter(store, principal, p, status=None, before=p.get("before") or None)
    after = int(p["after"][1:]) if p.get("after") else None
    found = store.memories.selection(flt, after, p["limit"] + 1)
    chosen = found[: p["limit"]]
    page = {"next": f"m{chosen[-1][0]}" if len(found) > p["limit"] else None}
    if p["dry_run"]:
        return {"deleted": [{"id": f"m{m}", "revision": r} for m, r in chosen], "failed": [], **page}
    done: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for memory, revision in chosen:
        try:
            result = store.memories.delete(principal, memory, revision)
            done.append({"id": result["id"], "revision": result["revision"]})
        except HivememError as exc:
            failed.append({"id": f"m{memory}", "code": exc.code})
    return {"deleted": done, "failed": failed, **page}


def purge(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = int(p["id"][1:])
    store.memories.purge(principal, memory)
    store.after_commit(lambda: store.memories.erase_copies(memory))  # backups, exports and the WAL
    return {"id": p["id"]}


def capture(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    _write_space(principal, p["space"])
    session = store.sessions.find(p["session"], readable_sessions(principal))[0] if p.get("session") else None
    flt = Filter(readable=principal.scope("read"), spaces=(p["space"],))
    return store.governance.capture(principal, p, session, flt)


def confirm(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return store.governance.confirm(principal, memory, p)


def review(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    after = int(p["after"][1:]) if p.get("after") else None
    return store.governance.review(_filter(store, principal, p), after, p["limit"])


def hygiene(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """Findings about what the caller can read, from one read snapshot; nothing is written."""
    from hivemem.search.hygiene import report

    flt = _filter(store, principal, {"spaces": p.get("spaces")}, status=None)
    runtime = store.embeddings
    can_read: Callable[[str, int], bool] = lambda space, memory: principal.can("read", space, memory)  # noqa: E731
    kind = "off" if runtime is None else str(runtime.kind)
    with contextlib.ExitStack() as reading:  # one snapshot for the rows and their vectors, read in pieces
        reading.enter_context(store.search.snapshot())
        scan = store.governance.hygiene(flt)
        fetch = None if runtime is None else _vector_reader(store, str(runtime.model))
        return report(scan, can_read, fetch, unused_days=p["unused_days"], limit=p["limit"], embeddings=kind,
                      read=reading.close)  # fmt: skip


def _vector_reader(store: Store, model: str) -> Callable[[list[int]], dict[int, Any]]:
    import numpy as np

    return lambda ids: {m: np.frombuffer(blob, dtype="<f4") for m, _, blob in store.vectors.load(model, ids)}


def challenge(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    if p["outcome"] == "superseded" and not p.get("replacement"):
        raise InvalidParams("missing", "superseded needs a replacement", param="replacement")
    if p.get("replacement") and p["outcome"] != "superseded":
        raise InvalidParams("range", "replacement goes with the superseded outcome only", param="replacement")
    if p.get("replacement") == p["id"]:
        raise InvalidParams("range", "a memory cannot supersede itself", param="replacement")
    memory = _memory(store, principal, p["id"], "write")
    replacement = _memory(store, principal, p["replacement"], "read") if p.get("replacement") else None
    return store.governance.challenge(principal, memory, p, replacement)


def archive(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    return store.governance.archive(principal, memory, p["revision"])


def _relation_ends(store: Store, principal: Principal, p: dict[str, Any]) -> tuple[int, int]:
    """Write on the source's space, read on the target's (SPEC 4.3); an unreadable end answers as absent."""
    return _memory(store, principal, p["source"], "write"), _memory(store, principal, p["target"], "read")


def relate(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    source, target = _relation_ends(store, principal, p)
    return store.governance.relate(principal, source, target, p["relation"], p.get("reason"))


def unrelate(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    source, target = _relation_ends(store, principal, p)
    return store.governance.unrelate(principal, source, target, p["relation"])


def move(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    memory = _memory(store, principal, p["id"], "write")
    _write_space(principal, p["space"])
    return store.governance.move(principal, memory, p["revision"], p["space"])


def audit(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """A memory's events; a purged memory's are read by the space its events name."""
    memory = int(p["id"][1:])
    space = store.memories.space_of(memory) or store.governance.audited_space(memory)
    if space is None or not principal.can("read", space, memory):
        raise NotFound("memory", f"{p['id']} not found")
    return store.governance.audit(memory, p.get("after"), p["limit"])


def space_list(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    flt = Filter(readable=principal.scope("read"), status=None)
    return store.spaces(flt, p.get("after"), p["limit"])


def status(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """Counts of what the caller can read; only the owner also sees the store's path and size (SPEC 10)."""
    if not principal.is_owner and not any(g["right"] == "read" for g in principal.grants):
        raise denied(principal, "read", "store")
    every, numbers = session_scope(principal, "read")
    reporter = None if principal.id == "unknown" else principal.id
    return store.status(principal.scope("read"), (every, numbers, reporter), principal.is_owner)


def reindex(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """Every vector dropped; the worker, woken by this write, embeds them all again."""
    runtime = store.embeddings
    if runtime is None:
        raise Unsupported("embeddings_off", "embeddings are off: there is nothing to re-embed",
                          fix="hivemem config set --key embeddings.provider --value local")  # fmt: skip
    dropped = store.vectors.drop_all()
    store.after_commit(runtime.index.reset)
    return {"dropped": dropped, "pending": store.vectors.pending_count(), "embeddings": runtime.kind}


def whoami(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return {**principal.author(), "grants": principal.grant_list()}


def stop(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return {"stopping": True}


def client_add(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.clients.add(principal, p["name"], p["grants"], p.get("ttl"))


def client_list(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    after = int(p["after"][1:]) if p.get("after") else None
    return store.clients.page(after, p["limit"])


def client_remove(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.clients.remove(principal, p["name"])


def session_start(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    if not session_scope(principal, "write")[0]:
        raise denied(principal, "write", "session:*")
    existing = store.sessions.existing(p["harness"], p.get("harness_session"))
    if existing is not None:  # SPEC 7: a repeat returns that session, ignoring other params
        return {"session": f"s{existing}", "changed": False}
    if p.get("parent") and not p.get("relation"):
        raise InvalidParams("missing", "relation is required with parent", param="relation")
    if p.get("relation") and not p.get("parent"):
        raise InvalidParams("relation", "relation needs a parent", param="relation")
    if p.get("parent"):
        store.sessions.find(p["parent"], readable_sessions(principal))
    return store.sessions.start(principal, p)


def session_end(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    n, reporter = store.sessions.find(p["session"], readable_sessions(principal))
    if not can_session(principal, "write", n, reporter):
        raise denied(principal, "write", f"session:{p['session']}")
    return store.sessions.end(principal, n)


def session_get(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.sessions.get(p["session"], readable_sessions(principal))


def session_list(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    after = int(p["after"][1:]) if p.get("after") else None
    return store.sessions.page(p, readable_sessions(principal), after, p["limit"])


def session_chain(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    see = readable_sessions(principal)
    return store.sessions.chain(store.sessions.find(p["session"], see)[0], see)


def session_purge(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.sessions.purge(principal, int(p["session"][1:]))


def _event_filter(principal: Principal, p: dict[str, Any]) -> tuple[Callable[[dict[str, Any]], bool], dict[str, Any]]:
    for space in p.get("spaces") or ():
        if not principal.can("read", space):
            raise denied(principal, "read", f"space:{space}")
    see = readable_sessions(principal)
    keep: Callable[[dict[str, Any]], bool] = lambda e: can_see_event(principal, e, see)  # noqa: E731
    return keep, {"types": tuple(p.get("types") or ()), "spaces": tuple(p.get("spaces") or ())}


def events_list(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    keep, filters = _event_filter(principal, p)
    return store.events.page(keep, p.get("after"), p["limit"], **filters)


def events_follow(store: Store, principal: Principal, p: dict[str, Any]) -> Stream:
    keep, filters = _event_filter(principal, p)
    after = p.get("after")
    if after is None:
        after = store.events.newest()
    cursor = [after]

    def poll(reader: Store) -> list[dict[str, Any]]:
        """New readable events after the last one sent, oldest first."""
        found = reader.events.after(keep, cursor[0], 1000, **filters)
        if found:
            cursor[0] = max(e["id"] for e in found)
        return [dict(e) for e in found]

    return Stream({"following": True, "after": after}, poll, live=True)


def config_reload(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return {"reloaded": True}


def export(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """Write the export document; a caller exports only what it can read (SPEC 4.3)."""
    spaces = p.get("spaces")
    _readable_spaces(principal, spaces or [])
    dest = p.get("path") or files.default_export(store.data_dir)
    keep: Callable[[str, int], bool] = lambda space, memory: principal.can("read", space, memory)  # noqa: E731
    every = principal.is_owner and spaces is None
    return store.operations.export(principal, dest, keep, spaces, p["include_deleted"], every)


def import_(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    """Validate the whole document, check write on every target space, then plan or apply it in one transaction.

    A large document's memories are scanned for secrets while it is applied (transfer_scan, D201): any other
    error waits for the scan, so a document is refused for its own first problem before anything else."""
    text = documents.read_bytes(p["path"])
    limit = store.limits.max_content_bytes
    scan = transfer_scan.start(text, limit)
    try:
        doc = documents.document(documents.parse(text), limit, p.get("space_map") or {}, scan)
        del text
        try:
            for space in sorted({m["space"] for m in doc.memories}):
                _write_space(principal, space)
            if doc.sessions and not session_scope(principal, "write")[0]:
                raise denied(principal, "write", "session:*")
            return store.operations.import_document(principal, doc, p["dry_run"])
        except Exception:
            doc.settle()
            raise
    finally:
        if scan is not None:
            scan.close()


def check_store(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.operations.check()


def repair_fts(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    if p["apply"] and not p["confirm"]:
        raise InvalidParams("missing", "--apply rebuilds the search index: add --confirm", param="confirm")
    return store.operations.repair_fts(p["apply"])


def backup(store: Store, principal: Principal, p: dict[str, Any]) -> Mapping[str, Any]:
    return store.operations.backup(p["path"])


def init_store(store_path: str, key_path: str, url: str = "") -> dict[str, Any]:
    """`hivemem store init` (run by the CLI): create the store, or the team store's schema in the empty database
    `url` names, and the owner key, returned once (SPEC 16)."""
    from hivemem.store import init_store as init

    return dict(init(store_path, key_path, url))


def restore_store(store_path: str, source: str, keep: int, url: str = "") -> dict[str, Any]:
    """`hivemem store restore` (run by the CLI, never by the daemon): with no daemon serving the store, swap in
    a validated backup, keeping the current store in backups/, then open it and run every integrity check. A
    team store (`url`) is restored with PostgreSQL's own tools: unsupported.store_backup says how."""
    from hivemem.store import restore

    return dict(restore(store_path, source, keep, url=url))


HANDLERS: dict[str, Handler] = {
    "memory.add": add,
    "memory.get": get,
    "memory.update": update,
    "memory.delete": delete,
    "memory.restore": restore,
    "memory.history": history,
    "memory.list": list_,
    "memory.search": search,
    "memory.recall": recall,
    "memory.forget": forget,
    "memory.purge": purge,
    "memory.capture": capture,
    "memory.confirm": confirm,
    "memory.review": review,
    "memory.hygiene": hygiene,
    "memory.challenge": challenge,
    "memory.archive": archive,
    "memory.relate": relate,
    "memory.unrelate": unrelate,
    "memory.move": move,
    "memory.audit": audit,
    "space.list": space_list,
    "store.status": status,
    "daemon.stop": stop,
    "whoami": whoami,
    "client.add": client_add,
    "client.list": client_list,
    "client.remove": client_remove,
    "session.start": session_start,
    "session.end": session_end,
    "session.get": session_get,
    "session.list": session_list,
    "session.chain": session_chain,
    "session.purge": session_purge,
    "events.list": events_list,
    "events.follow": events_follow,
    "config.reload": config_reload,
    "store.export": export,
    "store.import": import_,
    "store.check": check_store,
    "store.repair_fts": repair_fts,
    "store.backup": backup,
    "embeddings.reindex": reindex,
}
