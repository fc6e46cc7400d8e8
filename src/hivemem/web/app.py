"""The UI's request and response shapes, the owner's connection to the daemon, and error pages."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from hivemem.client import DaemonClient
from hivemem.errors import HivememError, InvalidParams
from hivemem.manifest import VERBS
from hivemem.spaces import placeholder
from hivemem.web import html

VERB_NAMES = frozenset(v.name for v in VERBS)
PAGE = 50  # rows per list page; the daemon's list maximum is 200, and no page shows more
STATUS_BY_CLASS = {
    "invalid_params": 400,
    "not_found": 404,
    "denied": 403,
    "conflict": 409,
    "unavailable": 503,
    "failed": 500,
    "unsupported": 501,
}


@dataclass
class Request:
    """One parsed request: path parameters, query, form (POST) and this session's CSRF token."""

    path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]] = field(default_factory=dict)
    csrf: str = ""

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name) or self.form.get(name)
        return values[0] if values else default

    def field(self, name: str) -> str | None:
        values = self.form.get(name)
        return values[0] if values else None

    def words(self, name: str) -> list[str]:
        """A comma-separated or repeated parameter as a list, blanks dropped."""
        raw = self.query.get(name, []) + self.form.get(name, [])
        return [w.strip() for v in raw for w in v.split(",") if w.strip()]

    def spaces(self) -> list[str] | None:
        """The `spaces` filter, `@project` and `@user` resolved as every client does (SPEC 3), from the
        directory `hivemem ui` was started in."""
        return [placeholder(s, param="spaces") for s in self.words("spaces")] or None

    def integer(self, name: str, *, required: bool = True) -> int | None:
        value = self.arg(name)
        if not value:
            if required:
                raise InvalidParams("missing", f"{name} is required", param=name)
            return None
        if not value.isdigit() or len(value) > 18:
            raise InvalidParams("type", f"{name} must be a whole number", param=name)
        return int(value)


@dataclass
class Response:
    status: int = 200
    body: str = ""
    location: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def redirect(location: str) -> Response:
    return Response(303, location=location)


def error_page(status: int, message: str, detail: str = "") -> Response:
    extra = f"<p>{html.esc(detail)}</p>" if detail else ""
    body = f'<div class="error"><p>{html.esc(message)}</p>{extra}</div><p><a href="/search">Back to search</a></p>'
    return Response(status, html.page(f"Error {status}", body))


def hivemem_error(exc: HivememError) -> Response:
    """A daemon error as a page: its code, message and fix, with the status its class calls for."""
    status = STATUS_BY_CLASS.get(exc.code.split(".")[0], 500)
    fix = exc.data.get("fix")
    return error_page(status, f"{exc.code}: {exc.message}", f"Fix: {fix}" if isinstance(fix, str) else "")


class Owner:
    """The UI's one connection to the daemon, as the owner; requests from the server's threads take turns."""

    def __init__(self, client: DaemonClient) -> None:
        self.client = client
        self._lock = threading.Lock()

    def has(self, verb: str) -> bool:
        return verb in VERB_NAMES

    def call(self, verb: str, **params: Any) -> dict[str, Any]:
        clean = {k: v for k, v in params.items() if v is not None}
        with self._lock:
            if not self.client.alive():
                self.client.close()  # never connected, or the daemon went away while idle: nothing was sent
            return self.client.call(verb, **clean)

    def close(self) -> None:
        with self._lock:
            self.client.close()
