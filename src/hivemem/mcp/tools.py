"""MCP tools as plain data, generated from the manifest: names, JSON input schemas, annotations, results.

Nothing here imports the MCP SDK, so the definitions can be checked without starting a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from hivemem import schemas
from hivemem.auth import KINDS
from hivemem.dates import resolve
from hivemem.manifest import MCP_DEFAULT, TRUST_SENTENCE, VERBS, Param, Verb
from hivemem.spaces import fill_defaults, placeholder

ITEMS: dict[str, schemas.Schema] = {"kind": {"type": "string", "enum": list(KINDS)}, "grant": {"type": "object"}}
TEXT_KEYS = frozenset({"content", "snippet", "text"})
SPACE_NOTE = " `@project` (this repository) and `@user` are resolved by the adapter before sending."


def tool_name(verb: Verb) -> str:
    """`memory.add` → `memory_add`."""
    return verb.name.replace(".", "_")


EXPOSED: dict[str, Verb] = {tool_name(v): v for v in VERBS if v.mcp}

# What an agent does mid-task: find, read, store, correct, and judge memories (docs/decisions.md D272). The rest
# of EXPOSED is served with `hivemem mcp --tools all` or config `mcp.tools = "all"`.
DEFAULT = MCP_DEFAULT
TOOL_SETS = ("default", "all")

# Short tool descriptions (docs/decisions.md D272): a tool listed here is described by its line, not by the
# verb's summary, which the CLI and docs/verbs.md keep whole. A result's `notice` carries the untrusted-data
# sentence, so these do not repeat it.
BRIEF: dict[str, str] = {
    "memory_search": "Search stored memories (past work, decisions, conventions, lessons) by words.",
    "memory_recall": "Recall memories for the task at hand from @project, user and team spaces, as bounded JSON "
    "lines; without a query, the newest preferences, conventions, lessons and procedures.",
    "memory_get": "Read one memory, with its relations.",
    "memory_list": "List memories, newest first.",
    "memory_add": "Store a memory the user asked you to remember (for your own inferences use memory_capture). "
    "The same content in the same space returns the existing one. Credentials are refused.",
    "memory_capture": "Propose something you inferred as a draft for a person to confirm; not recalled until "
    "confirmed (what the user asked you to remember: memory_add). Credentials are refused.",
    "memory_update": "Change a memory; needs the revision you read. Credentials are refused.",
    "memory_delete": "Soft-delete a memory (restorable); needs the revision you read.",
    "memory_challenge": "Say whether a memory still holds. stale, wrong and superseded archive it, and only "
    "preview unless confirm is true.",
    "memory_relate": "Record a relation from one memory to another.",
}
# Short param descriptions for the tools' input schemas; "" leaves the description out (the name says it).
PARAM_BRIEF: dict[str, str] = {
    "space": "Space: a name, @project (this repository) or @user.",
    "spaces": "Spaces to match (default: all readable).",
    "memory_recall.spaces": "The read path in order (default: @project, user, team).",
    "kinds": "",
    "tags": "Tags: letters, digits and -, at most 16.",
    "kind": "",
    "title": "At most 200 bytes.",
    "source": "Attribution claim, at most 128 bytes.",
    "provenance": "Claim: {kind, host, surface, path, line, thread_id, action, reason}.",
    "confidence": "",
    "confidence_state": "",
    "review_after": "RFC 3339 time.",
    "expires_at": "RFC 3339 time.",
    "session": "Session id s<N>.",
    "lineage": "With session: its ancestors too.",
    "id": "Memory id m<N>.",
    "revision": "",
    "include_deleted": "",
    "after": "Page after this id.",
    "limit": "",
    "record_usage": "",
    "mode": "",
    "status": "",
    "reason": "Why, at most 500 bytes.",
    "replacement": "With superseded: the memory replacing it.",
    "confirm": "Apply an archiving outcome.",
    "memory_relate.source": "From memory m<N>.",
    "target": "To memory m<N>.",
    "relation": "What source is to target.",
    "content": "",
    "query": "Plain words, no query syntax.",
    "outcome": "",
}
REVISION_BRIEF = "The revision you read."


def hints(verb: Verb) -> dict[str, bool]:
    """All four hints from the verb's traits, explicitly: the protocol's defaults would call every tool
    destructive and open-world."""
    return {
        "readOnlyHint": not verb.writes,
        "destructiveHint": verb.destructive,
        "idempotentHint": verb.idempotent,
        "openWorldHint": False,
    }


def param_schema(p: Param, compact: str = "") -> schemas.Schema:
    """One param as JSON Schema; byte bounds stay in the description (maxLength counts characters). Compact (the
    tool's name): the short description of PARAM_BRIEF (`tool.param`, else `param`), or none."""
    schema: schemas.Schema = {"type": p.type}
    text = p.help if not compact else PARAM_BRIEF.get(f"{compact}.{p.name}", PARAM_BRIEF.get(p.name, p.help))
    if compact and p.name == "revision" and p.required:
        text = REVISION_BRIEF
    if text:
        schema["description"] = text
    if p.choices:
        schema["enum"] = list(p.choices)
    if p.minimum is not None:
        schema["minimum"] = p.minimum
    if p.maximum is not None:
        schema["maximum"] = p.maximum
    if p.default is not None:
        schema["default"] = p.default
    if p.type == "array":
        schema["items"] = ITEMS.get(p.items, {"type": "string"})
    if not compact and _is_space(p) and "@project" not in p.help:
        schema["description"] += SPACE_NOTE
    return schema


def input_schema(verb: Verb, compact: bool = True) -> schemas.Schema:
    """The tool's input: an object of the verb's params; unknown members are refused by the daemon.

    A param the client fills in when absent (`client_default`) is required on the wire but not here."""
    required = [p.name for p in verb.params if p.required and not p.client_default]
    brief = tool_name(verb) if compact else ""
    schema: schemas.Schema = {
        "type": "object",
        "properties": {p.name: param_schema(p, brief) for p in verb.params if p.tool},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def description(name: str) -> str:
    """The tool's description: its short line, else the verb's summary."""
    return BRIEF.get(name) or EXPOSED[name].summary


def output_schema(verb: Verb) -> schemas.Schema:
    """The tool's structured result: the required top-level members of the verb's result shape (records.py), nested
    shapes as plain objects and arrays, others allowed (docs/decisions.md D272); first a required `notice` when
    the result carries memory text (D271). docs/verbs.md has the whole shape."""
    full = schemas.json_schema(verb.result, shallow=True)
    required = full.get("required", [])
    if carries_memory_text(verb):
        required = ["notice", *required]
        full["properties"]["notice"] = {"type": "string"}
    schema: schemas.Schema = {"type": "object", "properties": {name: full["properties"][name] for name in required}}
    if required:
        schema["required"] = required
    return schema


def selected(which: str) -> dict[str, Verb]:
    """The tools of a tool set: `default` (DEFAULT) or `all` (every verb the manifest marks for MCP)."""
    return dict(EXPOSED) if which == "all" else {name: EXPOSED[name] for name in DEFAULT}


def _is_space(p: Param) -> bool:
    return p.format == "space" or p.items == "space"


def prepare(verb: Verb, arguments: Mapping[str, object], cwd: str, team_spaces: list[str]) -> dict[str, object]:
    """Wire params: `@project`/`@user` resolved from `cwd`, relative times (`7d`, `yesterday`) in the local time
    zone; absent `client_default` params filled in."""
    params = dict(arguments)
    for p in verb.params:
        value = params.get(p.name)
        if p.format == "when" and isinstance(value, str):
            params[p.name] = resolve(value)
        elif p.type == "string" and _is_space(p) and isinstance(value, str):
            params[p.name] = placeholder(value, cwd, p.name)
        elif p.type == "array" and _is_space(p) and isinstance(value, list):
            params[p.name] = [placeholder(v, cwd, p.name) if isinstance(v, str) else v for v in value]
    return fill_defaults(verb, params, cwd, team_spaces)


def carries_memory_text(verb: Verb) -> bool:
    """Whether a verb's results hand memory text to the model: its `returns_memory_text` trait says so, or (as a
    safety net for a verb that forgot the trait) its result shape has a `content`, `snippet` or `text` member at
    any depth."""
    return verb.returns_memory_text or _has_text(schemas.json_schema(verb.result))


def _has_text(schema: object) -> bool:
    if isinstance(schema, dict):
        named = schema.get("properties", {})
        return any(k in TEXT_KEYS for k in named) or any(_has_text(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_text(v) for v in schema)
    return False


def dumps(value: object) -> str:
    """Compact JSON, ASCII only: no raw line separators or bidi characters reach the model's text."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def result_text(ok: Mapping[str, object], noticed: bool) -> str:
    """The text block of a result: the JSON, after the untrusted-data sentence when it carries memory text."""
    body = dumps(ok)
    return f"{TRUST_SENTENCE}\n{body}" if noticed else body
