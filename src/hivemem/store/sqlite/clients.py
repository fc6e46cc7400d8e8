"""Client rows, tokens (hash, verify) and the owner key (docs/security.md); the authorization model is
`hivemem.auth`."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

from hivemem import auth
from hivemem.auth import TOKEN_RE, Principal
from hivemem.errors import Conflict, Denied, NotFound
from hivemem.records import ClientAdded, ClientPage, ClientRemoved
from hivemem.store.connection import Connection, Key, Lock
from hivemem.store.keys import new_secret
from hivemem.store.sqlite import audit
from hivemem.store.sqlite.db import all_rows, atomic, format_time, now, one


def _denied(reason: str) -> Denied:
    fix = "set HIVEMEM_TOKEN to a valid client token, or @owner"
    return Denied("token", f"token refused: {reason}", reason=reason, fix=fix)


def authenticate(conn: Connection, token: str, owner_key: str, unknown_grants: list[dict[str, str]]) -> Principal:
    """The principal a `hello` token names; a bad token never falls back to unknown."""
    if not token:
        return auth.unknown(unknown_grants)
    match = TOKEN_RE.fullmatch(token)
    if not match:
        raise _denied("invalid")
    who, secret = match.groups()
    if who == "owner":
        if hmac.compare_digest(token.encode(), owner_key.encode()):
            return auth.owner()
        raise _denied("invalid")
    return _client(conn, who, secret)


def recheck(conn: Connection, principal: Principal) -> None:
    """A client's token stays valid only while its row exists and has not expired (checked per request)."""
    if principal.is_owner or principal.id == "unknown":
        return
    row = one(conn, "SELECT expires FROM clients WHERE principal = ?", (principal.id,))
    if row is None:
        raise _denied("revoked")
    if row[0] is not None and row[0] <= now():
        raise _denied("expired")


def _client(conn: Connection, who: str, secret: str) -> Principal:
    row = one(conn, "SELECT name, grants, token_hash, expires FROM clients WHERE principal = ?", (who,))
    if row is None:
        counter = int(one(conn, "SELECT value FROM meta WHERE key = 'next_principal'")[0])  # type: ignore[index]
        raise _denied("revoked" if int(who[1:]) < counter else "invalid")
    name, grants, token_hash, expires = row
    if not hmac.compare_digest(hashlib.sha256(secret.encode()).digest(), bytes(token_hash)):
        raise _denied("invalid")
    if expires is not None and expires <= now():
        raise _denied("expired")
    parsed: list[dict[str, str]] = json.loads(grants)
    return auth.client(who, name, parsed)


def _expires(ttl: int | None) -> str | None:
    if ttl is None:
        return None
    return format_time(datetime.now(UTC) + timedelta(seconds=ttl))


def add_client(conn: Connection, actor: Principal, name: str, grants: list[dict[str, str]],
               ttl: int | None) -> ClientAdded:  # fmt: skip
    """A new client with a fresh principal `g<N>`; the token is returned once and only its hash kept."""
    secret = new_secret()
    with atomic(conn):
        # the name's check and the `meta` counter under the store-wide lock: rare, and simplest so (D208)
        if one(conn, "SELECT 1 FROM clients WHERE name = ?", (name,), lock=Lock.STORE) is not None:
            raise Conflict("client_exists", f"a client named {name} exists", client=name)
        number = int(one(conn, "SELECT value FROM meta WHERE key = 'next_principal'")[0])  # type: ignore[index]
        conn.execute("UPDATE meta SET value = ? WHERE key = 'next_principal'", (str(number + 1),))
        principal, expires = f"g{number}", _expires(ttl)
        conn.execute(
            "INSERT INTO clients(name, principal, grants, token_hash, created, expires) VALUES (?,?,?,?,?,?)",
            (name, principal, json.dumps(grants), hashlib.sha256(secret.encode()).digest(), now(), expires),
        )
        audit.append(conn, "client.added", actor, data={"client": name, "principal": principal})
    return {"client": name, "principal": principal, "token": f"hm1.{principal}.{secret}", "expires": expires}


def list_clients(conn: Connection, after: int | None, limit: int) -> ClientPage:
    """Clients in the order they were made (by principal number), paged after `g<after>`; never a hash."""
    rows = all_rows(
        conn,
        "SELECT name, principal, grants, created, expires FROM clients WHERE CAST(substr(principal, 2) AS INTEGER) > ? "
        "ORDER BY CAST(substr(principal, 2) AS INTEGER) LIMIT ?",
        (after or 0, limit + 1),
    )
    page = rows[:limit]
    return {"clients": [{"name": n, "principal": p, "grants": json.loads(g), "created": c, "expires": e}
                        for n, p, g, c, e in page],
            "next": page[-1][1] if len(rows) > limit else None}  # fmt: skip


def remove_client(conn: Connection, actor: Principal, name: str) -> ClientRemoved:
    """Delete the client; its token is then `denied.token` with reason `revoked`."""
    with atomic(conn):
        row = one(conn, "SELECT principal FROM clients WHERE name = ?", (name,), lock=Key("client", name))
        if row is None:
            raise NotFound("client", f"no client named {name}", client=name)
        conn.execute("DELETE FROM clients WHERE name = ?", (name,))
        audit.append(conn, "client.removed", actor, data={"client": name, "principal": row[0]})
    return {"client": name, "principal": row[0]}
