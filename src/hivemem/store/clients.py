"""Principals, tokens (hash, verify) and grants (SPEC 4)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import apsw

from hivemem.errors import Denied
from hivemem.store.db import now, one

TOKEN_RE = re.compile(r"^hm1\.(g[1-9][0-9]{0,17}|owner)\.([A-Za-z0-9_-]{43})$")
OWNER_GRANTS = ({"right": "read", "scope": "*"}, {"right": "write", "scope": "*"}, {"right": "admin", "scope": "*"})


@dataclass(frozen=True)
class Readable:
    """A set of spaces and memories; `everything` short-cuts the SQL filter."""

    everything: bool = False
    spaces: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    memories: frozenset[int] = frozenset()

    def covers(self, space: str, memory: int | None = None) -> bool:
        if self.everything or space in self.spaces or (memory is not None and memory in self.memories):
            return True
        return any(space.startswith(p + "/") for p in self.prefixes)


@dataclass(frozen=True)
class Principal:
    """Who a connection is: `owner`, `unknown` or a client `g<N>`, with its grants."""

    id: str
    label: str | None = None
    grants: tuple[dict[str, str], ...] = field(default_factory=tuple)

    @property
    def is_owner(self) -> bool:
        return self.id == "owner"

    def scope(self, right: str) -> Readable:
        """Everything this principal holds `right` on."""
        if self.is_owner:
            return Readable(everything=True)
        spaces: set[str] = set()
        prefixes: list[str] = []
        memories: set[int] = set()
        for grant in self.grants:
            if grant["right"] != right:
                continue
            kind, _, rest = grant["scope"].partition(":")
            if grant["scope"] == "*":
                return Readable(everything=True)
            if kind == "space" and rest.endswith("/*"):
                prefixes.append(rest[:-2])
            elif kind == "space":
                spaces.add(rest)
            elif kind == "memory":
                memories.add(int(rest[1:]))
        return Readable(False, frozenset(spaces), tuple(prefixes), frozenset(memories))

    def can(self, right: str, space: str, memory: int | None = None) -> bool:
        if self.is_owner:
            return True
        if right == "admin":
            return False
        return self.scope(right).covers(space, memory)

    def author(self) -> dict[str, str]:
        """`{principal, label?}` as recorded on memories and events."""
        return {"principal": self.id, **({"label": self.label} if self.label else {})}

    def grant_list(self) -> list[dict[str, str]]:
        return [dict(g) for g in (OWNER_GRANTS if self.is_owner else self.grants)]


def owner() -> Principal:
    return Principal("owner", "owner")


def unknown(grants: list[dict[str, str]]) -> Principal:
    return Principal("unknown", None, tuple(grants))


def new_secret() -> str:
    """43 characters of base64url: 32 random bytes."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def ensure_owner_key(path: str) -> str:
    """Read the owner key, creating the 0600 file at first start."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return read_key(path)
    key = f"hm1.owner.{new_secret()}"
    try:
        os.write(fd, key.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def read_key(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


def _denied(reason: str) -> Denied:
    fix = "set HIVEMEM_TOKEN to a valid client token, or @owner"
    return Denied("token", f"token refused: {reason}", reason=reason, fix=fix)


def authenticate(conn: apsw.Connection, token: str, owner_key: str, unknown_grants: list[dict[str, str]]) -> Principal:
    """The principal a `hello` token names; a bad token never falls back to unknown."""
    if not token:
        return unknown(unknown_grants)
    match = TOKEN_RE.match(token)
    if not match:
        raise _denied("invalid")
    who, secret = match.groups()
    if who == "owner":
        if hmac.compare_digest(token.encode(), owner_key.encode()):
            return owner()
        raise _denied("invalid")
    return _client(conn, who, secret)


def _client(conn: apsw.Connection, who: str, secret: str) -> Principal:
    row = one(conn, "SELECT name, grants, token_hash, expires FROM clients WHERE principal = ?", (who,))
    if row is None:
        counter = int(one(conn, "SELECT value FROM meta WHERE key = 'next_principal'")[0])  # type: ignore[index]
        raise _denied("revoked" if int(who[1:]) < counter else "invalid")
    name, grants, token_hash, expires = row
    if not hmac.compare_digest(hashlib.sha256(secret.encode()).digest(), bytes(token_hash)):
        raise _denied("invalid")
    if expires is not None and expires <= now():
        raise _denied("expired")
    parsed: list[dict[str, Any]] = json.loads(grants)
    return Principal(who, name, tuple({"right": g["right"], "scope": g["scope"]} for g in parsed))
