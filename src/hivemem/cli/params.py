"""Command-line values to wire params: JSON or comma arrays, @PATH objects, `-` for stdin, @project."""

from __future__ import annotations

import json
import sys

from hivemem.errors import InvalidParams
from hivemem.manifest import Param, Verb
from hivemem.protocol import MAX_DEPTH, MAX_FRAME, depth, too_deep
from hivemem.spaces import placeholder

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
# String params whose value is free text, so reading it from stdin makes sense (the help says so).
FREE_TEXT = ("content", "title", "source", "")


def flag(name: str) -> str:
    return name.replace("_", "-")


def help_text(p: Param) -> str:
    """A param's help on the command line: the manifest's text plus how the CLI reads its value."""
    from hivemem.cli.wording import typed

    text = typed(p.help)
    if p.choices and p.type == "string" and p.name not in text:  # `--kind` says which kinds there are
        text += f" One of: {', '.join(p.choices)}."
    if p.type == "string" and p.format in FREE_TEXT and not p.choices:
        text += " `-` reads it from stdin."
    elif p.type == "array":
        text += " A JSON array, a comma-separated list or @FILE (JSON); repeat the flag to add more."
    elif p.type == "object":
        text += " JSON, or @FILE to read it from a file."
    return text + (" (required)" if p.required else "")


def collect(verb: Verb, ns: dict[str, Any]) -> dict[str, Any]:
    """The wire params of parsed flags; a list flag given more than once accumulates."""
    params: dict[str, Any] = {}
    for p in verb.params:
        given = ns.get(p.name)
        if given is None:
            continue
        if p.type == "array":
            parts = [convert(p, text) for text in given]
            params[p.name] = parts[0] if len(parts) == 1 else _joined(p, parts)
        else:
            params[p.name] = convert(p, given)
    return params


def _joined(p: Param, parts: list[Any]) -> list[Any]:
    if not all(isinstance(part, list) for part in parts):
        raise InvalidParams("type", f"--{flag(p.name)} must be a list each time it is given", param=p.name)
    return [item for part in parts for item in part]


def bound(p: Param) -> int:
    """The most bytes a value of `p` may have: the configured content limit, the param's own, or a frame."""
    if p.format == "content":
        from hivemem.config import load

        return int(load()["memory.max_content_bytes"])
    return p.max_bytes or MAX_FRAME


def _too_big(p: Param, limit: int, where: str) -> InvalidParams:
    return InvalidParams("range", f"{p.name} read from {where} is over {limit} bytes", param=p.name, max_bytes=limit)


def _stdin(p: Param) -> str:
    limit = bound(p)
    data = sys.stdin.buffer.read(limit + 2)  # the value, its trailing newline, and a byte that shows it is over
    data = data[:-1] if data.endswith(b"\n") else data
    if len(data) > limit:
        raise _too_big(p, limit, "stdin")
    return data.decode("utf-8", "surrogateescape")


def _file(p: Param, path: str) -> str:
    limit = bound(p)
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _too_big(p, limit, path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParams("encoding", f"{path} is not valid UTF-8", param=p.name) from None


def _json(p: Param, text: str) -> Any:
    if text.startswith("@"):
        try:
            text = _file(p, text[1:])
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


def convert(p: Param, text: str) -> Any:
    """One flag's text as the param's wire value."""
    if p.type == "string":
        if text == "-":
            text = _stdin(p)
        if p.format == "path":  # the daemon's working directory is `/`: paths travel absolute (docs/operations.md)
            import os

            return os.path.abspath(os.path.expanduser(text))
        if p.format == "when":  # 7d, yesterday, a date: resolved here, in the caller's time zone (hivemem/dates.py)
            from hivemem.dates import resolve

            return resolve(text)
        return placeholder(text, param=p.name) if p.format == "space" else text
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
            [placeholder(i, param=p.name) if p.items == "space" and isinstance(i, str) else i for i in items]
            if isinstance(items, list)
            else items
        )
    return _json(p, text)
