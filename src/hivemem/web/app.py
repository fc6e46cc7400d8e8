"""The UI's request and response shapes, the owner's connection to the daemon, and error pages."""

from __future__ import annotations

import re
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
        """The `spaces` filter, `@project` and `@user` resolved as every client does (docs/verbs.md), from the
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


# What a change did, shown once on the page it lands on (`?done=KEY`): fixed sentences, never text from the URL.
NOTICES = {
    "saved": "Saved: {id} is now at revision {revision}.",
    "confirmed": "Confirmed {id}: it is active now, searched and recalled like any memory.",
    "discarded": "Discarded {id}: it is deleted, and its page can restore it.",
    "deleted": "Deleted {id}: it is hidden from search and recall; Restore below brings it back.",
    "restored": "Restored {id}.",
    "archived": "Archived {id}.",
    "challenged": "Recorded {id} as {outcome}.",
    "fixed": "Done: {fix}. The report below is read again.",
}
OUTCOME_WORDS = {"still_valid": "still valid", "needs_review": "needing review", "stale": "stale", "wrong": "wrong",
                 "superseded": "superseded"}  # fmt: skip
FIX_WORDS = {"memory.relate": "the two memories are related", "memory.unrelate": "the relation is removed",
             "memory.archive": "the memory is archived", "memory.challenge": "the challenge is recorded"}  # fmt: skip


def done(location: str, key: str, mid: str = "", **extra: str) -> Response:
    """A redirect to `location` that shows the notice `key` there."""
    query = {"done": key, **({"id": mid} if mid else {}), **extra}
    joiner = "&" if "?" in location else "?"
    fragment = ""
    if "#" in location:
        location, fragment = location.split("#", 1)
        fragment = "#" + fragment
    from urllib.parse import urlencode

    return redirect(location + joiner + urlencode(query) + fragment)


def notice(req: Request, **facts: object) -> str:
    """The notice a redirect asked for, filled with checked values only (an id, a known outcome or fix)."""
    template = NOTICES.get(req.arg("done"))
    if template is None:
        return ""
    mid = req.arg("id")
    values: dict[str, object] = {
        "id": mid if re.fullmatch(r"(t:)?m[0-9]{1,18}", mid) else "the memory",
        "outcome": OUTCOME_WORDS.get(req.arg("outcome"), "challenged"),
        "fix": FIX_WORDS.get(req.arg("fix"), "the fix is applied"),
        "revision": "its newest revision",
        **facts,
    }
    return template.format(**values)


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

    def call(self, verb: str, **params: object) -> dict[str, Any]:
        clean = {k: v for k, v in params.items() if v is not None}
        with self._lock:
            if not self.client.alive():
                self.client.close()  # never connected, or the daemon went away while idle: nothing was sent
            return self.client.call(verb, **clean)

    def close(self) -> None:
        with self._lock:
            self.client.close()
