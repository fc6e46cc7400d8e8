"""The opaque `after`/`next` cursor of a ranked search (docs/verbs.md memory.search, docs/decisions.md D293).

A cursor names the search it continues (a digest of the caller, the query and every filter but the time
window: a cursor from another search is `invalid_params.after`), the absolute time window of its first page,
how many hits the pages before it showed, and the last hit shown. The window travels in the cursor because
a relative `--since 7d` resolves to a new instant at every call: every page of a search uses the first
page's window, whatever `since`/`until` come with `after`. A cursor holds nothing the caller did not see:
no count, no score, no id of a memory it cannot read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import NamedTuple

from hivemem.errors import InvalidParams
from hivemem.params import CANONICAL_TIME, ID_RE

PREFIX = "c1."
KEYED = ("query", "spaces", "kinds", "tags", "session", "lineage", "mode", "by_created", "authors")


def key(principal: str, p: Mapping[str, object]) -> str:
    """The digest naming one search: who asked, and everything but the window, the page size and the cursor."""
    what = json.dumps([principal, *(p.get(k) for k in KEYED)], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(what.encode("utf-8")).hexdigest()[:24]


class Cursor(NamedTuple):
    shown: int  # hits the pages before showed
    last: str  # the id of the last of them
    since: str | None  # the first page's window
    until: str | None


def encode(search: str, cursor: Cursor) -> str:
    body = json.dumps({"k": search, "n": cursor.shown, "l": cursor.last, "s": cursor.since, "u": cursor.until},
                      separators=(",", ":")).encode("ascii")  # fmt: skip
    return PREFIX + base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")


def decode(cursor: str, search: str) -> Cursor:
    """The cursor, when it is the `next` of this search; invalid_params.after otherwise."""
    try:
        if not cursor.startswith(PREFIX):
            raise ValueError(cursor)
        raw = cursor[len(PREFIX) :]
        body = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        shown, last, found, since, until = body["n"], body["l"], body["k"], body["s"], body["u"]
        if type(shown) is not int or not 0 < shown <= 1000 or not ID_RE["memory_id"].match(str(last)):
            raise ValueError(cursor)
        if not all(w is None or (isinstance(w, str) and CANONICAL_TIME.match(w)) for w in (since, until)):
            raise ValueError(cursor)
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidParams("after", "after is not a cursor from a search's next", param="after") from None
    if found != search:
        raise InvalidParams("after", "after is the next of another search: repeat the same search to page",
                            param="after")  # fmt: skip
    return Cursor(shown, last, since, until)
