"""The JSON-lines wire (SPEC 6.2): one object per line, UTF-8, at most MAX_FRAME bytes."""

from __future__ import annotations

import json

from hivemem.errors import HivememError, InvalidParams

TYPE_CHECKING = False  # typing costs milliseconds on the CLI's warm path; mypy still sees it
if TYPE_CHECKING:
    from typing import Any

MAX_FRAME = 4 * 1024 * 1024
PROTOCOL = 1


def encode(message: dict[str, Any]) -> bytes:
    """One line; non-ASCII escaped so no byte sequence can split a frame."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode("ascii") + b"\n"


def decode_request(line: bytes) -> tuple[Any, str, Any]:
    """(id, verb, params) of a request line, or invalid_params.encoding / .protocol."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidParams("encoding", "the request is not valid UTF-8", param="request") from None
    try:
        message = json.loads(text)
    except ValueError:
        raise InvalidParams("protocol", "the request is not a JSON object", param="request") from None
    if not isinstance(message, dict) or not isinstance(message.get("verb"), str):
        raise InvalidParams("protocol", "a request is {id, verb, params}", param="request")
    return message.get("id"), message["verb"], message.get("params", {})


def reply(request_id: Any, ok: dict[str, Any] | None = None, error: HivememError | None = None) -> dict[str, Any]:
    if error is not None:
        return {"id": request_id, "error": error.to_wire()}
    return {"id": request_id, "ok": ok}
