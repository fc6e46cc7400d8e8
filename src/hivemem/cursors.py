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
from typing import Any, NamedTuple

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


def _read(cursor: str) -> tuple[str, Cursor]:
    """The search a cursor names and its place; ValueError (or a decoding error) when it is not one."""
    if not cursor.startswith(PREFIX):
        raise ValueError(cursor)
    body = _unpack(cursor[len(PREFIX) :])
    shown, last, found, since, until = body["n"], body["l"], body["k"], body["s"], body["u"]
    if type(shown) is not int or not 0 < shown <= 1000 or not ID_RE["memory_id"].match(str(last)):
        raise ValueError(cursor)
    if not all(w is None or (isinstance(w, str) and CANONICAL_TIME.match(w)) for w in (since, until)):
        raise ValueError(cursor)
    return str(found), Cursor(shown, last, since, until)


def _unpack(raw: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))


def decode(cursor: str, search: str) -> Cursor:
    """The cursor, when it is the `next` of this search; invalid_params.after otherwise."""
    try:
        found, place = _read(cursor)
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InvalidParams("after", "after is not a cursor from a search's next", param="after") from None
    if found != search:
        raise InvalidParams("after", "after is the next of another search: repeat the same search to page",
                            param="after")  # fmt: skip
    return place


def back(cursor: str, hits: int, last: str) -> str:
    """The same search's cursor placed `hits` hits earlier, after the hit `last`: a merged page of a personal and a
    team store (daemon/team.py) showed fewer of one store's hits than that store's page held."""
    found, place = _read(cursor)
    return encode(found, place._replace(shown=place.shown - hits, last=last))


# The `next` of a merged read over a personal and a mounted team store (docs/team.md, D401): each store's own
# place, `Part(after, skip)`: its cursor (None: its first page) and how many hits of the page that cursor opens
# were shown already (a search whose hits ended inside a merged page); a store with nothing more is None.
PAIR = "b1."
PAIR_MAX_BYTES = 512


class Part(NamedTuple):
    after: str | None
    skip: int


def encode_pair(personal: Part | None, team: Part | None) -> str:
    body = json.dumps({"p": personal and list(personal), "t": team and list(team)}, separators=(",", ":"))
    return PAIR + base64.urlsafe_b64encode(body.encode("ascii")).decode("ascii").rstrip("=")


def decode_pair(cursor: str) -> tuple[Part | None, Part | None] | None:
    """The two stores' places a merged read's `next` holds; None for any other string (the store it is then
    given refuses it as it refuses any cursor it cannot read)."""
    if not cursor.startswith(PAIR) or len(cursor) > PAIR_MAX_BYTES:
        return None
    try:
        body = _unpack(cursor[len(PAIR) :])
        parts = tuple(_part(body[k]) for k in ("p", "t"))
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        return None
    if parts == (None, None):
        return None
    return parts[0], parts[1]


def _part(value: object) -> Part | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(value)
    after, skip = value
    if not (after is None or (isinstance(after, str) and 0 < len(after) <= 256 and after.isascii())):
        raise ValueError(value)
    if type(skip) is not int or not 0 <= skip <= 200:
        raise ValueError(value)
    return Part(after, skip)
