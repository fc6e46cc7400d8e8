"""A team store mounted beside the personal store (docs/team.md, "A personal store and a team store together").

The daemon keeps serving its personal store as before; with config `team.url` set it also holds a `Team`: the
routing of each request (`plan`), the calls on the team store (bounded by `team.timeout_ms`, on a few threads of
their own) and the merge of the two parts of a read. With `team.url` empty none of this runs (D390).

Routing (D390): a write to a space matching `team.spaces` goes to the team store, every other write stays
personal; `user` and `project/...` never leave the personal store. The team store's memory ids travel qualified,
`t:m12`, and a verb given one runs there. memory.search and memory.list with no spaces, or with spaces of both
stores, and memory.recall query both at once and merge: project, user, the personal store's other spaces, then
the team's, each in its store's own order; every hit and record says which `store` it came from.

Identity: on the team store a request acts with the team client token this person saved (`hivemem team join`),
and only within what the connection's own grants allow in that space; the personal owner key grants nothing there.

Failure (D391, D392): a call that has no answer within `team.timeout_ms` is given up: a read answers with the
personal part and `unavailable: ["team"]`, anything else fails with `unavailable.team_store`. The call's
connection is then shut down and its transaction can no longer commit: the statement guard refuses every
statement after the deadline, its COMMIT included. Only a COMMIT already sent when the deadline passed has an
outcome nobody here can know; the error says so (`data.outcome = "unknown"`).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from hivemem import credentials, libpq, ops
from hivemem.auth import Principal
from hivemem.config import Config
from hivemem.daemon.lifecycle import Log
from hivemem.errors import Denied, HivememError, InvalidParams, Unavailable
from hivemem.manifest import BY_NAME
from hivemem.render import Bounds, render
from hivemem.search.recall import select
from hivemem.store import Store, open_store
from hivemem.store.limits import Limits

PREFIX = "t:"
PERSONAL, TEAM, BOTH = "personal", "team", "both"
WORKERS = 4  # threads that may wait on the team store at once; a call finding none free is unavailable at once
PRINCIPAL_SECONDS = 10.0  # how long the team token's principal is trusted before it is looked up again
ID_PARAMS = ("id", "source", "target", "replacement")
MEMORY_ID = re.compile(r"^m[1-9][0-9]{0,17}$")
NEVER_TEAM = re.compile(r"^(user|project(/.*)?)$")
# Verbs of other families (sessions, events, clients, the store's own operations) stay personal for now (docs/team.md).
ROUTED = ("memory.",)
# A hook waits 1.5 s for its recall (docs/hooks.md): the team's part of a recall is given up sooner, so the hook
# still shows the personal part and says the team store was unavailable.
RECALL_MS = 1000
UNAVAILABLE_LINE = "hivemem recall: the team store was unavailable; only memories of the personal store are shown."
T = TypeVar("T")


def _mount(verb: str) -> str:
    """The verb's `mount` trait (hivemem/manifest.py): how it spans the two stores; "" for an unknown verb."""
    found = BY_NAME.get(verb)
    return found.mount if found else ""


def _listed(verb: str) -> str:
    """The member of a merged read's result that lists its memories: `memories` (a page) or `results` (hits)."""
    return "memories" if "memories" in BY_NAME[verb].result.__annotations__ else "results"


def matches(space: str, patterns: list[str]) -> bool:
    """Whether `space` lives in the team store: it matches a `team.spaces` pattern and is not user or project."""
    if NEVER_TEAM.match(space):
        return False
    return any(space == p or (p.endswith("/*") and space.startswith(p[:-1])) for p in patterns)


@dataclass
class Plan:
    """Where a request runs: `personal`, `team` or `both`, with the params each store gets."""

    where: str
    personal: Any = None
    team: Any = None


def plan(verb: str, params: object, patterns: list[str]) -> Plan:
    """The route of one request (D390). Params that are not an object, or a verb outside memory.*, stay personal
    as they came (validation then says what is wrong)."""
    if not isinstance(params, dict) or not verb.startswith(ROUTED):
        return Plan(PERSONAL, params)
    ids = {k: v for k, v in params.items() if k in ID_PARAMS and isinstance(v, str) and MEMORY_ID.match(_bare(v))}
    if _mount(verb) != "pair":
        ids.pop("source", None)  # elsewhere `source` is free text
    team_ids = {k for k, v in ids.items() if v.startswith(PREFIX)}
    space = params.get("space")
    if team_ids:
        if len(team_ids) != len(ids):
            raise InvalidParams("stores", "one request takes memories of one store: these ids name both the personal "
                                "and the team store", param=sorted(ids)[0])  # fmt: skip
        if isinstance(space, str) and not matches(space, patterns):
            raise _across(space)
        return Plan(TEAM, team=_strip(params, team_ids))
    if isinstance(space, str):
        if not matches(space, patterns):
            return Plan(PERSONAL, params)
        if ids:
            raise _across(space)  # memory.move of a personal memory into a team space
        return Plan(TEAM, team=params)
    return _unnamed(verb, params, patterns)


def _unnamed(verb: str, params: dict[str, Any], patterns: list[str]) -> Plan:
    """The route of a request that names no memory and no space: by `store`, a team page's cursor, or spaces."""
    if _mount(verb) == "merged" and params.get("store") in (PERSONAL, TEAM):
        return _one_store(params, patterns)
    after = params.get("after")
    if isinstance(after, str) and after.startswith(PREFIX):
        return Plan(TEAM, team={**params, "after": after[len(PREFIX) :]})
    return _by_spaces(verb, params, patterns, after is None)


def _one_store(params: dict[str, Any], patterns: list[str]) -> Plan:
    """A merged read asked for one store (`store`, D399): it runs there alone, with its paging there."""
    rest = {k: v for k, v in params.items() if k != "store"}
    if params["store"] == PERSONAL:
        return Plan(PERSONAL, rest)
    after = rest.get("after")
    if isinstance(after, str):
        if not after.startswith(PREFIX):
            raise InvalidParams("stores", "this page continues the personal store: pass store personal with it, or "
                                "leave store out", param="after")  # fmt: skip
        rest["after"] = after[len(PREFIX) :]
    spaces = rest.get("spaces")
    if isinstance(spaces, list) and not all(isinstance(s, str) and matches(s, patterns) for s in spaces):
        raise InvalidParams("stores", f"store team lists only spaces of team.spaces ({', '.join(patterns)})",
                            param="spaces")  # fmt: skip
    return Plan(TEAM, team=rest)


def _by_spaces(verb: str, params: dict[str, Any], patterns: list[str], first_page: bool) -> Plan:
    """The route of a request by the spaces it names: both stores for a merged read of every space or of spaces
    of both, else the one store they live in."""
    spaces = params.get("spaces")
    if spaces is not None and not (isinstance(spaces, list) and all(isinstance(s, str) for s in spaces)):
        return Plan(PERSONAL, params)
    merged = _mount(verb) == "merged" and first_page
    if spaces is None:
        return Plan(BOTH, params, params) if merged else Plan(PERSONAL, params)
    team = [s for s in spaces if matches(s, patterns)]
    personal = [s for s in spaces if not matches(s, patterns)]
    if not team:
        return Plan(PERSONAL, params)
    if not personal:
        return Plan(TEAM, team=params)
    if merged:
        return Plan(BOTH, {**params, "spaces": personal}, {**params, "spaces": team})
    raise InvalidParams("stores", f"{verb} runs on one store at a time: name only personal spaces or only "
                        f"spaces of team.spaces ({', '.join(patterns)})", param="spaces")  # fmt: skip


def _bare(value: str) -> str:
    return value[len(PREFIX) :] if value.startswith(PREFIX) else value


def _strip(params: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {k: (_bare(v) if k in names else v) for k, v in params.items()}


def _across(space: str) -> InvalidParams:
    return InvalidParams("stores", f"space {space!r} lives in the other store; moving a memory between the personal "
                         "and the team store is not supported yet", param="space",
                         fix="add it in the target space, then delete the original")  # fmt: skip


def qualify(result: dict[str, Any], verb: str) -> dict[str, Any]:
    """A team store's result with its memory ids as `t:m<N>`, its listed memories marked `store: team`."""
    out = dict(result)
    for key in ("id", "duplicate_of", "replacement"):
        if isinstance(out.get(key), str) and MEMORY_ID.match(out[key]):
            out[key] = PREFIX + out[key]
    for key in ("source", "target"):
        if _mount(verb) == "pair" and isinstance(out.get(key), str):
            out[key] = PREFIX + out[key]
    if isinstance(out.get("relations"), list):
        out["relations"] = [_relation(r) for r in out["relations"]]
    for key in ("results", "memories"):
        if isinstance(out.get(key), list):
            out[key] = [{**qualify(item, ""), "store": TEAM} for item in out[key]]
    if isinstance(out.get("next"), str):
        out["next"] = PREFIX + out["next"]
    return out


def _relation(relation: dict[str, Any]) -> dict[str, Any]:
    return {k: (PREFIX + v if k in ("source", "target") and isinstance(v, str) else v) for k, v in relation.items()}


def personal(result: dict[str, Any]) -> dict[str, Any]:
    """A personal store's read with its listed memories marked `store: personal` (only with a team store mounted)."""
    out = dict(result)
    for key in ("results", "memories"):
        if isinstance(out.get(key), list):
            out[key] = [{**item, "store": PERSONAL} for item in out[key]]
    return out


def scope(item: dict[str, Any]) -> int:
    """The scope order of a hit (docs/team.md): project, user, the personal store's other spaces, the team's."""
    if item.get("store") == TEAM:
        return 3
    space = str(item.get("space", ""))
    return 0 if space.startswith("project/") else 1 if space == "user" else 2


def merge(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, limit: int, key: str) -> dict[str, Any]:
    """The two parts of a read as one: in scope order, each store's order kept inside a group, at most `limit`.
    The personal part's other members (mode, window, next) are the result's; `next` continues the personal store."""
    base = dict(mine) if mine is not None else {k: v for k, v in (theirs or {}).items() if k != "next"}
    items = [*(mine or {}).get(key, []), *(theirs or {}).get(key, [])]
    base[key] = sorted(items, key=scope)[:limit]
    if key == "memories" and "next" not in base:
        base["next"] = None
    return base


def unavailable(verb: str, params: Any) -> dict[str, Any]:
    """The empty result of a read whose only part, the team store's, did not answer."""
    if _listed(verb) == "memories":
        return {"memories": [], "next": None, "unavailable": [TEAM]}
    return {"mode": params.get("mode", "auto") if isinstance(params, dict) else "auto", "results": [],
            "unavailable": [TEAM]}  # fmt: skip


class Gate:
    """One call's deadline, as its connection's statement guard sees it (D391)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.lock = threading.Lock()
        self.abandoned = False
        self.commit_sent = False

    def __call__(self, sql: str) -> None:
        if sql == "ROLLBACK":
            return
        with self.lock:
            if not self.abandoned and time.monotonic() > self.deadline:
                self.abandoned = True
            if self.abandoned:
                raise Unavailable("team_store", "the team store did not answer within team.timeout_ms; nothing was "
                                  "written", outcome="not_written")  # fmt: skip
            if sql == "COMMIT":
                self.commit_sent = True

    def abandon(self) -> bool:
        """Give the call up; True when its COMMIT had already been sent (its outcome is unknown)."""
        with self.lock:
            self.abandoned = True
            return self.commit_sent


@dataclass
class Worker:
    """What one team thread holds: its store (opened on first use, again after a failure)."""

    store: Store | None = None


class Team:
    """The mounted team store: its route, its calls, its merges."""

    def __init__(self, config: Config, limits: Limits, data_dir: str, log: Log) -> None:
        self.timeout_ms = int(config["team.timeout_ms"])
        self.url = libpq.bounded(str(config["team.url"]), self.timeout_ms)
        self.server = libpq.without_password(str(config["team.url"]))  # where it is, as status shows it
        self.patterns = list(config["team.spaces"])
        self.limits = limits
        self.data_dir = data_dir
        self.log = log
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="team")
        self.free = threading.BoundedSemaphore(WORKERS)
        self._local = threading.local()
        self._stores: list[Store] = []
        self._principal: tuple[str, float, Principal] | None = None
        self._lock = threading.Lock()

    def plan(self, verb: str, params: object) -> Plan:
        return plan(verb, params, self.patterns)

    async def call(self, who: Principal, verb: str, params: object) -> dict[str, Any]:
        """Run one verb on the team store within team.timeout_ms (on a team thread; the event loop only waits),
        its result qualified; unavailable.team_store when it does not answer in time."""

        def work(store: Store, principal: Principal) -> dict[str, Any]:
            return self._authorized(store, who, principal, verb, params)

        return qualify(await self.apply(work, verb, self.timeout_ms), verb)

    async def apply(self, work: Callable[[Store, Principal], T], what: str, budget_ms: int) -> T:
        """`work(store, principal)` on a team thread with the team token's principal, given up after `budget_ms`."""
        if not self.free.acquire(blocking=False):
            raise Unavailable("team_store", "the team store is not answering: every team connection is still "
                              "waiting on it", outcome="not_written")  # fmt: skip
        deadline = time.monotonic() + budget_ms / 1000
        gate = Gate(deadline)
        holder: list[Worker] = []
        try:
            job: Future[T] = self.pool.submit(self._run, gate, holder, work)
        except RuntimeError:
            self.free.release()
            raise Unavailable("team_store", "the daemon is stopping", outcome="not_written") from None
        job.add_done_callback(lambda _: self.free.release())
        try:
            waited = asyncio.shield(asyncio.wrap_future(job))
            return await asyncio.wait_for(waited, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            unknown = gate.abandon()
            if holder:
                self._interrupt(holder[0])
            self.log.write(f"team store: {what} given up after {budget_ms} ms")
            raise self._timed_out(unknown) from None

    def _timed_out(self, unknown: bool) -> Unavailable:
        if unknown:
            return Unavailable("team_store", "the team store did not confirm this write within team.timeout_ms after "
                               "its commit was sent: it may or may not have been written", outcome="unknown",
                               fix="read it back (memory get or search) before writing it again")  # fmt: skip
        return Unavailable("team_store", "the team store did not answer within team.timeout_ms; nothing was written",
                           outcome="not_written", fix="check that the server at team.url answers; retry")  # fmt: skip

    def _interrupt(self, worker: Worker) -> None:
        store = worker.store
        conn = getattr(store, "conn", None)
        interrupt: Callable[[], None] | None = getattr(conn, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def _run(self, gate: Gate, holder: list[Worker], work: Callable[[Store, Principal], T]) -> T:
        worker: Worker | None = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = Worker()
        holder.append(worker)
        try:
            store = self._store(worker)
            conn = getattr(store, "conn", None)
            if conn is not None:
                conn.guard = gate
            gate("-- begin")  # given up while the store opened: nothing more is sent
            try:
                return work(store, self._team_principal(store))
            finally:
                if conn is not None:
                    conn.guard = None
        except Unavailable as exc:
            lost = exc.code in ("unavailable.store_busy", "unavailable.not_running")  # the server is gone or stalled
            if lost or gate.abandoned:  # a connection given up on may be half shut: the next call opens another
                self._drop(worker)
            if lost:
                raise self._timed_out(gate.abandon()) from None
            raise

    def _authorized(self, store: Store, who: Principal, principal: Principal, verb: str,
                    params: object) -> dict[str, Any]:  # fmt: skip
        """The verb for the team token's principal, within what the connection's own grants allow (docs/team.md)."""
        checked = ops.check(verb, params, store.limits.max_content_bytes)
        p = checked[1]
        right = checked[0].right if checked[0].right in ("read", "write") else "admin"
        spaces = [p["space"]] if isinstance(p.get("space"), str) else list(p.get("spaces") or [])
        if not spaces and isinstance(p.get("id"), str) and not who.is_owner:
            read = ops.run(store, principal, ops.check("memory.get", {"id": p["id"]}, store.limits.max_content_bytes))
            spaces = [str(read["space"])]
        for space in spaces:
            if not who.can(right, space) if right != "admin" else not who.is_owner:
                raise Denied(right, f"this connection may not {right} in {space!r}", space=space)
        result = ops.run(store, principal, checked)
        if _mount(verb) == "merged" and not who.is_owner:
            for key in ("results", "memories"):
                if isinstance(result.get(key), list):
                    result = {**result, key: [m for m in result[key] if who.can("read", str(m.get("space")))]}
        if _mount(verb) == "merged" and not p.get("spaces"):
            for key in ("results", "memories"):
                if isinstance(result.get(key), list):
                    result = {**result, key: [m for m in result[key] if matches(str(m.get("space")), self.patterns)]}
        return result

    def _store(self, worker: Worker) -> Store:
        if worker.store is None:
            path = os.path.join(self.data_dir, "store")  # its directory holds this machine's exports of the team store
            worker.store = open_store(path, self.limits, url=self.url, timeout_ms=self.timeout_ms)
            with self._lock:
                self._stores.append(worker.store)
        return worker.store

    def _drop(self, worker: Worker) -> None:
        """Forget a store whose server went away: the next call on this thread opens a new one."""
        store, worker.store = worker.store, None
        if store is not None:
            with self._lock:
                if store in self._stores:
                    self._stores.remove(store)
            try:
                store.close()
            except (HivememError, OSError) as exc:
                self.log.write(f"team store: closing a lost connection: {exc!r}")

    def _team_principal(self, store: Store) -> Principal:
        token = credentials.read_team()
        now = time.monotonic()
        cached = self._principal
        if cached is not None and cached[0] == token and now - cached[1] < PRINCIPAL_SECONDS:
            return cached[2]
        # the personal owner key grants nothing here: no key is accepted as the team's owner through this daemon
        principal = store.clients.authenticate(token, "", [])
        self._principal = (token, now, principal)
        return principal

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            stores, self._stores = self._stores, []
        for store in stores:
            try:
                store.close()
            except (HivememError, OSError) as exc:
                self.log.write(f"team store: closing: {exc!r}")


Personal = Callable[[Principal, str, object, int, Any], Awaitable[dict[str, Any]]]
Selected = tuple[list[dict[str, Any]], int, Bounds, dict[str, Any]]
Reader = Callable[[Callable[[Store], Selected]], Awaitable[Selected]]


async def federated(team: Team, mine: Personal, reader: Reader, who: Principal, verb: str, params: object,
                    size: int, listener: Any) -> dict[str, Any] | None:  # fmt: skip
    """A request the mounted team store takes part in, answered; None for one the personal store alone serves as
    it always has (the daemon then runs it itself)."""
    if _mount(verb) == "recall":
        return await _recall(team, reader, who, params)
    if _mount(verb) == "beside":
        return await _beside(team, mine, who, verb, params, size, listener)
    route = team.plan(verb, params)
    if route.where == PERSONAL:
        if _mount(verb) != "merged":
            return None
        return personal(await mine(who, verb, route.personal, size, listener))
    if route.where == TEAM:
        return await _team_only(team, who, verb, params, route.team)
    own = asyncio.ensure_future(mine(who, verb, route.personal, size, listener))
    theirs: dict[str, Any] | None = None
    missing = False
    try:
        theirs = await team.call(who, verb, route.team)
    except HivememError as exc:  # the personal part still answers whole (docs/team.md)
        missing = True
        if exc.code != "unavailable.team_store":
            team.log.write(f"team store: {verb}: {exc.code}")
    result = merge(personal(await own), theirs, _limit(verb, params), _listed(verb))
    if missing:
        result["unavailable"] = [TEAM]
    return result


async def _beside(team: Team, mine: Personal, who: Principal, verb: str, params: object, size: int,
                  listener: Any) -> dict[str, Any]:  # fmt: skip
    """A verb each store answers for itself (store.status, D398): the personal store's answer as it always is,
    and for the owner of this daemon the team store's as the team token sees it under `team`, with where it is
    (team.url without its password) and the spaces that live there; `unavailable: ["team"]` when it did not answer
    in time. Another connection's grants are the personal store's: it gets the personal answer alone."""
    own = asyncio.ensure_future(mine(who, verb, params, size, listener))
    if not who.is_owner:
        return await own

    def theirs(store: Store, principal: Principal) -> dict[str, Any]:
        return ops.run(store, principal, ops.check(verb, params, store.limits.max_content_bytes))

    found: dict[str, Any] | None = None
    try:
        found = await team.apply(theirs, verb, team.timeout_ms)
    except HivememError as exc:  # the personal part still answers whole (docs/team.md)
        if exc.code != "unavailable.team_store":
            team.log.write(f"team store: {verb}: {exc.code}")
    result = dict(await own)
    if found is None:
        result["unavailable"] = [TEAM]
    else:
        result["team"] = {**found, "server": team.server, "spaces": list(team.patterns)}
    return result


async def _team_only(team: Team, who: Principal, verb: str, params: object, theirs: Any) -> dict[str, Any]:
    """A request routed to the team store alone; a merged read of it that gets no answer in time is empty and
    says `unavailable: ["team"]`."""
    try:
        return await team.call(who, verb, theirs)
    except Unavailable as exc:
        if _mount(verb) == "merged" and exc.code == "unavailable.team_store":
            return unavailable(verb, params)
        raise


def _limit(verb: str, params: Any) -> int:
    given = params.get("limit") if isinstance(params, dict) else None
    if isinstance(given, int):
        return given
    found = next((p.default for p in ops.verb_for(verb).params if p.name == "limit"), None)
    return int(found) if isinstance(found, int) else 20


async def _recall(team: Team, reader: Reader, who: Principal, params: object) -> dict[str, Any]:
    """memory.recall over both stores: each selects its memories of the read path, the personal store's first, and
    one envelope renders them all, each record saying its `store` (docs/team.md)."""

    def mine(store: Store) -> Selected:
        p = ops.check("memory.recall", params, store.limits.max_content_bytes)[1]
        if not p["fixed_path"]:
            for space in p["spaces"]:
                if not who.can("read", space):
                    raise ops.denied(who, "read", f"space:{space}")
        path = tuple(dict.fromkeys(s for s in p["spaces"] if not matches(s, team.patterns) and who.can("read", s)))
        runtime = ops.context(store).embeddings
        memories, matched, bounds = select(store, runtime, who.scope("read"), path, p.get("query"), p.get("limit"),
                                           store.limits)  # fmt: skip
        return [{**m, "store": PERSONAL} for m in memories], matched, bounds, p

    memories, matched, bounds, p = await reader(mine)
    wanted = [s for s in dict.fromkeys(p["spaces"]) if matches(s, team.patterns) and who.can("read", s)]
    missing = False
    if wanted:

        def theirs(store: Store, principal: Principal) -> tuple[list[dict[str, Any]], int]:
            path = tuple(s for s in wanted if principal.can("read", s))
            found, count, _ = select(store, None, principal.scope("read"), path, p.get("query"), p.get("limit"),
                                     store.limits)  # fmt: skip
            return [{**m, "id": PREFIX + str(m["id"]), "store": TEAM} for m in found], count

        try:
            found, count = await team.apply(theirs, "memory.recall", min(team.timeout_ms, RECALL_MS))
            memories, matched = memories + found, matched + count
        except HivememError as exc:
            missing = True
            if exc.code != "unavailable.team_store":
                team.log.write(f"team store: memory.recall: {exc.code}")
    result: dict[str, Any] = dict(render(memories, list(p["spaces"]), bounds, matched=matched).wire())
    if missing:
        result["text"] = UNAVAILABLE_LINE + ("\n" + result["text"] if result["text"] else "")
        result["unavailable"] = [TEAM]
    return result
