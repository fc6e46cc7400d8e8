"""The authorization model (docs/security.md): principals, grant selectors and what a principal may read or write.

Pure: no I/O, no SQL, no clock. The store looks principals up and the daemon authenticates them; this module
only answers "may this principal do that?", so every backend and every adapter asks the same question the
same way. It is on the CLI's warm path (config validation uses the selector grammar), so it imports `re` only.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

SPACE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
KINDS = ("note", "fact", "decision", "procedure", "preference", "convention", "task", "lesson")
RIGHTS = ("read", "write", "admin")
TOKEN_RE = re.compile(r"^hm1\.(g[1-9][0-9]{0,17}|owner)\.([A-Za-z0-9_-]{43})$")
OWNER_GRANTS = ({"right": "read", "scope": "*"}, {"right": "write", "scope": "*"}, {"right": "admin", "scope": "*"})
_NUMBERED = {"memory": re.compile(r"m[1-9][0-9]{0,17}"), "session": re.compile(r"s[1-9][0-9]{0,17}")}


def valid_selector(scope: object) -> bool:
    """`*`, `space:<name>`, `space:<prefix>/*`, `memory:m<N>`, `session:s<N>` or `session:*`."""
    if not isinstance(scope, str):
        return False
    if scope in ("*", "session:*"):
        return True
    kind, _, rest = scope.partition(":")
    if kind == "space":
        name = rest[:-2] if rest.endswith("/*") else rest
        return len(rest.encode()) <= 130 and bool(SPACE_RE.match(name))
    pattern = _NUMBERED.get(kind)
    return pattern is not None and pattern.fullmatch(rest) is not None


class Readable:
    """A set of spaces and memories; `everything` short-cuts the SQL filter."""

    __slots__ = ("everything", "memories", "prefixes", "spaces")

    def __init__(self, everything: bool = False, spaces: frozenset[str] = frozenset(), prefixes: tuple[str, ...] = (),
                 memories: frozenset[int] = frozenset()) -> None:  # fmt: skip
        self.everything, self.spaces, self.prefixes, self.memories = everything, spaces, prefixes, memories

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Readable) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Readable(everything={self.everything}, spaces={set(self.spaces)}, prefixes={self.prefixes})"

    def _key(self) -> tuple[bool, frozenset[str], tuple[str, ...], frozenset[int]]:
        return self.everything, self.spaces, self.prefixes, self.memories

    def covers(self, space: str, memory: int | None = None) -> bool:
        if self.everything or space in self.spaces or (memory is not None and memory in self.memories):
            return True
        return any(space.startswith(p + "/") for p in self.prefixes)


class Principal:
    """Who a connection is: `owner`, `unknown` or a client `g<N>`, with its grants."""

    __slots__ = ("grants", "id", "label")

    def __init__(self, id: str, label: str | None = None, grants: tuple[dict[str, str], ...] = ()) -> None:
        self.id, self.label, self.grants = id, label, grants

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Principal) and (self.id, self.label, self.grants) == (
            other.id,
            other.label,
            other.grants,
        )

    def __hash__(self) -> int:
        return hash((self.id, self.label))

    def __repr__(self) -> str:
        return f"Principal({self.id!r}, {self.label!r})"

    @property
    def is_owner(self) -> bool:
        return self.id == "owner"

    def scope(self, right: str) -> Readable:
        """Everything this principal holds `right` on."""
        if self.is_owner:
            return Readable(everything=True)
        return readable_set(self.grants, right)

    def can(self, right: str, space: str, memory: int | None = None) -> bool:
        return can(self, right, space, memory)

    def author(self) -> dict[str, str]:
        """`{principal, label?}` as recorded on memories and events."""
        return {"principal": self.id, **({"label": self.label} if self.label else {})}

    def grant_list(self) -> list[dict[str, str]]:
        return [dict(g) for g in (OWNER_GRANTS if self.is_owner else self.grants)]


def readable_set(grants: Iterable[dict[str, str]], right: str) -> Readable:
    """The spaces, space prefixes and memories that `grants` give `right` on."""
    spaces: set[str] = set()
    prefixes: list[str] = []
    memories: set[int] = set()
    for grant in grants:
        if grant["right"] != right:
            continue
        kind, _, rest = grant["scope"].partition(":")
        if grant["scope"] == "*":
            return Readable(everything=True)
        if kind == "space" and rest.endswith("/*"):
            prefixes.append(rest[:-2])
        elif kind == "space":
            spaces.add(rest)
        elif kind == "memory":
            memories.add(int(rest[1:]))
    return Readable(False, frozenset(spaces), tuple(prefixes), frozenset(memories))


def can(principal: Principal, right: str, space: str, memory: int | None = None) -> bool:
    """Whether `principal` holds `right` on `space` (or on `memory` in it); admin is the owner's alone."""
    if principal.is_owner:
        return True
    if right == "admin":
        return False
    return principal.scope(right).covers(space, memory)


def owner() -> Principal:
    return Principal("owner", "owner")


def unknown(grants: list[dict[str, str]]) -> Principal:
    return Principal("unknown", None, tuple(grants))


def client(principal: str, name: str, grants: Iterable[dict[str, str]]) -> Principal:
    """A client principal `g<N>` with its stored grants, keeping only `right` and `scope`."""
    return Principal(principal, name, tuple({"right": g["right"], "scope": g["scope"]} for g in grants))


def session_scope(principal: Principal, right: str) -> tuple[bool, frozenset[int]]:
    """(every session?, session numbers) this principal holds `right` on through grants."""
    if principal.is_owner:
        return True, frozenset()
    ids: set[int] = set()
    for grant in principal.grants:
        if grant["right"] != right:
            continue
        if grant["scope"] in ("*", "session:*"):
            return True, frozenset()
        if grant["scope"].startswith("session:s"):
            ids.add(int(grant["scope"][9:]))
    return False, frozenset(ids)


def can_session(principal: Principal, right: str, session: int, reporter: str) -> bool:
    """Grants on the session, or having reported it (a reporter may read and end its sessions)."""
    if reporter == principal.id and principal.id != "unknown":
        return True
    everything, ids = session_scope(principal, right)
    return everything or session in ids


def can_see_event(principal: Principal, event: dict[str, object], can_read_session: Callable[[int, str], bool]) -> bool:
    """Per-event rule (docs/governance.md): client events for the owner; others by their space, memory or session."""
    if str(event["type"]).startswith("client."):
        return principal.is_owner
    if event["space"] is not None:
        memory = int(str(event["memory"])[1:]) if event["memory"] else None
        return principal.can("read", str(event["space"]), memory)
    if event["session"] is not None:
        return bool(can_read_session(int(str(event["session"])[1:]), str(event["principal"])))
    return principal.is_owner
