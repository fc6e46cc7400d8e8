"""memory.move between the personal store and the mounted team store (docs/team.md, D396, D397).

No transaction spans the two stores, so a move across them is two writes, each audited in its own store: the copy,
a memory.add in the target store (the same checks as any add there: the secret scan, duplicates, the caller's and
on the team store the team token's grants), then the delete of the source at the revision the caller gave.

Never half done (D397): before the copy, the move is recorded in a journal file beside the team store's exports
(`moves.json`, 0600, rewritten atomically, never read through a link); the entry goes once both steps are done, or
once the copy is known not to have landed. An entry left behind (the daemon died between the two steps, or the team
store did not answer) is repaired when the daemon next starts, and before each later move across the stores: the
copy is looked up by its content's SHA-256 in the target space; found, the source is deleted; not found, the entry
is dropped. While the team store does not answer, the entry stays and the daemon's log says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import unicodedata
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from hivemem import auth, ops
from hivemem.auth import Principal
from hivemem.daemon.lifecycle import Log
from hivemem.errors import Conflict, HivememError, InvalidParams, NotFound, Unavailable
from hivemem.moves import Journal
from hivemem.store import Store

PREFIX = "t:"
# What a copy carries of its source: every member memory.add takes (D396). Not the session (a session lives in one
# store), the author (the copy is added by who moved it) or the status (only an active memory moves across).
CARRIED = ("kind", "title", "tags", "source", "provenance", "confidence", "confidence_state", "review_after",
           "expires_at")  # fmt: skip
T = TypeVar("T")

Mine = Callable[[Principal, str, object, int, Any], Awaitable[dict[str, Any]]]
OnReader = Callable[[Callable[[Store], Any]], Awaitable[Any]]


class Mounted(Protocol):
    """What a move needs of the mounted team store (hivemem.daemon.team.Team)."""

    timeout_ms: int

    async def call(self, who: Principal, verb: str, params: object) -> dict[str, Any]: ...
    async def apply(self, work: Callable[[Store, Principal], T], what: str, budget_ms: int) -> T: ...


class Mover:
    """Moves across the two stores, one at a time, and the repair of those a crash or an outage left half done."""

    def __init__(self, team: Mounted, directory: str, log: Log) -> None:
        self.team = team
        self.journal = Journal(directory)
        self.log = log
        self.lock = asyncio.Lock()

    async def move(self, mine: Mine, reader: OnReader, who: Principal, params: dict[str, Any]) -> dict[str, Any]:
        """memory.move of a memory of one store into a space of the other: its result is a single-store move's."""
        given = params.get("id")
        from_team = isinstance(given, str) and given.startswith(PREFIX)
        bare = {**params, "id": given[len(PREFIX) :] if isinstance(given, str) and from_team else given}
        p = ops.check("memory.move", bare, 1 << 30)[1]  # the shape only: the copy is checked as an add below
        async with self.lock:
            await self._repair(mine, reader)
            source = await self._source(mine, who, from_team, p["id"])
            if source["revision"] != p["revision"]:
                raise Conflict("memory_revision", f"{given} is at revision {source['revision']}",
                               current=source["revision"])  # fmt: skip
            if source["status"] != "active":
                raise InvalidParams("status", f"{given} is {source['status']}: only an active memory moves between "
                                    "the personal and the team store", param="id",
                                    fix="confirm or restore it first, or move it within its store")  # fmt: skip
            if not who.can("write", p["space"]):
                raise ops.denied(who, "write", f"space:{p['space']}")
            copy = {"space": p["space"], "content": source["content"]}
            copy.update({k: source[k] for k in CARRIED if source.get(k) not in (None, "", [])})
            if copy.get("confidence_state") == "user_confirmed" and (not from_team or not who.is_owner):
                del copy["confidence_state"]  # a person's confirmation is the owner's to set (docs/security.md)
            await self._not_held(reader, who, from_team, p["space"], source["content"])
            key = secrets.token_hex(8)
            self.journal.add({"key": key, "from": "team" if from_team else "personal", "id": p["id"],
                              "revision": p["revision"], "space": p["space"],
                              "sha256": digest(source["content"])})  # fmt: skip
            added = await self._copy(mine, who, from_team, copy, key)
            try:
                await delete_source(self.team, mine, who, from_team, p["id"], p["revision"])
            except Unavailable as exc:
                if exc.data.get("outcome") == "unknown":  # the source may be deleted or not: the repair will know
                    self.log.write(f"memory.move {given}: the source's delete has an unknown outcome; the journal "
                                   "keeps the move for its repair")  # fmt: skip
                    raise
                await self._undo(mine, who, from_team, added, key)
                raise
            except HivememError:
                await self._undo(mine, who, from_team, added, key)
                raise
            self.journal.remove(key)
        return {"id": added["id"], "from": given, "revision": 1}

    async def _source(self, mine: Mine, who: Principal, from_team: bool, memory: str) -> dict[str, Any]:
        """The source memory as the caller reads it; denied.write unless the caller (and on the team store the
        team token) may write in its space."""
        if not from_team:
            read = await mine(who, "memory.get", {"id": memory}, 0, None)
            if not who.can("write", str(read["space"]), int(memory[1:])):
                raise ops.denied(who, "write", f"space:{read['space']}")
            return read

        def work(store: Store, principal: Principal) -> dict[str, Any]:
            read = ops.run(store, principal, ops.check("memory.get", {"id": memory}, store.limits.max_content_bytes))
            space = str(read["space"])
            if not who.can("read", space):  # the caller learns nothing of a memory it cannot read
                raise NotFound("memory", f"{PREFIX}{memory} not found")
            for actor in (who, principal):
                if not actor.can("write", space):
                    raise ops.denied(actor, "write", f"space:{space}")
            return read

        return await self.team.apply(work, "memory.move", self.team.timeout_ms)

    async def _not_held(self, reader: OnReader, who: Principal, from_team: bool, space: str, content: str) -> None:
        """conflict.memory_duplicate, before anything is journaled or written, when the target space already holds
        this content: a copy answered by that memory with its answer lost would look, to the repair, like a copy that
        landed, and the source would be deleted with no copy of its own (D409). The holder's id is named only to a
        caller (and on the team store a team token) that may read it, as an add's duplicate is."""
        sha = bytes.fromhex(digest(content))

        def mine(store: Store) -> tuple[int | None, bool]:
            return store.memories.holding(space, sha), True

        def theirs(store: Store, principal: Principal) -> tuple[int | None, bool]:
            return store.memories.holding(space, sha), principal.can("read", space)

        held, seen = await (reader(mine) if from_team else self.team.apply(theirs, "memory.move", self.team.timeout_ms))
        if held is None:
            return
        holder = f"{'' if from_team else PREFIX}m{held}"
        shown = seen and who.can("read", space, held if from_team else None)
        raise Conflict("memory_duplicate", f"{holder if shown else 'a memory'} already holds this content in {space}",
                       **({"id": holder} if shown else {}))  # fmt: skip

    async def _copy(self, mine: Mine, who: Principal, from_team: bool, copy: dict[str, Any],
                    key: str) -> dict[str, Any]:  # fmt: skip
        """The copy, added in the target store; a copy that did not land takes its journal entry with it."""
        try:
            added = await (
                mine(who, "memory.add", copy, len(copy["content"].encode()), None)
                if from_team
                else self.team.call(who, "memory.add", copy)
            )
        except Unavailable as exc:
            if exc.data.get("outcome") != "unknown":
                self.journal.remove(key)
            raise
        except HivememError:  # refused (denied, a secret, a bad member): nothing was written
            self.journal.remove(key)
            raise
        if not added.get("changed"):  # a single-store move refuses to land on a duplicate too
            self.journal.remove(key)
            holder = added.get("id")
            raise Conflict("memory_duplicate", f"{holder or 'a memory'} already holds this content in {copy['space']}",
                           **({"id": holder} if holder else {}))  # fmt: skip
        return added

    async def _undo(self, mine: Mine, who: Principal, from_team: bool, added: dict[str, Any], key: str) -> None:
        """The source could not be deleted: the copy goes again, so the move is not done at all; if even that
        fails, the journal entry stays for the repair."""
        copy = added["id"]
        try:
            if from_team:
                await mine(who, "memory.delete", {"id": copy, "revision": 1}, 0, None)
            else:
                await self.team.call(who, "memory.delete", {"id": copy[len(PREFIX) :], "revision": 1})
        except HivememError as exc:
            self.log.write(f"memory.move: its copy {copy} could not be taken back ({exc.code}); the journal keeps "
                           "the move for its repair")  # fmt: skip
            return
        self.journal.remove(key)

    async def repair(self, mine: Mine, reader: OnReader) -> None:
        """Repair what the journal holds (at the daemon's start); every failure is logged, never raised."""
        async with self.lock:
            await self._repair(mine, reader)

    async def _repair(self, mine: Mine, reader: OnReader) -> None:
        try:
            entries = self.journal.entries()
        except HivememError as exc:
            self.log.write(f"memory.move repair: {exc.message}")
            return
        for entry in entries:
            what = f"memory.move of {PREFIX if entry['from'] == 'team' else ''}{entry['id']} into {entry['space']}"
            try:
                done = await self._repair_one(mine, reader, entry)
            except HivememError as exc:
                if exc.code == "unavailable.team_store":
                    self.log.write(f"{what}: not repaired yet, the team store did not answer; kept for later")
                    continue
                done = f"left as it is ({exc.code}: {exc.message})"
            self.log.write(f"{what}: {done}")
            self.journal.remove(entry["key"])

    async def _repair_one(self, mine: Mine, reader: OnReader, entry: dict[str, Any]) -> str:
        space, digest, memory, revision = entry["space"], bytes.fromhex(entry["sha256"]), entry["id"], entry["revision"]
        from_team = entry["from"] == "team"

        def holding(store: Store, *_: object) -> int | None:
            return store.memories.holding(space, digest)

        def team_source(store: Store, principal: Principal) -> int | None:
            return _revision(store, memory)

        copy = await (
            reader(holding) if from_team else self.team.apply(holding, "memory.move repair", self.team.timeout_ms)
        )
        if copy is None:
            return "its copy never landed; the source is kept"
        if from_team:
            current = await self.team.apply(team_source, "memory.move repair", self.team.timeout_ms)
        else:
            current = await reader(lambda store: _revision(store, memory))
        if current is None:
            return "done already"
        if current != revision:
            return f"the source changed since (revision {current}); both it and the copy m{copy} are kept"
        await delete_source(self.team, mine, None, from_team, memory, revision)
        return "finished: the source is deleted"


def digest(content: str) -> str:
    """The SHA-256 a store keys a memory's content by (its NFC form, as hivemem.store finds a duplicate), in hex."""
    return hashlib.sha256(unicodedata.normalize("NFC", content).encode("utf-8")).hexdigest()


def _revision(store: Store, memory: str) -> int | None:
    """The revision of a live memory; None when it is deleted or gone."""
    try:
        return int(store.memories.get(int(memory[1:]), False)["revision"])
    except NotFound:
        return None


async def delete_source(team: Mounted, mine: Mine, who: Principal | None, from_team: bool, memory: str,
                        revision: int) -> None:  # fmt: skip
    """The move's second step: the source deleted at `revision`, by the caller (`who`), or in a repair by the
    personal store's owner or the team token."""
    params = {"id": memory, "revision": revision}
    if not from_team:
        await mine(who or auth.owner(), "memory.delete", params, 0, None)
    elif who is not None:
        await team.call(who, "memory.delete", params)
    else:

        def work(store: Store, principal: Principal) -> dict[str, Any]:
            return ops.run(store, principal, ops.check("memory.delete", params, store.limits.max_content_bytes))

        await team.apply(work, "memory.move repair", team.timeout_ms)
