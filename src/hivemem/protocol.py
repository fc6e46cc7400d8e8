"""The JSON-lines wire (docs/protocol.md): one object per line, UTF-8, at most MAX_FRAME bytes."""

from __future__ import annotations

import json

from hivemem.errors import HivememError, InvalidParams

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_FRAME = 4 * 1024 * 1024
PROTOCOL = 1
MAX_DEPTH = 32  # levels of arrays and objects one param may nest (docs/verbs.md)
ID_BYTES = 64
INT64 = 1 << 63
JSON_SPACE = " \t\n\r"
_decoder = json.JSONDecoder()


def encode(message: Mapping[str, object]) -> bytes:
    """One line; non-ASCII escaped so no byte sequence can split a frame."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"
    except RecursionError:  # a caller's value nested thousands deep: refuse it like the daemon would
        raise too_deep("params") from None


def depth(value: object, limit: int = MAX_DEPTH) -> int:
    """Levels of arrays and objects in a JSON value (a scalar is 0, `[1]` is 1); counting stops past `limit`."""
    deepest = 0
    stack: list[tuple[list[object] | dict[object, object], int]] = (
        [(value, 1)] if isinstance(value, list | dict) else []
    )
    while stack and deepest <= limit:
        node, level = stack.pop()
        deepest = max(deepest, level)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children if isinstance(child, list | dict))
    return deepest


def too_deep(param: str) -> InvalidParams:
    return InvalidParams("depth", f"{param} is nested deeper than {MAX_DEPTH} levels", param=param, max_depth=MAX_DEPTH)


def check_depth(params: Mapping[str, object]) -> None:
    """invalid_params.depth for the first param nested deeper than MAX_DEPTH levels."""
    for name, value in params.items():
        if depth(value) > MAX_DEPTH:
            raise too_deep(str(name))


def decode(line: bytes) -> dict[str, object]:
    """A request line as an object, or invalid_params.encoding / .protocol / .depth (answered with a null id)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParams("encoding", "the request is not valid UTF-8", param="request") from None
    try:
        message = json.loads(text)
    except RecursionError:
        raise deep_request(text) from None
    except ValueError:
        raise InvalidParams("protocol", "the request is not a JSON object", param="request") from None
    if not isinstance(message, dict):
        raise InvalidParams("protocol", "a request is {id, verb, params}", param="request")
    return message


def request_id(message: Mapping[str, object]) -> int | str:
    """The request's id: an integer or a string of at most 64 bytes, else invalid_params.frame (null id)."""
    value = message.get("id")
    if isinstance(value, int) and not isinstance(value, bool) and -INT64 <= value < INT64:
        return value
    if isinstance(value, str) and _utf8_bytes(value) <= ID_BYTES:
        return value
    raise _bad_id()


def _bad_id() -> InvalidParams:
    why = f"a request id is an integer or a string of at most {ID_BYTES} bytes"
    return InvalidParams("frame", why, param="id", max_bytes=ID_BYTES)


def _utf8_bytes(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate is no valid id
        return ID_BYTES + 1


def verb_and_params(message: Mapping[str, object]) -> tuple[str, object]:
    verb = message.get("verb")
    if not isinstance(verb, str):
        raise InvalidParams("protocol", "a request is {id, verb, params}", param="request")
    return verb, message.get("params", {})


def decode_request(line: bytes) -> tuple[int | str, str, object]:
    """(id, verb, params) of a request line; the first problem raises."""
    message = decode(line)
    return request_id(message), *verb_and_params(message)


class TooDeep(InvalidParams):
    """invalid_params.depth for a line nested too deep to decode, with the request's id if it could be read."""

    def __init__(self, param: str, request_id: int | str | None = None) -> None:
        error = too_deep(param)
        super().__init__("depth", error.message, **error.data)
        self.request_id = request_id


def deep_request(text: str) -> InvalidParams:
    """The error for a line nested too deep for the decoder. Its members are decoded one at a time, so the
    offending param, and the id when it comes first (as clients send it), can still be named."""
    top, key, at = _members(text, 0)
    if key == "id":
        return _bad_id()  # an array or object is no id
    param = _members(text, at)[1] if key == "params" else None
    try:
        return TooDeep(param or "request", request_id(top))
    except InvalidParams:
        return TooDeep(param or "request")


def _members(text: str, at: int) -> tuple[dict[str, object], str | None, int]:
    """Members of the object at `at`, decoded one by one up to the first one nested too deep to decode:
    (the members before it, its key or None, where its value starts)."""
    seen: dict[str, object] = {}
    at = _skip(text, at)
    if not text.startswith("{", at):
        return seen, None, at
    while True:
        try:
            key, at = _decoder.raw_decode(text, _skip(text, at + 1))
        except ValueError:
            return seen, None, at
        at = _skip(text, at)
        if not isinstance(key, str) or not text.startswith(":", at):
            return seen, None, at
        start = _skip(text, at + 1)
        try:
            seen[key], at = _decoder.raw_decode(text, start)
        except RecursionError:
            return seen, key, start
        except ValueError:
            return seen, None, start
        at = _skip(text, at)
        if not text.startswith(",", at):
            return seen, None, at


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in JSON_SPACE:
        at += 1
    return at


def reply(request_id: int | str | None, ok: Mapping[str, object] | None = None,
          error: HivememError | None = None) -> dict[str, object]:  # fmt: skip
    if error is not None:
        return {"id": request_id, "error": error.to_wire()}
    return {"id": request_id, "ok": ok}
