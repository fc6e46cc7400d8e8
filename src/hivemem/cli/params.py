"""Command-line values to wire params: JSON or comma arrays, @PATH objects, `-` for stdin, @project."""

from __future__ import annotations

import json
import sys

from hivemem.errors import InvalidParams
from hivemem.manifest import Param
from hivemem.protocol import MAX_DEPTH, depth, too_deep
from hivemem.spaces import placeholder

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _json(p: Param, text: str) -> Any:
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise InvalidParams(
                "type", f"--{flag(p.name)}: cannot read {text[1:]}: {exc.strerror}", param=p.name
            ) from None
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep(p.name) from None
    except ValueError:
        raise InvalidParams("type", f"--{flag(p.name)} must be JSON", param=p.name, expected=p.type) from None
    if depth(value) > MAX_DEPTH:  # refused here as the daemon would, before anything is sent
        raise too_deep(p.name)
    return value


def flag(name: str) -> str:
    return name.replace("_", "-")


def convert(p: Param, text: str) -> Any:
    """One flag's text as the param's wire value."""
    if p.type == "string":
        if text == "-":
            data = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
            text = data[:-1] if data.endswith("\n") else data
        return placeholder(text) if p.format == "space" else text
    if p.type in ("integer", "number"):
        try:
            return int(text) if p.type == "integer" else float(text)
        except ValueError:
            what = "an integer" if p.type == "integer" else "a number"
            raise InvalidParams("type", f"--{flag(p.name)} must be {what}", param=p.name, expected=p.type) from None
    if p.type == "boolean":
        if text.lower() not in TRUE + FALSE:
            raise InvalidParams("type", f"--{flag(p.name)} takes true or false", param=p.name, expected="boolean")
        return text.lower() in TRUE
    if p.type == "array":
        is_file = text.startswith("@") and text.split(",")[0] not in ("@project", "@user")
        items = _json(p, text) if text.startswith("[") or is_file else [t.strip() for t in text.split(",") if t.strip()]
        return (
            [placeholder(i) if p.items == "space" and isinstance(i, str) else i for i in items]
            if isinstance(items, list)
            else items
        )
    return _json(p, text)
