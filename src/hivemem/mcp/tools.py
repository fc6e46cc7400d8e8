"""MCP tools as plain data, generated from the manifest: names, JSON input schemas, annotations, results.

Nothing here imports the MCP SDK, so the definitions can be checked without starting a server.
"""

from __future__ import annotations

import json
from typing import Any

from hivemem import records
from hivemem.auth import KINDS
from hivemem.manifest import TRUST_SENTENCE, VERBS, Param, Verb
from hivemem.spaces import fill_defaults, placeholder

ITEMS: dict[str, dict[str, Any]] = {"kind": {"type": "string", "enum": list(KINDS)}, "grant": {"type": "object"}}
TEXT_KEYS = frozenset({"content", "snippet", "text"})
SPACE_NOTE = " `@project` (this repository) and `@user` are resolved by the adapter before sending."


def tool_name(verb: Verb) -> str:
    """`memory.add` → `memory_add`."""
    return verb.name.replace(".", "_")


EXPOSED: dict[str, Verb] = {tool_name(v): v for v in VERBS if v.mcp}


def hints(verb: Verb) -> dict[str, bool]:
    """All four hints from the verb's traits, explicitly: the protocol's defaults would call every tool
    destructive and open-world."""
    return {
        "readOnlyHint": not verb.writes,
        "destructiveHint": verb.destructive,
        "idempotentHint": verb.idempotent,
        "openWorldHint": False,
    }


def param_schema(p: Param) -> dict[str, Any]:
    """One param as JSON Schema; byte bounds stay in the description (maxLength counts characters)."""
    schema: dict[str, Any] = {"type": p.type, "description": p.help}
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
    if _is_space(p) and "@project" not in p.help:
        schema["description"] += SPACE_NOTE
    return schema


def input_schema(verb: Verb) -> dict[str, Any]:
    """The tool's input: an object of the verb's params; unknown members are refused by the daemon.

    A param the client fills in when absent (`client_default`) is required on the wire but not here."""
    required = [p.name for p in verb.params if p.required and not p.client_default]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: param_schema(p) for p in verb.params if not p.by_client},
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def output_schema(verb: Verb) -> dict[str, Any]:
    """The tool's structured result: the verb's typed result shape (records.py) as JSON Schema."""
    return records.json_schema(verb.result)


def _is_space(p: Param) -> bool:
    return p.format == "space" or p.items == "space"


def prepare(verb: Verb, arguments: dict[str, Any], cwd: str, team_spaces: list[str]) -> dict[str, Any]:
    """Wire params: `@project`/`@user` resolved from `cwd`; absent `client_default` params filled in."""
    params = dict(arguments)
    for p in verb.params:
        value = params.get(p.name)
        if p.type == "string" and _is_space(p) and isinstance(value, str):
            params[p.name] = placeholder(value, cwd, p.name)
        elif p.type == "array" and _is_space(p) and isinstance(value, list):
            params[p.name] = [placeholder(v, cwd, p.name) if isinstance(v, str) else v for v in value]
    return fill_defaults(verb, params, cwd, team_spaces)


def carries_memory_text(verb: Verb, ok: Any) -> bool:
    """Whether a result hands memory text to the model: the verb's `returns_memory_text` trait says so, or (as a
    safety net for a verb that forgot the trait) the result holds text fields."""
    return verb.returns_memory_text or _has_text(ok)


def _has_text(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k in TEXT_KEYS or _has_text(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_text(v) for v in value)
    return False


def dumps(value: Any) -> str:
    """Compact JSON, ASCII only: no raw line separators or bidi characters reach the model's text."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def result_text(verb: Verb, ok: dict[str, Any]) -> str:
    """The text block of a result: the JSON, after the untrusted-data sentence when it carries memory text."""
    body = dumps(ok)
    return f"{TRUST_SENTENCE}\n{body}" if carries_memory_text(verb, ok) else body
