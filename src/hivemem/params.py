"""Param validation against the manifest (docs/verbs.md): unknown, missing, type, range, encoding, formats."""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hivemem import secrets
from hivemem.auth import KINDS, SPACE_RE, valid_selector
from hivemem.errors import InvalidParams
from hivemem.manifest import Param, Verb
from hivemem.protocol import check_depth

# A verb's params once `validate` passed them: every member the manifest declares for the verb, of its declared
# wire type and within its bounds, defaults filled in. A member's type is the manifest's, so it is read as `Any`
# here, once, rather than at every handler (docs/decisions.md D370).
Params = dict[str, Any]

TAG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")  # the ASCII tags: checked without the Unicode database
CLIENT_NAME_RE = TAG_RE  # client names stay ASCII (docs/decisions.md D280)
TAG_RULE = (
    "each tag is 1 to 64 bytes of letters and digits of any script and `-`, starts with a letter or digit, "
    "has letters in lower case where the script has case, and is in Unicode NFC"
)
TAG_BYTES = 64
ID_RE = {
    "memory_id": re.compile(r"^m[1-9][0-9]{0,17}$"),
    "session_id": re.compile(r"^s[1-9][0-9]{0,17}$"),
    "principal": re.compile(r"^g[1-9][0-9]{0,17}$"),
}
ID_EXAMPLE = {"memory_id": "m<N>", "session_id": "s<N>", "principal": "g<N>"}
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
CANONICAL_TIME = re.compile(r"[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\Z")  # UTC, milliseconds: as stored
EVENT_TYPE_RE = re.compile(r"^[a-z]+\.[a-z_]+$")
RELATIONS = ("continue", "fork", "subagent")
MAX_TAGS = 16
MAX_AUTHORS = 32
MAX_GRANTS = 64  # keeps a client's row, and so client.list and whoami, well inside a frame
INT64 = 1 << 63
PROVENANCE_BYTES = 2048
PROVENANCE_KINDS = ("conversation", "file", "import", "cli", "mcp", "hook")
SURFACES = ("cli", "mcp", "hook", "import", "web")
TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def valid_tag(tag: str) -> bool:
    """A tag of any script (docs/decisions.md D280): letters (categories L*, not upper or title case, with the
    combining marks that complete them) and decimal digits of every script and `-`, starting with a letter or
    digit, NFC, 1-64 bytes. ASCII tags keep their old grammar exactly, so every stored tag stays valid."""
    if tag.isascii():
        return TAG_RE.match(tag) is not None
    if len(tag.encode("utf-8", "surrogatepass")) > TAG_BYTES or not unicodedata.is_normalized("NFC", tag):
        return False
    for at, ch in enumerate(tag):
        cat = unicodedata.category(ch)
        if cat in ("Lu", "Lt") or not (cat[0] == "L" or cat == "Nd" or (at and (cat[0] == "M" or ch == "-"))):
            return False
    return True


def nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))  # isascii is a flag read, not a scan


def has_control(text: str, allowed: str = "") -> bool:
    """Whether `text` holds a Unicode Cc character (U+0000-U+001F, U+007F-U+009F) not in `allowed`."""
    if text.isascii():  # its only Cc characters are bytes 0-31 and 127: one C pass deletes them (isprintable
        raw = text.encode("ascii")  # looks each character up in the Unicode database)
        return len(raw.translate(None, _ascii_controls(allowed))) != len(raw)
    if text.isprintable():  # no category C or Z character at all: the usual text, checked in C
        return False
    return _controls(allowed).search(text) is not None


@functools.lru_cache(maxsize=8)
def _ascii_controls(allowed: str) -> bytes:
    return bytes(c for c in [*range(0x20), 0x7F] if chr(c) not in allowed)


@functools.lru_cache(maxsize=8)
def _controls(allowed: str) -> re.Pattern[str]:
    # One regex search instead of a Python call per character: 16 KB of content took ~15 ms the other way.
    chars = "".join(ch for ch in map(chr, [*range(0x20), *range(0x7F, 0xA0)]) if ch not in allowed)
    return re.compile(f"[{re.escape(chars)}]")


def check_encoding(value: object, param: str) -> None:
    """Refuse lone surrogates anywhere in a value (they are not valid UTF-8)."""
    if isinstance(value, str):
        if value.isascii():  # no surrogate in it, known without encoding it
            return
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParams("encoding", f"{param}: not valid UTF-8", param=param) from None
    elif isinstance(value, list):
        for v in value:
            check_encoding(v, param)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_encoding(k, param)
            check_encoding(v, param)


def validate(verb: Verb, params: object, max_content_bytes: int) -> Params:
    """Checked params with defaults filled in; the first problem raises invalid_params.*."""
    if not isinstance(params, dict):
        raise InvalidParams("type", "params must be an object", param="params")
    check_depth(params)  # first: nothing below walks a value that could be nested without bound
    for name in params:
        if verb.param(str(name)) is None:
            raise InvalidParams("unknown", f"{verb.name} has no param {name!r}", param=str(name))
    out: Params = {}
    for p in verb.params:
        value = params.get(p.name)
        if value is None:
            if p.required:
                raise InvalidParams("missing", f"{p.name} is required", param=p.name)
            if p.default is not None:
                out[p.name] = p.default
            continue
        out[p.name] = check(p, value, max_content_bytes)
    if out.get("provenance") == {} and verb.creates:
        # `{}` clears provenance on memory.update; on a new memory it is a provenance without `kind` (docs/verbs.md)
        raise _bad_provenance("provenance", "kind", f"kind is required, one of {', '.join(PROVENANCE_KINDS)}")
    return out


def check(p: Param, value: Any, max_content_bytes: int) -> Any:
    """One param's value, checked and normalized."""
    if not TYPES[p.type](value):
        raise InvalidParams("type", f"{p.name} must be {_article(p.type)}", param=p.name, expected=p.type)
    check_encoding(value, p.name)
    if p.choices and value not in p.choices:
        raise _range(p.name, f"must be one of {', '.join(p.choices)}", choices=list(p.choices))
    if p.type == "integer" and not -INT64 <= value < INT64:
        raise _range(p.name, "is out of range", min=p.minimum, max=p.maximum)
    if (p.minimum is not None and value < p.minimum) or (p.maximum is not None and value > p.maximum):
        raise _range(p.name, f"must be from {_num(p.minimum)} to {_num(p.maximum)}", min=p.minimum, max=p.maximum)
    if p.max_bytes is not None and nbytes(value) > p.max_bytes:
        raise _range(p.name, f"must be at most {p.max_bytes} bytes", max_bytes=p.max_bytes)
    if p.format == "content" and nbytes(value) > max_content_bytes:
        raise _range(p.name, f"must be at most {max_content_bytes} bytes", max_bytes=max_content_bytes)
    if p.scanned:  # before the grammar checks, so a secret is refused as one whatever else is wrong
        no_secret(p.name, value, name_scan if p.format == "space" else secrets.scan)
    if p.format == "content":
        return content(p.name, value)
    if p.type == "array":
        return array(p, value)
    fmt = FORMATS.get(p.format)
    return fmt(p.name, value) if fmt else value


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _num(x: float | None) -> str:
    return "-" if x is None else (str(int(x)) if float(x).is_integer() else str(x))


def _range(param: str, why: str, **data: object) -> InvalidParams:
    return InvalidParams("range", f"{param} {why}", param=param, **{k: v for k, v in data.items() if v is not None})


def content(param: str, value: str) -> str:
    if not value.strip():
        raise InvalidParams("content", f"{param} must not be empty or only whitespace", param=param)
    if has_control(value, "\t\r\n"):
        raise InvalidParams("content", f"{param} has a control character", param=param)
    return value


def no_secret(param: str, value: object, scan: Callable[[str], secrets.Finding | None] = secrets.scan) -> None:
    """invalid_params.secret_content if any string in `value` (object keys too) holds a secret; never echoes it."""
    for text in _strings(value):
        found = scan(text)
        if found is not None:
            why = f"{param} contains a secret ({found.kind}) on line {found.line}; it was not stored"
            raise InvalidParams("secret_content", why, param=param, kind=found.kind)


def name_scan(name: str) -> secrets.Finding | None:
    """A space name's scan, remembered: the same few names come with nearly every write, and a scan is a pure
    function of its text (docs/decisions.md D365). Only names of a space's length are kept (the grammar check
    comes after the scan), and memory text never is: a purge must leave no copy."""
    return _remembered_scan(name) if len(name) <= NAME_CACHE_CHARS else secrets.scan(name)


NAME_CACHE_CHARS = 128
_remembered_scan = functools.lru_cache(maxsize=1024)(secrets.scan)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for k, v in value.items() for text in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [text for v in value for text in _strings(v)]
    return []


def title(param: str, value: str) -> str:
    if has_control(value):
        raise InvalidParams("title", f"{param} has a control character", param=param)
    return value


def space(param: str, value: str) -> str:
    if nbytes(value) > 128 or not SPACE_RE.match(value):
        raise InvalidParams("space", f"{value!r} is not a space name (e.g. user, project/api)", param=param)
    return value


def source(param: str, value: str) -> str:
    if has_control(value):
        raise _range(param, "must not contain control characters")
    return value


def timestamp(param: str, value: str) -> str:
    """An RFC 3339 time, normalized to UTC with milliseconds; empty clears."""
    if value == "":
        return value
    if CANONICAL_TIME.match(value) and valid_time(value):  # already in the stored form (every exported time)
        return value
    if not TIME_RE.match(value):
        raise InvalidParams("type", f"{param} must be an RFC 3339 time", param=param, expected="RFC 3339 time")
    try:
        moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidParams(
            "type", f"{param} must be an RFC 3339 time", param=param, expected="RFC 3339 time"
        ) from None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def when(param: str, value: str) -> str:
    """A bound of a time window: an RFC 3339 time (never empty; clients resolve `7d` and the like first)."""
    if value == "":
        raise InvalidParams("type", f"{param} must be an RFC 3339 time", param=param, expected="RFC 3339 time")
    return timestamp(param, value)


def valid_time(value: str) -> bool:
    try:
        datetime.fromisoformat(value[:-1] + "+00:00")
    except ValueError:
        return False
    return True


def identifier(param: str, value: str, fmt: str) -> str:
    if not ID_RE[fmt].match(value):
        expected = ID_EXAMPLE[fmt]
        raise InvalidParams("type", f"{param} must be an id like {expected}", param=param, expected=expected)
    return value


def array(p: Param, value: list[Any]) -> list[Any]:
    if p.items == "grant":
        return grants(p.name, value)
    if not all(isinstance(v, str) for v in value):
        raise InvalidParams("type", f"{p.name} must be an array of strings", param=p.name, expected="array of strings")
    if p.items == "tag":
        tags(p.name, value)
    elif p.items == "kind" and not all(k in KINDS for k in value):
        raise _range(p.name, f"items must be among {', '.join(KINDS)}", choices=list(KINDS))
    elif p.items == "space":
        for s in value:
            space(p.name, s)
    elif p.items == "event_type" and not all(EVENT_TYPE_RE.match(t) for t in value):
        raise _range(p.name, "items must be event types like memory.added")
    elif p.items == "author" and (len(value) > MAX_AUTHORS or not all(_author(t) for t in value)):
        raise _range(p.name, f"takes up to {MAX_AUTHORS} principals or labels of 1 to 128 bytes")
    return list(value)


def _author(name: str) -> bool:
    return 0 < nbytes(name) <= 128 and not has_control(name)


def tags(param: str, value: list[str]) -> None:
    if len(value) > MAX_TAGS or len(set(value)) != len(value):
        raise _range(param, f"takes up to {MAX_TAGS} unique tags")
    for n, tag in enumerate(value):
        if not valid_tag(tag):
            raise _range(param, f"item {n + 1} is not a tag: {TAG_RULE}")


def grants(param: str, value: list[Any]) -> list[dict[str, str]]:
    """docs/security.md: each grant is {right: read|write, scope: selector}."""
    if len(value) > MAX_GRANTS:
        raise _range(param, f"takes at most {MAX_GRANTS} grants", max_items=MAX_GRANTS)
    for grant in value:
        if not isinstance(grant, dict) or set(grant) != {"right", "scope"}:
            raise InvalidParams(
                "type", f'{param} items are {{"right", "scope"}} objects', param=param, expected="grant"
            )
        if grant["right"] not in ("read", "write"):
            raise InvalidParams("client_right", f"{param}: clients get read and write only", param=param)
        if not valid_selector(grant["scope"]):
            raise InvalidParams("grant_scope", f"{param}: {str(grant['scope'])[:80]!r} is not a selector", param=param)
    return [{"right": g["right"], "scope": g["scope"]} for g in value]


def client_name(param: str, value: str) -> str:
    if not CLIENT_NAME_RE.match(value):
        raise _range(param, "must be 1 to 64 lower-case ASCII letters, digits and `-`, starting with a letter or digit")
    return value


def harness(param: str, value: str) -> str:
    if not value or has_control(value):
        raise _range(param, "must be non-empty text without control characters")
    return value


def relation(param: str, value: str) -> str:
    if value not in RELATIONS:
        raise InvalidParams("relation", f"{param} must be one of {', '.join(RELATIONS)}", param=param)
    return value


def cwd(param: str, value: str) -> str:
    if not value.startswith("/") or has_control(value):
        raise _range(param, "must be an absolute path without control characters")
    return value


def provenance(param: str, value: dict[str, Any]) -> dict[str, Any]:
    """docs/verbs.md: only known members, each within its bound; at most 2048 bytes serialized."""
    import json

    if not value:
        return value  # an empty object clears provenance on update
    if nbytes(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) > PROVENANCE_BYTES:
        raise _bad_provenance(param, "", f"is over {PROVENANCE_BYTES} bytes")
    if value.get("kind") not in PROVENANCE_KINDS:
        raise _bad_provenance(param, "kind", f"kind is required, one of {', '.join(PROVENANCE_KINDS)}")
    for member, member_value in value.items():
        rule = PROVENANCE_RULES.get(member)
        if rule is None:
            raise _bad_provenance(param, member, f"has no member {member!r}")
        rule(param, member, member_value)
    return value


def _bad_provenance(param: str, member: str, why: str) -> InvalidParams:
    return InvalidParams("provenance", f"{param} {why}", param=param, **({"member": member} if member else {}))


def _bounded(limit: int, choices: tuple[str, ...] = ()) -> Callable[[str, str, object], None]:
    def rule(param: str, member: str, value: object) -> None:
        if not isinstance(value, str) or nbytes(value) > limit or has_control(value):
            raise _bad_provenance(param, member, f"{member} must be a string of at most {limit} bytes")
        if choices and value not in choices:
            raise _bad_provenance(param, member, f"{member} must be one of {', '.join(choices)}")

    return rule


def _path_rule(param: str, member: str, value: Any) -> None:
    _bounded(512)(param, member, value)
    if value.startswith("/") or ".." in value.split("/") or not value:
        raise _bad_provenance(param, member, "path must be relative, without '..' segments")


def _line_rule(param: str, member: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _bad_provenance(param, member, "line must be a positive integer")


def _daemon_only(param: str, member: str, value: object) -> None:
    raise _bad_provenance(param, member, f"{member} is set by the daemon on import only")


PROVENANCE_RULES: dict[str, Callable[[str, str, object], None]] = {
    "kind": _bounded(32, PROVENANCE_KINDS),
    "host": _bounded(64),
    "surface": _bounded(16, SURFACES),
    "path": _path_rule,
    "line": _line_rule,
    "thread_id": _bounded(128),
    "action": _bounded(64),
    "reason": _bounded(500),
    "original_store": _daemon_only,
    "original_id": _daemon_only,
    "original_author": _daemon_only,
}


def path(param: str, value: str) -> str:
    """An absolute path: the CLI resolves relative ones before sending; the daemon's working directory is `/`."""
    if not value.startswith("/") or has_control(value):
        raise InvalidParams("path", f"{param} must be an absolute path without control characters", param=param)
    return value


def space_map(param: str, value: dict[str, Any]) -> dict[str, str]:
    """{"old": "new"} space names."""
    for old, new in value.items():
        space(param, old)
        if not isinstance(new, str):
            raise InvalidParams("type", f"{param} maps space names to space names", param=param, expected="space")
        space(param, new)
    return dict(value)


FORMATS: dict[str, Callable[[str, Any], Any]] = {
    "title": title,
    "space": space,
    "source": source,
    "timestamp": timestamp,
    "when": when,
    "memory_id": lambda n, v: identifier(n, v, "memory_id"),
    "session_id": lambda n, v: identifier(n, v, "session_id"),
    "principal": lambda n, v: identifier(n, v, "principal"),
    "provenance": provenance,
    "client_name": client_name,
    "harness": harness,
    "relation": relation,
    "cwd": cwd,
    "path": path,
    "space_map": space_map,
}
