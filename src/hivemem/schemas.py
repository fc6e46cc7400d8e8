"""The record shapes of `records.py` as JSON Schema (each MCP tool's outputSchema) and as a tree of shapes
(the Records section of docs/verbs.md). Off the CLI's warm path."""

from __future__ import annotations

from typing import TypedDict

from hivemem import records


class Schema(TypedDict, total=False):
    """The JSON Schema keywords hivemem writes: a record's shape (here) and a tool's params (mcp/tools.py)."""

    type: str
    description: str
    enum: list[str]
    minimum: float
    maximum: float
    default: object
    items: Schema
    properties: dict[str, Schema]
    required: list[str]
    additionalProperties: bool
    anyOf: list[Schema]


JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "None": "null"}


def json_schema(shape: type, shallow: bool = False) -> Schema:
    """The JSON Schema of a shape: its members typed, the required ones required, no others allowed. Shallow: its
    members' nested shapes are plain objects and arrays, unchecked inside."""
    members = records.fields(shape)
    typed = shallow_schema if shallow else type_schema
    schema: Schema = {
        "type": "object",
        "properties": {name: typed(text) for name, (text, _) in members.items()},
        "additionalProperties": False,
    }
    required = [name for name, (_, needed) in members.items() if needed]
    if required:
        schema["required"] = required
    return schema


def type_schema(text: str) -> Schema:
    """JSON Schema of one member type as written: str, int, float, bool, None, object (any value), list[X],
    dict[...], a shape's name, or a union of these with `|`."""
    options = _split(text)
    if len(options) > 1:
        return {"anyOf": [type_schema(option) for option in options]}
    if text.startswith("list["):
        return {"type": "array", "items": type_schema(text[5:-1])}
    if text == "object":
        return {}
    if text.startswith("dict["):
        return {"type": "object"}
    if text in records.SHAPES:
        return json_schema(records.SHAPES[text])
    return {"type": JSON_TYPES[text]}


def shallow_schema(text: str) -> Schema:
    """JSON Schema of one member type, without looking inside arrays or objects."""
    options = _split(text)
    if len(options) > 1:
        return {"anyOf": [shallow_schema(option) for option in options]}
    if text.startswith("list["):
        return {"type": "array"}
    if text == "object":
        return {}
    if text.startswith("dict[") or text in records.SHAPES:
        return {"type": "object"}
    return {"type": JSON_TYPES[text]}


def nested(shape: type) -> list[type]:
    """The shapes a shape's members name, depth first, each once."""
    found: list[type] = []
    for text, _ in records.fields(shape).values():
        for name in _names(text):
            inner = records.SHAPES.get(name)
            if inner is not None and inner not in found:
                found += [inner, *(n for n in nested(inner) if n not in found)]
    return found


def _names(text: str) -> list[str]:
    for mark in "[],|":
        text = text.replace(mark, " ")
    return text.split()


def _split(text: str) -> list[str]:
    """`A | list[B | C]` → [`A`, `list[B | C]`]: the top-level alternatives of a union."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "[") - (char == "]")
        if char == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]
