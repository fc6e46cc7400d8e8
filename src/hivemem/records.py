"""The typed shapes that go on the wire: each verb's result and the records in it (docs/verbs.md, docs/security.md,
docs/governance.md).

Backend-neutral: a store of any kind returns these, ops passes them on, and the manifest declares each verb's
result as one of them. The same declaration gives `docs/verbs.md`, the MCP `outputSchema` and the CLI's table
columns, and a test checks every verb's real result against it.

For mypy each shape is a TypedDict. At run time it is a plain `dict` subclass whose annotations (strings) are
read by `fields()`: the CLI's warm path imports this module, and `typing` would cost it milliseconds.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import NotRequired
    from typing import TypedDict as Shape
else:
    Shape = dict


class Author(Shape):
    """Who wrote or changed something."""

    principal: str
    label: NotRequired[str]


class Grant(Shape):
    right: str
    scope: str


class Relation(Shape):
    relation: str
    direction: str
    target: NotRequired[str]
    source: NotRequired[str]


class MemoryBase(Shape):
    """The members a memory has in a list and when read whole (`Hit`, `MemoryRead`)."""

    id: str
    space: str
    kind: str
    title: NotRequired[str]
    tags: list[str]
    status: str
    source: NotRequired[str]
    provenance: NotRequired[dict[str, object]]
    confidence_state: NotRequired[str]
    review_after: NotRequired[str]
    expires_at: NotRequired[str]
    review: NotRequired[str]
    revision: int
    author: Author
    updated_by: Author
    session: NotRequired[str]
    created: str
    updated: str
    deleted: NotRequired[str]


class Hit(MemoryBase):
    """A memory in a list: every member of Memory but `content`, and a snippet of it."""

    confidence: float
    snippet: str
    store: NotRequired[str]  # `personal` or `team`, only with a team store mounted (docs/team.md)


class SearchHit(Hit):
    """A search result: its fused score, and its rank in each list that found it (with the vector list, the
    cosine similarity too)."""

    score: float
    fts_rank: NotRequired[int]
    vector_rank: NotRequired[int]
    similarity: NotRequired[float]


class MemoryRead(MemoryBase):
    """memory.get: the Memory with its relations and embedding state; with `revision`, that version and its
    action (a version keeps the members it had, so most are optional)."""

    content: str
    confidence: NotRequired[float]
    embedding: NotRequired[str]
    relations: NotRequired[list[Relation]]
    action: NotRequired[str]


class Written(Shape):
    """A memory write: its revision now, and whether anything changed (`status` of an existing non-active
    duplicate)."""

    id: str
    revision: int
    changed: bool
    status: NotRequired[str]


class Added(Shape):
    """memory.add: the new memory, or the live one already holding this text (`changed: false`); a caller who
    cannot read that one learns only `changed: false` (ids reveal nothing, docs/security.md)."""

    id: NotRequired[str]
    revision: NotRequired[int]
    changed: bool
    status: NotRequired[str]


class Deleted(Shape):
    id: str
    revision: int
    deleted: str


class Restored(Shape):
    id: str
    revision: int


class VersionEntry(Shape):
    revision: int
    action: str
    by: Author
    ts: str
    bytes: int


class History(Shape):
    versions: list[VersionEntry]


class Window(Shape):
    """The absolute time window a read used (docs/verbs.md): [since, until) on `updated` or `created`."""

    since: NotRequired[str]
    until: NotRequired[str]
    on: str


class MemoryPage(Shape):
    memories: list[Hit]
    next: str | None
    window: NotRequired[Window]
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class SearchResult(Shape):
    mode: str
    fallback: NotRequired[str]
    results: list[SearchHit]
    next: NotRequired[str]
    window: NotRequired[Window]
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class Recall(Shape):
    """The rendered recall envelope (docs/hooks.md) and what it holds."""

    text: str
    count: int
    truncated: bool
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class Forgotten(Shape):
    id: str
    revision: int


class ForgetFailure(Shape):
    id: str
    code: str


class Forget(Shape):
    deleted: list[Forgotten]
    failed: list[ForgetFailure]
    next: str | None


class Purged(Shape):
    id: str


class SpaceRow(Shape):
    space: str
    memories: int
    updated: str | None
    store: NotRequired[str]  # with a team store mounted: `personal` or `team` (docs/team.md)


class SpacePage(Shape):
    spaces: list[SpaceRow]
    next: str | None
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class StoreCounts(Shape):
    """Counts of what the caller can read; only the owner sees `path` and `bytes`."""

    path: NotRequired[str]
    schema_version: int
    sqlite_version: str
    bytes: NotRequired[int]
    memories: int
    drafts: int
    archived: int
    deleted: int
    versions: int
    sessions: int
    vectors: int
    pending: int
    embeddings: str


class TeamStatus(StoreCounts):
    """A mounted team store's status as the team token sees it: `server` is team.url without its password,
    `spaces` the team.spaces patterns that live there (docs/team.md)."""

    server: str
    spaces: list[str]


class Status(StoreCounts):
    """The personal store's counts; with a team store mounted, the owner also gets the team store's under `team`,
    or `unavailable: ["team"]` when it did not answer in time (docs/team.md)."""

    team: NotRequired[TeamStatus]
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class Stopping(Shape):
    stopping: bool


class Whoami(Shape):
    principal: str
    label: NotRequired[str]
    grants: list[Grant]


class ClientAdded(Shape):
    """The token is shown once, here, and never again."""

    client: str
    principal: str
    token: str
    expires: str | None


class ClientRow(Shape):
    name: str
    principal: str
    grants: list[Grant]
    created: str
    expires: str | None


class ClientPage(Shape):
    clients: list[ClientRow]
    next: str | None


class ClientRemoved(Shape):
    client: str
    principal: str


class SessionStarted(Shape):
    session: str
    changed: bool


class SessionEnded(Shape):
    session: str
    ended: str
    changed: bool


class Session(Shape):
    """A session (docs/hooks.md, `--record-session`); a parent the caller cannot read is left out."""

    session: str
    harness: str
    harness_session: NotRequired[str]
    parent: NotRequired[str]
    relation: NotRequired[str]
    cwd: NotRequired[str]
    reported_by: Author
    started: str
    ended: NotRequired[str]


class SessionPage(Shape):
    sessions: list[Session]
    next: str | None


class Chain(Shape):
    chain: list[Session]
    truncated: bool


class SessionPurged(Shape):
    session: str


class Event(Shape):
    """An audit event as shown: absent members left out, `data` always present."""

    id: int
    ts: str
    type: str
    principal: str
    label: NotRequired[str]
    space: NotRequired[str]
    memory: NotRequired[str]
    session: NotRequired[str]
    revision: NotRequired[int]
    data: dict[str, object]


class EventPage(Shape):
    events: list[Event]
    next: int | None


class Following(Shape):
    """The reply of events.follow; `{"event": Event}` lines follow it."""

    following: bool
    after: int


class Reloaded(Shape):
    reloaded: bool


class Reindexed(Shape):
    """embeddings.reindex: vectors dropped, memories now pending, and the provider that will embed them."""

    dropped: int
    pending: int
    embeddings: str


class Exported(Shape):
    """store.export: the file the daemon wrote, how many memories it holds and its size."""

    path: str
    memories: int
    bytes: int


class Planned(Shape):
    add: int
    duplicate: int
    skip: int


class Imported(Shape):
    """store.import: what applying the document does (dry run) or did."""

    planned: Planned
    applied: bool


class Finding(Shape):
    """One integrity problem (docs/operations.md)."""

    check: str
    memory: NotRequired[str]
    event: NotRequired[int]
    detail: str


class CheckReport(Shape):
    ok: bool
    findings: list[Finding]
    counts: dict[str, int]
    skipped: NotRequired[list[str]]  # checks a read connection cannot run (store check --online)


class HygieneAction(Shape):
    """The governance verb call that would fix a finding: the verb and its params (nothing runs by itself)."""

    verb: str
    params: dict[str, object]


class HygieneFinding(Shape):
    """One hygiene finding: its kind, the memories it is about, a reason a person can check, and its fix."""

    kind: str
    memories: list[str]
    space: str
    reason: str
    fix: str
    action: HygieneAction
    similarity: NotRequired[float]
    store: NotRequired[str]  # `personal` or `team`, only with a team store mounted (docs/team.md)


class HygieneReport(Shape):
    """memory.hygiene: findings (at most `limit`), counts of every finding by kind, memories examined."""

    findings: list[HygieneFinding]
    counts: dict[str, int]
    memories: int
    embeddings: str
    usage_recorded: bool
    truncated: bool
    unavailable: NotRequired[list[str]]  # stores that did not answer in time: ["team"] (docs/team.md)


class Repair(Shape):
    """store.repair_fts: the index findings a rebuild clears; applied, the backup taken and the rows indexed."""

    applied: bool
    findings: list[Finding]
    backup: NotRequired[str]
    indexed: NotRequired[int]


class BackupMade(Shape):
    path: str
    bytes: int


class Related(Shape):
    """A memory similar to a captured draft: Jaccard similarity of their capture-key token sets."""

    id: str
    similarity: float


class Captured(Shape):
    """memory.capture: an exact duplicate (`duplicate_of`, nothing written) or the new draft (docs/governance.md)."""

    duplicate_of: NotRequired[str]
    id: NotRequired[str]
    revision: NotRequired[int]
    status: NotRequired[str]
    changed: bool
    related: list[Related]
    exhaustive: bool
    independent: NotRequired[bool]


class Challenged(Shape):
    """memory.challenge: applied, or (a destructive outcome without `confirm`) the preview of its effect."""

    id: str
    revision: int
    outcome: str
    applied: bool
    effect: NotRequired[str]


class Relating(Shape):
    """memory.relate and memory.unrelate."""

    source: str
    target: str
    relation: str
    changed: bool


if TYPE_CHECKING:
    from typing import TypedDict

    # `from` is a keyword, so this shape is declared the functional way for mypy
    Moved = TypedDict("Moved", {"id": str, "from": str, "revision": int})
else:

    class Moved(dict):
        """memory.move: the new memory (revision 1) and the old one's id."""

        __annotations__ = {"id": "str", "from": "str", "revision": "int"}


SHAPES: dict[str, type] = {
    name: value for name, value in globals().items()
    if isinstance(value, type) and issubclass(value, dict) and value is not dict
}  # fmt: skip
# The CLI's table for a list of these records: (header, member) per column, left to right. A member "" is a
# column computed from the whole record (the CLI's cell formatters are keyed by header).
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "Hit": (("ID", "id"), ("REV", "revision"), ("SPACE", "space"), ("KIND", "kind"), ("TEXT", "snippet")),
    "VersionEntry": (("REV", "revision"), ("ACTION", "action"), ("BY", "by"), ("TIME", "ts"), ("SIZE", "bytes")),
    "SpaceRow": (("SPACE", "space"), ("MEMORIES", "memories"), ("UPDATED", "updated")),
    "Forgotten": (("ID", "id"), ("REV", "revision"), ("STATUS", "")),
    "ClientRow": (("NAME", "name"), ("PRINCIPAL", "principal"), ("GRANTS", "grants"), ("CREATED", "created"),
                  ("EXPIRES", "expires")),
    "Event": (("ID", "id"), ("TIME", "ts"), ("TYPE", "type"), ("BY", "principal"), ("WHERE", ""),
              ("REV", "revision"), ("DATA", "data")),
    "HygieneFinding": (("KIND", "kind"), ("IDS", "memories"), ("SPACE", "space"), ("REASON", "reason"),
                       ("FIX", "fix")),
    "Session": (("SESSION", "session"), ("HARNESS", "harness"), ("HARNESS SESSION", "harness_session"),
                ("PARENT", "parent"), ("REPORTED BY", "reported_by"), ("STARTED", "started"), ("ENDED", "ended")),
}  # fmt: skip


def fields(shape: type) -> dict[str, tuple[str, bool]]:
    """Each member of `shape`, inherited ones first: (its type as written, whether it is required)."""
    out: dict[str, tuple[str, bool]] = {}
    for cls in reversed(shape.__mro__):
        # a class's own annotations only (`cls.__annotations__` would be a base's); `inspect` costs the warm path
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
            text = str(annotation)
            optional = text.startswith("NotRequired[")
            out[name] = (text[len("NotRequired[") : -1] if optional else text, not optional)
    return out


def columns(shape: type) -> tuple[tuple[str, str], ...]:
    """The table columns of a record shape (a shape derived from one has its columns), or () for none."""
    for cls in shape.__mro__:
        if cls.__name__ in COLUMNS:
            return COLUMNS[cls.__name__]
    return ()


def table_member(shape: type) -> tuple[str, type] | None:
    """The first list member of a result whose records have table columns, with the records' shape."""
    for name, (text, _) in fields(shape).items():
        inner = SHAPES.get(text[5:-1]) if text.startswith("list[") else None
        if inner is not None and columns(inner):
            return name, inner
    return None
