"""dispatch(store, principal, verb, params): validate against the manifest, authorize, call the store.

Ops speaks to the Store interface (`store/base.py`) alone: it never sees a connection or SQL, so any backend
serves every verb.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from hivemem import cursors
from hivemem.auth import Principal, can_see_event, can_session, session_scope
from hivemem.errors import Denied, HivememError, InvalidParams, NotFound, Unsupported
from hivemem.manifest import BY_NAME, Verb
from hivemem.params import Params, validate
from hivemem.records import (
    Added,
    BackupMade,
    Captured,
    Chain,
    Challenged,
    CheckReport,
    ClientAdded,
    ClientPage,
    ClientRemoved,
    Deleted,
    Event,
    EventPage,
    Exported,
    Forget,
    ForgetFailure,
    Forgotten,
    History,
    HygieneReport,
    Imported,
    MemoryPage,
    MemoryRead,
    Moved,
    Purged,
    Recall,
    Reindexed,
    Relating,
    Relation,
    Reloaded,
    Repair,
    Restored,
    SearchResult,
    Session,
    SessionEnded,
    SessionPage,
    SessionPurged,
    SessionStarted,
    SpacePage,
    Status,
    Stopping,
    Window,
    Written,
)
from hivemem.search.query import search as run_search
from hivemem.search.recall import recall as run_recall
from hivemem.spaces import in_team
from hivemem.store import files, transfer_scan
from hivemem.store import transfer_check as documents
from hivemem.store.base import Keep, MemoryChange, NewMemory, NewSession, SessionQuery, Store, Visible
from hivemem.store.filters import Filter
from hivemem.store.limits import Limits

if TYPE_CHECKING:
    from hivemem.search.hygiene import Fetch
    from hivemem.search.vector import Runtime

FIX = "hivemem whoami --json  # set HIVEMEM_TOKEN to a client token with this right, or @owner"


@dataclass(frozen=True, slots=True)
class Context:
    """What a handler runs against: the store, the search side's embeddings (None when they are off) and the
    store's limits. Built once per request by `context`: the one place that takes the runtime from the store's
    `embeddings`, which stays on the store for its own `status` and its readers (docs/decisions.md D370).
    """

    store: Store
    embeddings: Runtime | None
    limits: Limits


def context(store: Store) -> Context:
    runtime = store.embeddings
    if runtime is None:  # embeddings off: numpy and the vector side stay unloaded (docs/architecture.md)
        return Context(store, None, store.limits)
    from hivemem.search.vector import Runtime  # loaded already: the daemon built the runtime

    if not isinstance(runtime, Runtime):
        raise TypeError(f"the store's embeddings are a {type(runtime).__name__}, not a search runtime")
    return Context(store, runtime, store.limits)


# A handler's result is one record of hivemem.records (each handler names its own); the table holds them all.
Handler = Callable[[Context, Principal, Params], Mapping[str, object]]
Checked = tuple[Verb, Params]  # a verb and its params, validated by `check`


class Span(TypedDict):
    """The Filter members a read's time window and authors give (`_window`)."""

    since: str | None
    until: str | None
    on: str
    authors: tuple[str, ...]


class EventScope(TypedDict):
    """The event types and spaces an events.list or events.follow keeps."""

    types: tuple[str, ...]
    spaces: tuple[str, ...]


class Stream(dict[str, object]):
    """The reply of a verb with the `stream` trait, carrying what follows it on the connection.

    `poll(store)` returns the next objects, oldest first, each sent as one `{verb.stream: object}` line; `[]`
    means nothing for now. A `live` stream (events.follow) then waits for the next commit and polls again; any
    other stream (a future export) ends there. The daemon runs `poll` on a reader, never on the writer.
    """

    __slots__ = ("every", "live", "poll")

    def __init__(self, ok: Mapping[str, object], poll: Callable[[Store], list[Event]], *, live: bool,
                 every: float | None = None) -> None:  # fmt: skip
        super().__init__(ok)
        # `every`: a live stream of a store whose commits this daemon is not told of (a mounted team store) also
        # polls again after this many seconds without a commit (docs/team.md)
        self.poll, self.live, self.every = poll, live, every


def poll(store: Store, principal: Principal, stream: Stream) -> list[Event]:
    """A stream's next objects; a client removed or expired since is cut off, as between requests."""
    store.clients.recheck(principal)
    return stream.poll(store)


def verb_for(name: object) -> Verb:
    verb = BY_NAME.get(name) if isinstance(name, str) else None
    if verb is None:
        raise Unsupported("verb", f"unknown verb {name!r}", verb=str(name))
    return verb


def needs_writer(name: str, params: object) -> bool:
    """Whether a request must run on the single writer connection."""
    verb = BY_NAME.get(name) if isinstance(name, str) else None
    return verb is not None and verb.writes_with(params)


def dispatch(store: Store, principal: Principal, name: str, params: object) -> dict[str, Any]:
    """Run one verb for `principal`: params are validated first, then authorized, then handled.

    The result is a record of hivemem.records as a plain JSON object: what goes on the wire."""
    return run(store, principal, check(name, params, store.limits.max_content_bytes))


def check(name: str, params: object, max_content_bytes: int) -> Checked:
    """The verb and its params validated against the manifest (secret scanning included).

    Needs no store, so the daemon runs it on a reader thread before a write is queued: the single
    writer never spends its time scanning text (docs/protocol.md).
    """
    verb = verb_for(name)
    return verb, validate(verb, params if params is not None else {}, max_content_bytes)


def read_file(store: Store, principal: Principal, checked: Checked) -> Checked:
    """For a verb with the `reads_file` trait: authorize, then read its file (opened safely, bounded by
    `import.max_bytes`) into the checked params, so the writer that runs it never waits for a read. The daemon
    calls this on a reader; a request that did not go through it reads its file in its handler."""
    verb, p = checked
    if not verb.reads_file:
        return checked
    store.clients.recheck(principal)
    if verb.right == "admin" and not principal.is_owner:
        raise denied(principal, "admin", verb.name)
    return verb, {**p, "document": documents.read_bytes(p["path"], store.limits.import_max_bytes)}


def run(store: Store, principal: Principal, checked: Checked) -> dict[str, Any]:
    """Authorize and handle a request whose params `check` validated: a write is one transaction, its
    authorization read included, so a verb that fails halfway leaves nothing behind.

    A read-only store cannot open a write transaction; a write there fails where it first writes, as `read_only`.
    """
    verb, p = checked
    ctx = context(store)
    if store.readonly or not verb.writes_with(p):
        return _authorized(ctx, principal, verb, p)
    with store.transaction():
        return _authorized(ctx, principal, verb, p)


def _authorized(ctx: Context, principal: Principal, verb: Verb, p: Params) -> dict[str, Any]:
    ctx.store.clients.recheck(principal)  # a removed or expired client is cut off mid-connection
    if verb.right == "admin" and not principal.is_owner:
        raise denied(principal, "admin", verb.name)
    result = HANDLERS[verb.name](ctx, principal, p)
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


def _person_only(principal: Principal, p: Params) -> None:
    """`user_confirmed` says a person confirmed the memory: only the owner (a person at the CLI, or the review UI)
    sets it as a param; a client's way there is memory.confirm or a `still_valid` challenge, both audited as such
    (docs/security.md)."""
    if p.get("confidence_state") == "user_confirmed" and not principal.is_owner:
        raise denied(principal, "admin", "confidence_state:user_confirmed")


def _readable_spaces(principal: Principal, spaces: list[str]) -> None:
    """denied.read for the first named space the caller cannot read, before any output (docs/security.md)."""
    for space in spaces:
        if not principal.can("read", space):
            raise denied(principal, "read", f"space:{space}")


def _filter(store: Store, principal: Principal, p: Params, **kw: Any) -> Filter:
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


def add(ctx: Context, principal: Principal, p: Params) -> Written | Added:
    _write_space(principal, p["space"])
    _person_only(principal, p)
    session = None
    if p.get("session"):
        session = ctx.store.sessions.find(p["session"], readable_sessions(principal))[0]
    out = ctx.store.memories.add(principal, new_memory(p), session)
    if not out["changed"] and not principal.can("read", p["space"], int(out["id"][1:])):
        return {"changed": False}  # an unreadable memory's id, revision and status are not the writer's to learn
    return out


def new_memory(p: Params) -> NewMemory:
    """The memory that memory.add or memory.capture hands the store, from its validated params."""
    return NewMemory(p["space"], p["content"], kind=p.get("kind"), title=p.get("title"), tags=p.get("tags") or (),
                     source=p.get("source"), provenance=p.get("provenance"), confidence=p.get("confidence"),
                     confidence_state=p.get("confidence_state"), review_after=p.get("review_after"),
                     expires_at=p.get("expires_at"))  # fmt: skip


def memory_change(p: Params) -> MemoryChange:
    """The change that memory.update or memory.confirm hands the store: the members its params give."""
    return MemoryChange(content=p.get("content"), kind=p.get("kind"), title=p.get("title"), tags=p.get("tags"),
                        source=p.get("source"), provenance=p.get("provenance"), confidence=p.get("confidence"),
                        confidence_state=p.get("confidence_state"), review_after=p.get("review_after"),
                        expires_at=p.get("expires_at"))  # fmt: skip


def get(ctx: Context, principal: Principal, p: Params) -> MemoryRead:
    memory = _memory(ctx.store, principal, p["id"], "read")
    if p.get("revision") is not None:
        return ctx.store.memories.version(memory, p["revision"], p["include_deleted"])
    out = ctx.store.memories.get(memory, p["include_deleted"])
    if "relations" in out:  # relations never cross what the caller can read (docs/governance.md)
        out["relations"] = [r for r in out["relations"] if _can_read_live(ctx.store, principal, r)]
    return out


def _can_read_live(store: Store, principal: Principal, relation: Relation) -> bool:
    """Whether a relation's other end is a live memory the caller may read."""
    memory = int((relation.get("target") or relation["source"])[1:])
    space = store.governance.live_space(memory)
    return space is not None and principal.can("read", space, memory)


def update(ctx: Context, principal: Principal, p: Params) -> Written:
    memory = _memory(ctx.store, principal, p["id"], "write")
    _person_only(principal, p)
    return ctx.store.memories.update(principal, memory, p["revision"], memory_change(p))


def delete(ctx: Context, principal: Principal, p: Params) -> Deleted:
    memory = _memory(ctx.store, principal, p["id"], "write")
    return ctx.store.memories.delete(principal, memory, p["revision"])


def restore(ctx: Context, principal: Principal, p: Params) -> Restored:
    memory = _memory(ctx.store, principal, p["id"], "write")
    return ctx.store.memories.restore(principal, memory)


def history(ctx: Context, principal: Principal, p: Params) -> History:
    return ctx.store.memories.history(_memory(ctx.store, principal, p["id"], "read"))


def _after(p: Params) -> int | None:
    """The row number a page's `after` cursor names (a letter, then the number), or None for the first page."""
    return int(p["after"][1:]) if p.get("after") else None


def _window(p: Params) -> Span:
    """The Filter members of `since`, `until`, `by_created` and `authors` (docs/decisions.md D290); an empty
    window (`until` not after `since`) is invalid_params.range, never an empty page."""
    since, until = p.get("since"), p.get("until")
    if since is not None and until is not None and until <= since:  # both canonical UTC: text order is time order
        raise InvalidParams("range", "until must be after since", param="until", since=since, until=until)
    return {"since": since, "until": until, "on": "created" if p.get("by_created") else "updated",
            "authors": tuple(dict.fromkeys(p.get("authors") or ()))}  # fmt: skip


def window(flt: Filter) -> Window | None:
    """The absolute window a read used, for its result: {since?, until?, on}; None without one."""
    if not flt.windowed:
        return None
    if flt.since is not None and flt.until is not None:
        return {"since": flt.since, "until": flt.until, "on": flt.on}
    if flt.since is not None:
        return {"since": flt.since, "on": flt.on}
    assert flt.until is not None  # windowed
    return {"until": flt.until, "on": flt.on}


def _one_store(p: Params) -> None:
    """`store`: a daemon with a team store mounted routes by it before the verb runs (daemon/team.py); here no
    team store is mounted, so `personal` is every memory and `team` has none to give."""
    if p.get("store") == "team":
        raise InvalidParams("stores", "no team store is mounted here (config team.url)", param="store",
                            fix="leave --store out, or mount one: docs/team.md")  # fmt: skip


def list_(ctx: Context, principal: Principal, p: Params) -> MemoryPage:
    _one_store(p)
    flt = _filter(ctx.store, principal, p, status=p["status"], include_deleted=p["include_deleted"], **_window(p))
    after = _after(p)
    page = ctx.store.memories.page(flt, after, p["limit"]).copy()
    used = window(flt)
    if used:
        page["window"] = used
    return page


def search(ctx: Context, principal: Principal, p: Params) -> SearchResult:
    """Ranked hits, one page of them: `after` is the `next` of the page before (hivemem/cursors.py)."""
    _one_store(p)
    search_key = cursors.key(principal.id, p)
    shown, last = 0, None
    if p.get("after"):  # every page uses the first page's window (hivemem/cursors.py)
        cursor = cursors.decode(p["after"], search_key)
        shown, last, p = cursor.shown, int(cursor.last[1:]), {**p, "since": cursor.since, "until": cursor.until}
    flt = _filter(ctx.store, principal, p, **_window(p))
    result = run_search(ctx.store, ctx.embeddings, p["query"], flt, p["limit"], p["mode"], shown, last)
    more = result.pop("more", None)
    if more is not None:
        result["next"] = cursors.encode(search_key, cursors.Cursor(more[0], more[1], flt.since, flt.until))
    used = window(flt)
    if used:
        result["window"] = used
    if p["record_usage"] and result["results"]:
        digest = hashlib.sha256(p["query"].encode("utf-8")).hexdigest()
        ctx.store.events.recalled(principal, digest, result["results"])
    return result


def recall(ctx: Context, principal: Principal, p: Params) -> Recall:
    """The envelope for `spaces`: named ones must all be readable; of the fixed read path a client filled in,
    unreadable ones are skipped (docs/security.md)."""
    if not p["fixed_path"]:
        _readable_spaces(principal, p["spaces"])
    path = [space for space in p["spaces"] if principal.can("read", space)]
    readable = principal.scope("read")
    return run_recall(ctx.store, ctx.embeddings, readable, path, p.get("query"), p.get("limit"), ctx.limits)


def forget(ctx: Context, principal: Principal, p: Params) -> Forget:
    for space in p["spaces"]:
        _write_space(principal, space)
    flt = _filter(ctx.store, principal, p, status=None, before=p.get("before") or None)
    after = _after(p)
    found = ctx.store.memories.selection(flt, after, p["limit"] + 1)
    chosen = found[: p["limit"]]
    following = f"m{chosen[-1][0]}" if len(found) > p["limit"] else None
    if p["dry_run"]:
        return {"deleted": [{"id": f"m{m}", "revision": r} for m, r in chosen], "failed": [], "next": following}
    done: list[Forgotten] = []
    failed: list[ForgetFailure] = []
    for memory, revision in chosen:
        try:
            result = ctx.store.memories.delete(principal, memory, revision)
            done.append({"id": result["id"], "revision": result["revision"]})
        except HivememError as exc:
            failed.append({"id": f"m{memory}", "code": exc.code})
    return {"deleted": done, "failed": failed, "next": following}


def purge(ctx: Context, principal: Principal, p: Params) -> Purged:
    memory = int(p["id"][1:])
    ctx.store.memories.purge(principal, memory)
    ctx.store.after_commit(lambda: ctx.store.memories.erase_copies(memory))  # backups, exports and the WAL
    return {"id": p["id"]}


def capture(ctx: Context, principal: Principal, p: Params) -> Captured:
    _write_space(principal, p["space"])
    session = ctx.store.sessions.find(p["session"], readable_sessions(principal))[0] if p.get("session") else None
    flt = Filter(readable=principal.scope("read"), spaces=(p["space"],))
    out = ctx.store.governance.capture(principal, new_memory(p), session, flt)
    duplicate = out.get("duplicate_of")
    if duplicate is not None and not principal.can("read", p["space"], int(duplicate[1:])):
        return {"changed": False, "related": [], "exhaustive": True}  # nothing about an unreadable memory
    return out


def confirm(ctx: Context, principal: Principal, p: Params) -> Written:
    memory = _memory(ctx.store, principal, p["id"], "write")
    return ctx.store.governance.confirm(principal, memory, p["revision"], memory_change(p))


def review(ctx: Context, principal: Principal, p: Params) -> MemoryPage:
    after = _after(p)
    return ctx.store.governance.review(_filter(ctx.store, principal, p), after, p["limit"])


def hygiene(ctx: Context, principal: Principal, p: Params) -> HygieneReport:
    """Findings about what the caller can read, from one read snapshot; nothing is written."""
    from hivemem.search.hygiene import report

    flt = _filter(ctx.store, principal, {"spaces": p.get("spaces")}, status=None)
    runtime = ctx.embeddings
    can_read: Callable[[str, int], bool] = lambda space, memory: principal.can("read", space, memory)  # noqa: E731
    kind = "off" if runtime is None else str(runtime.kind)
    with contextlib.ExitStack() as reading:  # one snapshot for the rows and their vectors, read in pieces
        reading.enter_context(ctx.store.search.snapshot())
        scan = ctx.store.governance.hygiene(flt)
        fetch = None if runtime is None else _vector_reader(ctx.store, str(runtime.model))
        return report(scan, can_read, fetch, unused_days=p["unused_days"], limit=p["limit"], embeddings=kind,
                      read=reading.close)  # fmt: skip


def _vector_reader(store: Store, model: str) -> Fetch:
    import numpy as np

    return lambda ids: {m: np.frombuffer(blob, dtype="<f4") for m, _, blob in store.vectors.load(model, ids)}


def challenge(ctx: Context, principal: Principal, p: Params) -> Challenged:
    if p["outcome"] == "superseded" and not p.get("replacement"):
        raise InvalidParams("missing", "superseded needs a replacement", param="replacement")
    if p.get("replacement") and p["outcome"] != "superseded":
        raise InvalidParams("range", "replacement goes with the superseded outcome only", param="replacement")
    if p.get("replacement") == p["id"]:
        raise InvalidParams("range", "a memory cannot supersede itself", param="replacement")
    memory = _memory(ctx.store, principal, p["id"], "write")
    replacement = _memory(ctx.store, principal, p["replacement"], "read") if p.get("replacement") else None
    return ctx.store.governance.challenge(principal, memory, p["revision"], p["outcome"], p.get("reason"),
                                          p["confirm"], replacement)  # fmt: skip


def archive(ctx: Context, principal: Principal, p: Params) -> Restored:
    memory = _memory(ctx.store, principal, p["id"], "write")
    return ctx.store.governance.archive(principal, memory, p["revision"])


def _relation_ends(store: Store, principal: Principal, p: Params) -> tuple[int, int]:
    """Write on the source's space, read on the target's (docs/security.md); an unreadable end answers as absent."""
    return _memory(store, principal, p["source"], "write"), _memory(store, principal, p["target"], "read")


def relate(ctx: Context, principal: Principal, p: Params) -> Relating:
    source, target = _relation_ends(ctx.store, principal, p)
    return ctx.store.governance.relate(principal, source, target, p["relation"], p.get("reason"))


def unrelate(ctx: Context, principal: Principal, p: Params) -> Relating:
    source, target = _relation_ends(ctx.store, principal, p)
    return ctx.store.governance.unrelate(principal, source, target, p["relation"])


def move(ctx: Context, principal: Principal, p: Params) -> Moved:
    memory = _memory(ctx.store, principal, p["id"], "write")
    _write_space(principal, p["space"])
    return ctx.store.governance.move(principal, memory, p["revision"], p["space"])


def audit(ctx: Context, principal: Principal, p: Params) -> EventPage:
    """A memory's events; a purged memory's are read by the space its events name."""
    memory = int(p["id"][1:])
    space = ctx.store.memories.space_of(memory) or ctx.store.governance.audited_space(memory)
    if space is None or not principal.can("read", space, memory):
        raise NotFound("memory", f"{p['id']} not found")
    return ctx.store.governance.audit(memory, p.get("after"), p["limit"])


def space_list(ctx: Context, principal: Principal, p: Params) -> SpacePage:
    flt = Filter(readable=principal.scope("read"), status=None)
    return ctx.store.spaces(flt, p.get("after"), p["limit"])


def status(ctx: Context, principal: Principal, p: Params) -> Status:
    """Counts of what the caller can read; only the owner also sees the store's path and size (docs/verbs.md)."""
    if not principal.is_owner and not any(g["right"] == "read" for g in principal.grants):
        raise denied(principal, "read", "store")
    every, numbers = session_scope(principal, "read")
    reporter = None if principal.id == "unknown" else principal.id
    return ctx.store.status(principal.scope("read"), (every, numbers, reporter), principal.is_owner)


def reindex(ctx: Context, principal: Principal, p: Params) -> Reindexed:
    """Every vector dropped; the worker, woken by this write, embeds them all again."""
    runtime = ctx.embeddings
    if runtime is None:
        raise Unsupported("embeddings_off", "embeddings are off: there is nothing to re-embed",
                          fix="hivemem config set --key embeddings.provider --value local")  # fmt: skip
    dropped = ctx.store.vectors.drop_all()
    ctx.store.after_commit(runtime.index.reset)
    return {"dropped": dropped, "pending": ctx.store.vectors.pending_count(), "embeddings": runtime.kind}


def whoami(ctx: Context, principal: Principal, p: Params) -> dict[str, object]:
    return {**principal.author(), "grants": principal.grant_list()}


def stop(ctx: Context, principal: Principal, p: Params) -> Stopping:
    return {"stopping": True}


def client_add(ctx: Context, principal: Principal, p: Params) -> ClientAdded:
    return ctx.store.clients.add(principal, p["name"], p["grants"], p.get("ttl"))


def client_list(ctx: Context, principal: Principal, p: Params) -> ClientPage:
    after = _after(p)
    return ctx.store.clients.page(after, p["limit"])


def client_remove(ctx: Context, principal: Principal, p: Params) -> ClientRemoved:
    return ctx.store.clients.remove(principal, p["name"])


def session_start(ctx: Context, principal: Principal, p: Params) -> SessionStarted:
    if not session_scope(principal, "write")[0]:
        raise denied(principal, "write", "session:*")
    existing = ctx.store.sessions.existing(p["harness"], p.get("harness_session"))
    if existing is not None:  # docs/verbs.md: a repeat returns that session, ignoring other params
        return {"session": f"s{existing}", "changed": False}
    if p.get("parent") and not p.get("relation"):
        raise InvalidParams("missing", "relation is required with parent", param="relation")
    if p.get("relation") and not p.get("parent"):
        raise InvalidParams("relation", "relation needs a parent", param="relation")
    if p.get("parent"):
        ctx.store.sessions.find(p["parent"], readable_sessions(principal))
    new = NewSession(p["harness"], p.get("harness_session"), p.get("parent"), p.get("relation"), p.get("cwd"))
    return ctx.store.sessions.start(principal, new)


def session_end(ctx: Context, principal: Principal, p: Params) -> SessionEnded:
    n, reporter = ctx.store.sessions.find(p["session"], readable_sessions(principal))
    if not can_session(principal, "write", n, reporter):
        raise denied(principal, "write", f"session:{p['session']}")
    return ctx.store.sessions.end(principal, n)


def session_get(ctx: Context, principal: Principal, p: Params) -> Session:
    return ctx.store.sessions.get(p["session"], readable_sessions(principal))


def session_list(ctx: Context, principal: Principal, p: Params) -> SessionPage:
    after = _after(p)
    query = SessionQuery(p.get("harness"), p.get("harness_session"), p.get("parent"))
    return ctx.store.sessions.page(query, readable_sessions(principal), after, p["limit"])


def session_chain(ctx: Context, principal: Principal, p: Params) -> Chain:
    see = readable_sessions(principal)
    found = ctx.store.sessions.chain(ctx.store.sessions.find(p["session"], see)[0], see)
    return {"chain": found["chain"], "truncated": found["truncated"]}


def session_purge(ctx: Context, principal: Principal, p: Params) -> SessionPurged:
    return ctx.store.sessions.purge(principal, int(p["session"][1:]))


def _event_filter(principal: Principal, p: Params) -> tuple[Keep, EventScope]:
    for space in p.get("spaces") or ():
        if not principal.can("read", space):
            raise denied(principal, "read", f"space:{space}")
    see = readable_sessions(principal)
    keep: Keep = lambda e: can_see_event(principal, e, see)  # noqa: E731
    return keep, {"types": tuple(p.get("types") or ()), "spaces": tuple(p.get("spaces") or ())}


def events_list(ctx: Context, principal: Principal, p: Params) -> EventPage:
    keep, filters = _event_filter(principal, p)
    return ctx.store.events.page(keep, p.get("after"), p["limit"], **filters)


def events_follow(ctx: Context, principal: Principal, p: Params) -> Stream:
    keep, filters = _event_filter(principal, p)
    after = p.get("after")
    if after is None:
        after = ctx.store.events.newest()
    cursor = [after]

    def poll(reader: Store) -> list[Event]:
        """New readable events after the last one sent, oldest first."""
        found = reader.events.after(keep, cursor[0], 1000, **filters)
        if found:
            cursor[0] = max(e["id"] for e in found)
        return [e.copy() for e in found]

    return Stream({"following": True, "after": after}, poll, live=True)


def config_reload(ctx: Context, principal: Principal, p: Params) -> Reloaded:
    return {"reloaded": True}


def export(ctx: Context, principal: Principal, p: Params) -> Exported:
    """Write the export document; a caller exports only what it can read (docs/security.md)."""
    if p.get("path") and not principal.is_owner:  # only the owner names a file (docs/security.md)
        raise denied(principal, "admin", "path")
    spaces = p.get("spaces")
    _readable_spaces(principal, spaces or [])
    dest = p.get("path") or files.default_export(ctx.store.data_dir)
    keep: Callable[[str, int], bool] = lambda space, memory: principal.can("read", space, memory)  # noqa: E731
    every = principal.is_owner and spaces is None
    sessions = None if every else readable_sessions(principal)
    return ctx.store.operations.export(principal, dest, keep, spaces, p["include_deleted"], sessions)


def import_(ctx: Context, principal: Principal, p: Params) -> Imported:
    """Validate the whole document, check write on every target space, then plan or apply it in one transaction.

    A large document's memories are scanned for secrets while it is applied (transfer_scan, D201): any other
    error waits for the scan, so a document is refused for its own first problem before anything else."""
    text = p["document"] if "document" in p else documents.read_bytes(p["path"], ctx.limits.import_max_bytes)
    limit = ctx.limits.max_content_bytes
    scan = transfer_scan.start(text, limit)
    try:
        doc = documents.document(documents.parse(text), limit, p.get("space_map") or {}, scan)
        del text
        try:
            for space in sorted({m["space"] for m in doc.memories}):
                _write_space(principal, space)
                if in_team(space, ctx.limits.elsewhere):  # a space never lives in both stores (docs/team.md)
                    raise InvalidParams("stores", f"space {space!r} lives in the team store mounted beside this one; "
                                        "this import writes to the personal store", param="space_map",
                                        fix="map it to a personal space with --space-map, or leave it out")  # fmt: skip
            if doc.sessions and not session_scope(principal, "write")[0]:
                raise denied(principal, "write", "session:*")
            return ctx.store.operations.import_document(principal, doc, p["dry_run"])
        except Exception:
            doc.settle()
            raise
    finally:
        if scan is not None:
            scan.close()


def check_store(ctx: Context, principal: Principal, p: Params) -> CheckReport:
    return ctx.store.operations.check()


def repair_fts(ctx: Context, principal: Principal, p: Params) -> Repair:
    if p["apply"] and not p["confirm"]:
        raise InvalidParams("missing", "--apply rebuilds the search index: add --confirm", param="confirm")
    return ctx.store.operations.repair_fts(p["apply"])


def backup(ctx: Context, principal: Principal, p: Params) -> BackupMade:
    return ctx.store.operations.backup(p["path"])


def init_store(store_path: str, key_path: str, url: str = "", runtime_role: str | None = None) -> dict[str, Any]:
    """`hivemem store init` (run by the CLI): create the store, or the team store's schema in the empty database
    `url` names, and the owner key, returned once (docs/team.md); on a team store, `runtime_role` gets exactly the
    rights the verbs need (docs/team.md)."""
    from hivemem.store import init_store as init

    return dict(init(store_path, key_path, url, runtime_role))


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
