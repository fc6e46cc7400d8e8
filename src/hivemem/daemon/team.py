"""A team store mounted beside the personal store (docs/team.md, "A personal store and a team store together").

The daemon keeps serving its personal store as before; with config `team.url` set it also holds a `Team`: the
routing of each request (`plan`), the calls on the team store (bounded by `team.timeout_ms`, on a few threads of
their own) and the merge of the two parts of a read. With `team.url` empty none of this runs (D390).

Routing (D390): a write to a space matching `team.spaces` goes to the team store, every other write stays
personal; `user` and `project/...` never leave the personal store. The team store's memory ids travel qualified,
`t:m12`, and a verb given one runs there. memory.search and memory.list with no spaces, or with spaces of both
stores, and memory.recall query both at once and merge, each store's order kept: a list is the personal store's
page filled with the team's (D393), a search takes the next hit of the store whose next hit holds more of the
query's words (D400); project and user first. Every hit and record says which `store` it came from, and the
`next` of a merged read holds each store's place (D401).

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
import dataclasses
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from hivemem import credentials, libpq, ops
from hivemem.auth import Principal
from hivemem.config import Config
from hivemem.cursors import Part, back, decode_pair, encode_pair
from hivemem.daemon.crossmove import Mover
from hivemem.daemon.lifecycle import Log
from hivemem.errors import Denied, HivememError, InvalidParams, NotFound, Unavailable
from hivemem.manifest import BY_NAME
from hivemem.render import Bounds, render
from hivemem.search.hygiene import fix_text
from hivemem.search.recall import select
from hivemem.search.terms import WORD, stopwords
from hivemem.spaces import in_team
from hivemem.store import Store, open_store
from hivemem.store.limits import Limits

PREFIX = "t:"
PERSONAL, TEAM, BOTH, ACROSS = "personal", "team", "both", "across"
WORKERS = 4  # threads that may wait on the team store at once; a call finding none free is unavailable at once
PRINCIPAL_SECONDS = 10.0  # how long the team token's principal is trusted before it is looked up again
ID_PARAMS = ("id", "source", "target", "replacement")
MEMORY_ID = re.compile(r"^m[1-9][0-9]{0,17}$")
# Verbs of other families (sessions, events, clients, the store's own operations) stay personal for now (docs/team.md).
ROUTED = ("memory.",)
# A hook waits 1.5 s for its recall (docs/hooks.md): the team's part of a recall is given up sooner, so the hook
# still shows the personal part and says the team store was unavailable.
RECALL_MS = 1000
FOLLOW_SECONDS = 1.0  # how often a stream of the team store looks for new events when it found none
UNAVAILABLE_LINE = "hivemem recall: the team store was unavailable; only memories of the personal store are shown."
T = TypeVar("T")
STEM_LETTERS = 5  # the letters of a word a merge of ranked hits compares (D400)


def _mount(verb: str) -> str:
    """The verb's `mount` trait (hivemem/manifest.py): how it spans the two stores; "" for an unknown verb."""
    found = BY_NAME.get(verb)
    return found.mount if found else ""


def _listed(verb: str) -> str:
    """The member of a merged read's result that lists its memories: `memories` (a page) or `results` (hits)."""
    return "memories" if "memories" in BY_NAME[verb].result.__annotations__ else "results"


def matches(space: str, patterns: list[str]) -> bool:
    """Whether `space` lives in the team store: it matches a `team.spaces` pattern and is not user or project."""
    return in_team(space, patterns)


FIRST = Part(None, 0)
Pages = tuple[Part | None, Part | None]


@dataclass
class Plan:
    """Where a request runs: `personal`, `team` or `both`, with the params each store gets."""

    where: str
    personal: Any = None
    team: Any = None
    pages: Pages = (FIRST, FIRST)  # where a merged read starts in each store (D401); None: nothing more there


def plan(verb: str, params: object, patterns: list[str]) -> Plan:
    """The route of one request (D390). Params that are not an object, or a verb outside memory.*, stay personal
    as they came (validation then says what is wrong)."""
    if not isinstance(params, dict) or not verb.startswith(ROUTED):
        return _by_spaces_only(verb, params, patterns)
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
            return _across(verb, params)  # memory.move of a team memory into a personal space
        return Plan(TEAM, team=_strip(params, team_ids))
    if isinstance(space, str):
        if not matches(space, patterns):
            return Plan(PERSONAL, params)
        if ids:
            return _across(verb, params)  # memory.move of a personal memory into a team space
        return Plan(TEAM, team=params)
    return _unnamed(verb, params, patterns)


def _unnamed(verb: str, params: dict[str, Any], patterns: list[str]) -> Plan:
    """The route of a request that names no memory and no space: by `store`, a team page's cursor, or spaces."""
    if params.get("store") in (PERSONAL, TEAM) and any(p.name == "store" for p in BY_NAME[verb].params):
        return _one_store(params, patterns)
    after = params.get("after")
    if isinstance(after, str):
        return _after(verb, params, patterns, after)
    return _by_spaces(verb, params, patterns, after is None)


def _after(verb: str, params: dict[str, Any], patterns: list[str], after: str) -> Plan:
    """The route of a page after the first: a `t:` cursor continues the team store, a merged read's `next` both
    stores (D401), any other the personal store."""
    pages = decode_pair(after) if _mount(verb) == "merged" else None
    if pages is not None:
        return _paged(verb, params, patterns, pages)
    if after.startswith(PREFIX):
        spaces = params.get("spaces")
        if isinstance(spaces, list) and not all(isinstance(s, str) and matches(s, patterns) for s in spaces):
            raise InvalidParams("after", "after continues the team store, but spaces names a space of the personal "
                                "store: repeat the request that gave this next", param="after")  # fmt: skip
        return Plan(TEAM, team={**params, "after": after[len(PREFIX) :]})
    return _by_spaces(verb, params, patterns, False)


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
    merged = _mount(verb) in ("merged", "each") and first_page
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


def _by_spaces_only(verb: str, params: object, patterns: list[str]) -> Plan:
    """The route of a verb outside memory.*: with the `spaces` mount (events.list, store.export) the team store
    when it names only team spaces, else the personal store as it always was (D402)."""
    if isinstance(params, dict) and _mount(verb) == "names":
        return Plan(BOTH, params, params)
    if not isinstance(params, dict) or _mount(verb) != "spaces":
        return Plan(PERSONAL, params)
    found = _by_spaces(verb, params, patterns, False)
    if found.where == TEAM and params.get("path") is not None:
        raise Denied("path", f"{verb} of team spaces runs with your team client token, which may not choose a file: "
                     "it writes under exports/ in the daemon's team directory and says where", param="path",
                     fix="leave out --path")  # fmt: skip
    return found


def _paged(verb: str, params: dict[str, Any], patterns: list[str], pages: Pages) -> Plan:
    """A page after the first of a merged read (D401): each store from its own place in the `next`, a store with
    nothing more not asked. A `next` given to a request that is not merged is left to the personal store, which
    refuses it as any cursor it cannot read."""
    route = _by_spaces(verb, {k: v for k, v in params.items() if k != "after"}, patterns, True)
    if route.where != BOTH:
        return Plan(PERSONAL, params)
    return Plan(BOTH, _from(route.personal, pages[0]), _from(route.team, pages[1]), pages)


def _from(params: dict[str, Any], part: Part | None) -> dict[str, Any] | None:
    if part is None:
        return None
    return {**params, "after": part.after} if part.after else params


def _bare(value: str) -> str:
    return value[len(PREFIX) :] if value.startswith(PREFIX) else value


def _strip(params: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {k: (_bare(v) if k in names else v) for k, v in params.items()}


def _across(verb: str, params: dict[str, Any]) -> Plan:
    """A request naming a memory of one store and a space of the other: memory.move runs across the two stores
    (hivemem.daemon.crossmove, D396); no other verb does."""
    if _mount(verb) == "move":
        return Plan(ACROSS, params)
    raise InvalidParams("stores", f"{verb} runs on one store at a time: space {params['space']!r} lives in the other "
                        "store", param="space")  # fmt: skip


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
    for key in ("results", "memories", *(("spaces",) if _mount(verb) == "names" else ())):
        if isinstance(out.get(key), list):
            out[key] = [{**qualify(item, ""), "store": TEAM} for item in out[key]]
    if isinstance(out.get("next"), str):
        out["next"] = PREFIX + out["next"]
    return _named(out, verb)


def _named(out: dict[str, Any], verb: str) -> dict[str, Any]:
    """The rows of a team result that name memories by the team store's own ids: events and hygiene findings."""
    if isinstance(out.get("events"), list):
        out["events"] = [_event(e) for e in out["events"]]
    if _mount(verb) == "each" and isinstance(out.get("findings"), list):
        out["findings"] = [finding(f) for f in out["findings"]]
    return out


def finding(found: dict[str, Any]) -> dict[str, Any]:
    """A team store's hygiene finding (D406): its memory ids `t:m<N>` wherever they appear (its memories, its
    action's params, its reason and the command of its fix), marked `store: team`. Sent back through the daemon,
    its action then runs on the team store."""
    action = found.get("action") or {}
    params = dict(action.get("params") or {})
    ids = {str(m) for m in found.get("memories", []) if MEMORY_ID.match(str(m))}
    ids |= {str(params[k]) for k in ID_PARAMS if isinstance(params.get(k), str) and MEMORY_ID.match(params[k])}
    named = re.compile(r"(?<![\w:])(" + "|".join(sorted(ids, key=len, reverse=True)) + r")\b") if ids else None

    def text(value: Any) -> Any:
        return named.sub(PREFIX + r"\1", value) if named is not None and isinstance(value, str) else value

    params = {k: (PREFIX + v if k in ID_PARAMS and v in ids else text(v)) for k, v in params.items()}
    out = {**found, "memories": [PREFIX + str(m) for m in found.get("memories", [])], "store": TEAM}
    out["reason"] = text(found.get("reason"))
    if action:
        out["action"] = {**action, "params": params}
        out["fix"] = fix_text(str(action.get("verb")), params)
    return out


def _event(event: dict[str, Any]) -> dict[str, Any]:
    memory = event.get("memory")
    return {**event, "memory": PREFIX + memory} if isinstance(memory, str) and MEMORY_ID.match(memory) else event


def _relation(relation: dict[str, Any]) -> dict[str, Any]:
    return {k: (PREFIX + v if k in ("source", "target") and isinstance(v, str) else v) for k, v in relation.items()}


def personal(result: dict[str, Any]) -> dict[str, Any]:
    """A personal store's read with its listed memories (or spaces) marked `store: personal` (only with a team store
    mounted)."""
    out = dict(result)
    for key in ("results", "memories", "spaces", "findings"):
        if isinstance(out.get(key), list):
            out[key] = [{**item, "store": PERSONAL} for item in out[key]]
    return out


def joined(mine: dict[str, Any], theirs: dict[str, Any] | None, limit: int) -> dict[str, Any]:
    """Two hygiene reports as one (D406): the personal store's findings, then the team's, at most `limit`; counts
    and memories summed; truncated when either was or the cut dropped some. The rest is the personal report's."""
    if theirs is None:
        return dict(mine)
    found = [*mine["findings"], *theirs["findings"]]
    counts = dict(mine["counts"])
    for kind, n in theirs["counts"].items():
        counts[kind] = counts.get(kind, 0) + n
    return {**mine, "findings": found[:limit], "counts": counts, "memories": mine["memories"] + theirs["memories"],
            "usage_recorded": bool(mine["usage_recorded"] and theirs["usage_recorded"]),
            "truncated": bool(mine["truncated"] or theirs["truncated"] or len(found) > limit)}  # fmt: skip


def scope(item: dict[str, Any]) -> int:
    """The scope order of a hit (docs/team.md): project, user, the personal store's other spaces, the team's."""
    if item.get("store") == TEAM:
        return 3
    space = str(item.get("space", ""))
    return 0 if space.startswith("project/") else 1 if space == "user" else 2


def merge(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, limit: int, key: str,
          pages: Pages = (FIRST, FIRST), query: str = "") -> dict[str, Any]:  # fmt: skip
    """The two parts of a read as one page of at most `limit`, each store's part a prefix of its own page (the
    hits of `pages`' skip left out), so `next` can say where each store goes on (D401). A listing keeps the
    personal part whole and fills the page with the team's (D393); for ranked hits the next is the head of the
    store whose head holds more of the query (`held`), on a tie one of each store in turn, the personal store's
    first (D400). The page is then ordered by scope: project, user, then the rest (for a listing: the personal
    store's others, then the team's). The personal part's other members (mode, window) are the result's."""
    base = dict(mine) if mine is not None else {k: v for k, v in (theirs or {}).items() if k != "next"}
    skips = [part.skip if part else 0 for part in pages]
    parts = [list((part or {}).get(key, []))[skip:] for part, skip in zip((mine, theirs), skips, strict=True)]
    ranked = key == "results"
    wanted = set(words(query)) if ranked else set()
    taken = [0, 0]
    order: list[dict[str, Any]] = []
    while len(order) < limit and (taken[0] < len(parts[0]) or taken[1] < len(parts[1])):
        side = _pick(parts, taken, ranked, wanted)
        order.append(parts[side][taken[side]])
        taken[side] += 1
    base[key] = sorted(order, key=lambda item: scope(item) if not ranked else min(scope(item), 2))
    onward = [_onward(pages[i], parts[i], (part or {}).get("next"), taken[i], ranked)
              for i, part in enumerate((mine, theirs))]  # fmt: skip
    if theirs is None and pages[1] is not None:  # the team store did not answer: it goes on from where it was
        onward[1] = pages[1] if onward[0] is not None else None
    following = encode_pair(onward[0], onward[1]) if onward != [None, None] else None
    if following is not None or not ranked:
        base["next"] = following
    else:
        base.pop("next", None)
    return base


def by_name(mine: dict[str, Any], theirs: dict[str, Any] | None, limit: int) -> dict[str, Any]:
    """The two stores' pages of spaces as one page in name order (D404). A space lives in one store only, and each
    store gave its first `limit` names after the same `after`, so the first `limit` of both are the page's; the
    next page starts after its last name when either store had more."""
    rows = sorted([*mine["spaces"], *(theirs or {}).get("spaces", [])], key=lambda r: str(r["space"]))
    more = len(rows) > limit or mine.get("next") is not None or (theirs or {}).get("next") is not None
    page = rows[:limit]
    if page or not more:
        return {**mine, "spaces": page, "next": page[-1]["space"] if more else None}
    # every row a store gave was one this connection may not see: continue after the furthest name either reached
    reached = (mine.get("next"), (theirs or {}).get("next"))
    return {**mine, "spaces": [], "next": max(_bare(str(n)) for n in reached if n)}


def words(text: str) -> list[str]:
    """The words of a text a merge compares across stores (D400): lower case, stopwords left out, each cut to its
    first STEM_LETTERS letters (a stem good enough to match `painting` to `paints`)."""
    stop = stopwords()
    return [w[:STEM_LETTERS] for w in WORD.findall(text.lower()) if w not in stop]


def held(hit: dict[str, Any], wanted: set[str]) -> tuple[int, float]:
    """How much of the query a hit holds, comparable across stores (D400): the query's words in its title and
    snippet, then the share of the snippet's words that are the query's."""
    found = words(f"{hit.get('title') or ''} {hit.get('snippet') or ''}")
    return len(wanted.intersection(found)), sum(w in wanted for w in found) / (len(found) or 1)


def _pick(parts: list[list[dict[str, Any]]], taken: list[int], ranked: bool, wanted: set[str]) -> int:
    """The store whose next hit comes next on a merged page: 0 the personal store, 1 the team store."""
    if taken[1] == len(parts[1]):
        return 0
    if taken[0] == len(parts[0]):
        return 1
    if not ranked:
        return 0
    mine, theirs = (held(parts[i][taken[i]], wanted) for i in (0, 1))
    return 0 if mine > theirs or (mine == theirs and taken[0] <= taken[1]) else 1


def _onward(part: Part | None, shown: list[dict[str, Any]], following: str | None, kept: int,
            ranked: bool) -> Part | None:  # fmt: skip
    """Where a store goes on after a merged page that kept the first `kept` of its `shown` hits; None when it has
    nothing more."""
    if part is None:
        return None
    following = _bare(following) if isinstance(following, str) else None
    if kept == len(shown):
        return Part(following, 0) if following else None
    if kept == 0:
        return part
    last = _bare(str(shown[kept - 1]["id"]))
    if not ranked:
        return Part(last, 0)
    if following:
        return Part(back(following, len(shown) - kept, last), 0)
    return Part(part.after, part.skip + kept)  # its hits end inside this page: the next asks for it again


def unavailable(verb: str, params: Any) -> dict[str, Any]:
    """The empty result of a read whose only part, the team store's, did not answer."""
    if _listed(verb) == "memories":
        return {"memories": [], "next": None, "unavailable": [TEAM]}
    return {"mode": params.get("mode", "auto") if isinstance(params, dict) else "auto", "results": [],
            "unavailable": [TEAM]}  # fmt: skip


def _memories(verb: str, right: str) -> tuple[tuple[str, str], ...]:
    """The team memories a verb's params name, each with the right the connection needs on its space (as the
    personal store's handlers ask it): a pair's source is written and its target read, a replacement read."""
    if _mount(verb) == "pair":
        return (("source", "write"), ("target", "read"))
    return (("id", right), ("replacement", "read"))


def _may(store: Store, who: Principal, ident: str, right: str) -> None:
    """`who` may `right` the team memory `ident`: one it cannot read answers as absent, as in the personal store,
    so its space's name never shows (D408)."""
    memory = int(ident[1:])
    space = store.memories.space_of(memory) or store.governance.audited_space(memory)
    if space is None or not who.can("read", space):
        raise NotFound("memory", f"{PREFIX}{ident} not found")
    if right != "read" and not who.can(right, space):
        raise ops.denied(who, right, f"memory:{PREFIX}{ident}")


def narrowed(principal: Principal, who: Principal, patterns: list[str] | None = None) -> Principal:
    """The team token's principal reading only what the connection may read too (D408): its read grants met with
    the connection's, and for a listing with team.spaces' patterns; its other grants as they are (the connection's
    write is checked on each space and memory a request names). A grant on one memory or one session gives nothing
    here: the connection's name the personal store's, and the token's lie in a space a listing cannot meet."""
    mine = ["*"] if who.is_owner else [g["scope"] for g in who.grants if g["right"] == "read"]
    mine = [s for s in mine if not s.startswith(("memory:", "session:s"))]
    theirs = [g["scope"] for g in principal.grants if g["right"] == "read"]
    scopes = _meet(theirs, mine)
    if patterns is not None:
        scopes = _meet(scopes, [f"space:{p}" for p in patterns])
    kept = tuple(g for g in principal.grants if g["right"] != "read")
    return Principal(principal.id, principal.label, (*({"right": "read", "scope": s} for s in scopes), *kept))


def _meet(a: list[str], b: list[str]) -> list[str]:
    """The scopes both lists of grant scopes cover (`*`, `space:<name>`, `space:<prefix>/*`, `memory:m<N>`)."""
    found = [m for x in a for y in b if (m := _meet_one(x, y)) is not None]
    return list(dict.fromkeys(found))


def _meet_one(x: str, y: str) -> str | None:
    if x == "*" or y == "*":
        return y if x == "*" else x
    if x == y == "session:*":
        return x
    if not (x.startswith("space:") and y.startswith("space:")):
        return None  # a memory's or a session's grant names no space: no memory is listed by it here
    a, b = x[len("space:") :], y[len("space:") :]
    if a == b:
        return x
    if b.endswith("/*") and a.startswith(b[:-1]):
        return x  # a (a space, or a prefix) lies under the prefix b
    if a.endswith("/*") and b.startswith(a[:-1]):
        return y
    return None


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
        self.limits = dataclasses.replace(limits, elsewhere=())  # nothing is mounted beside the team store
        self.data_dir = data_dir
        self.log = log
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="team")
        self.free = threading.BoundedSemaphore(WORKERS)
        self._local = threading.local()
        self._stores: list[Store] = []
        self._principal: tuple[str, float, Principal] | None = None
        self._lock = threading.Lock()
        self.mover = Mover(self, data_dir, log)  # memory.move across the two stores, and its repair

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
        job, gate, holder = self._submit(work, budget_ms)
        try:
            waited = asyncio.shield(asyncio.wrap_future(job))
            return await asyncio.wait_for(waited, max(0.0, gate.deadline - time.monotonic()))
        except TimeoutError:
            raise self._given_up(gate, holder, what, budget_ms) from None

    def blocking(self, work: Callable[[Store, Principal], T], what: str, budget_ms: int) -> T:
        """`apply` for a caller on a thread of its own (a stream's poll, on a reader of the personal store)."""
        job, gate, holder = self._submit(work, budget_ms)
        try:
            return job.result(timeout=max(0.0, gate.deadline - time.monotonic()))
        except FutureTimeout:
            raise self._given_up(gate, holder, what, budget_ms) from None

    def _submit(self, work: Callable[[Store, Principal], T], budget_ms: int) -> tuple[Future[T], Gate, list[Worker]]:
        if not self.free.acquire(blocking=False):
            raise Unavailable("team_store", "the team store is not answering: every team connection is still "
                              "waiting on it", outcome="not_written")  # fmt: skip
        gate = Gate(time.monotonic() + budget_ms / 1000)
        holder: list[Worker] = []
        try:
            job: Future[T] = self.pool.submit(self._run, gate, holder, work)
        except RuntimeError:
            self.free.release()
            raise Unavailable("team_store", "the daemon is stopping", outcome="not_written") from None
        job.add_done_callback(lambda _: self.free.release())
        return job, gate, holder

    def _given_up(self, gate: Gate, holder: list[Worker], what: str, budget_ms: int) -> Unavailable:
        unknown = gate.abandon()
        if holder:
            self._interrupt(holder[0])
        self.log.write(f"team store: {what} given up after {budget_ms} ms")
        return self._timed_out(unknown)

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
        """The verb for the team token's principal, within what the connection's own grants allow (docs/team.md):
        each space it names, and each team memory it names, as the personal store checks them (D408)."""
        checked = ops.check(verb, params, store.limits.max_content_bytes)
        p = checked[1]
        right = checked[0].right if checked[0].right in ("read", "write") else "admin"
        if not who.is_owner:
            if right == "admin":
                raise ops.denied(who, "admin", verb)
            for name, need in _memories(verb, right):
                if isinstance(p.get(name), str):
                    _may(store, who, p[name], need)
        spaces = [p["space"]] if isinstance(p.get("space"), str) else list(p.get("spaces") or [])
        for space in spaces:
            if not who.can(right, space):
                raise Denied(right, f"this connection may not {right} in {space!r}", space=space)
        # it reads only what both may read: no page, next, relation, duplicate or related hit shows more
        principal = narrowed(principal, who, self.patterns if _mount(verb) in ("merged", "names") else None)
        return self._visible(verb, who, p, ops.run(store, principal, checked))

    def _visible(self, verb: str, who: Principal, p: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """A merged read's team part as this connection may see it: what it may read, and with no spaces named only
        the spaces that live in the team store (team.spaces)."""
        mount = _mount(verb)
        keys = ("spaces",) if mount == "names" else ("results", "memories") if mount == "merged" else ()
        for key in keys:
            if not isinstance(result.get(key), list):
                continue
            rows = [r for r in result[key] if who.is_owner or who.can("read", str(r.get("space")))]
            if mount == "names" or not p.get("spaces"):
                rows = [r for r in rows if matches(str(r.get("space")), self.patterns)]
            result = {**result, key: rows}
        return result

    def everywhere(self, store: Store, who: Principal, principal: Principal, verb: str,
                   params: Any) -> dict[str, Any] | None:  # fmt: skip
        """`verb` on every team store space that lives there (team.spaces) and this connection may read, named
        (D406); None when there is none."""
        names: list[str] = []
        after: str | None = None
        while True:
            asked = {"limit": 1000, **({"after": after} if after else {})}
            page = ops.run(store, principal, ops.check("space.list", asked, store.limits.max_content_bytes))
            for space in (str(r["space"]) for r in page["spaces"]):
                if matches(space, self.patterns) and (who.is_owner or who.can("read", space)):
                    names.append(space)
            after = page.get("next")
            if not after:
                break
        if not names:
            return None
        return self._authorized(store, who, principal, verb, {**(params or {}), "spaces": names})

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
    if route.where == ACROSS:
        return await team.mover.move(mine, reader, who, route.personal)
    if route.where == PERSONAL:
        if _mount(verb) not in ("merged", "each"):
            return None
        return personal(await mine(who, verb, route.personal, size, listener))
    if route.where == TEAM:
        if BY_NAME[verb].stream:
            return await _team_stream(team, who, verb, route.team)
        return await _team_only(team, who, verb, params, route.team)
    if _mount(verb) == "each":
        return await _each(team, mine, who, verb, params, route, size, listener)
    return await _merged(team, mine, who, verb, params, route, size, listener)


async def _team_stream(team: Team, who: Principal, verb: str, params: object) -> ops.Stream:
    """A stream of the team store (events.follow of team spaces, D410): started there as the team token, within the
    connection's grants; each poll runs there too, from the reader that serves the stream, and since this daemon is
    not told of the team store's commits, a poll finding nothing is tried again every FOLLOW_SECONDS. A poll the team
    store does not answer in time ends the stream with unavailable.team_store."""

    def start(store: Store, principal: Principal) -> dict[str, Any]:
        return team._authorized(store, who, principal, verb, params)

    stream = await team.apply(start, verb, team.timeout_ms)
    assert isinstance(stream, ops.Stream), f"{verb} has the stream trait but returned no Stream"

    def poll(_personal: Store) -> list[Any]:
        found = team.blocking(lambda store, _principal: stream.poll(store), verb, team.timeout_ms)
        return [_event(dict(e)) for e in found]

    return ops.Stream(dict(stream), poll, live=stream.live, every=FOLLOW_SECONDS)


async def _each(team: Team, mine: Personal, who: Principal, verb: str, params: object, route: Plan, size: int,
                listener: Any) -> dict[str, Any]:  # fmt: skip
    """A verb each store runs on its own memories at once (memory.hygiene, D406), joined as one report. With no
    spaces named, the team part covers the team store's spaces that live there (team.spaces) and this connection
    may read; the personal report alone, with `unavailable: ["team"]`, when the team store does not answer."""
    own = asyncio.ensure_future(mine(who, verb, route.personal, size, listener))
    theirs: dict[str, Any] | None = None
    missing = False
    try:
        if isinstance(route.team, dict) and route.team.get("spaces") is not None:
            theirs = await team.call(who, verb, route.team)
        else:
            found = await team.apply(lambda store, principal: team.everywhere(store, who, principal, verb, route.team),
                                     verb, team.timeout_ms)  # fmt: skip
            theirs = qualify(found, verb) if found is not None else None
    except HivememError as exc:  # the personal part still answers whole (docs/team.md)
        missing = True
        if exc.code != "unavailable.team_store":
            team.log.write(f"team store: {verb}: {exc.code}")
    result = joined(personal(await own), theirs, _limit(verb, params))
    if missing:
        result["unavailable"] = [TEAM]
    return result


async def _merged(team: Team, mine: Personal, who: Principal, verb: str, params: object, route: Plan, size: int,
                  listener: Any) -> dict[str, Any]:  # fmt: skip
    """A merged read: both stores at once (a store with nothing more on a later page not asked, D401), then one
    page of the two parts."""
    own = asyncio.ensure_future(mine(who, verb, route.personal, size, listener)) if route.personal is not None else None
    theirs: dict[str, Any] | None = None
    missing = False
    try:
        if route.team is not None:
            theirs = await team.call(who, verb, route.team)
    except InvalidParams:  # the request's own fault (a crafted or foreign `next`): refused as in one store (D408)
        if own is not None:
            await asyncio.gather(own, return_exceptions=True)
        raise
    except HivememError as exc:  # the personal part still answers whole (docs/team.md)
        missing = True
        if exc.code != "unavailable.team_store":
            team.log.write(f"team store: {verb}: {exc.code}")
    ours = personal(await own) if own is not None else None
    if ours is None and theirs is None:
        ours = {k: v for k, v in unavailable(verb, params).items() if k != "unavailable"}
    query = params.get("query") if isinstance(params, dict) else None
    if _mount(verb) == "names":
        result = by_name(ours or {"spaces": [], "next": None}, theirs, _limit(verb, params))
    else:
        result = merge(
            ours, theirs, _limit(verb, params), _listed(verb), route.pages, query if isinstance(query, str) else ""
        )
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


async def _team_only(team: Team, who: Principal, verb: str, params: object, routed: Any) -> dict[str, Any]:
    """A request the team store alone serves; a read of it alone answers empty when the team store does not."""
    try:
        return await team.call(who, verb, routed)
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
