"""What doctor may ask of this machine's store file while no daemon serves it (its schema version, the SQLite
library, a quick integrity check), so that nothing above `store/` imports a backend. A team store
(`store.url`, docs/team.md) has no local file: these answer "no store yet" for it, and `team_facts` reads what doctor
checks of the team store's server (its roles and logging settings) over a connection of its own; `team_mount` what it
checks of a team store mounted beside the personal one (`team.url`)."""

from __future__ import annotations

from typing import Any

from hivemem.errors import HivememError
from hivemem.store.sqlite.integrity import (
    SCHEMA_VERSION,
    check_file,
    embedding_state,
    scan_secrets,
    schema_version,
    sqlite_library,
    sqlite_supported,
)


def team_facts(url: str, settings: tuple[str, ...]) -> dict[str, Any] | str:
    """Over one connection made with `url` as a daemon makes it (so with its role's settings): `user` (that role),
    `settings` (the values of the server settings named), `role` (the runtime role `store init --runtime-role`
    recorded, or None) and `excess` (what that role holds beyond what the verbs need); a string says why the
    server could not be asked."""
    from hivemem.store import require_driver

    try:
        require_driver()
        from hivemem.store.postgres import roles
        from hivemem.store.postgres.conn import Connection

        conn = Connection(url, timeout_ms=10000)
    except HivememError as exc:
        return exc.message
    try:
        user = str(conn.run("SELECT current_user")[0][0])
        values = conn.run("SELECT " + ", ".join("current_setting(%s)" for _ in settings), settings)[0]
        has_meta = conn.run("SELECT to_regclass('meta') IS NOT NULL")[0][0]
        role = roles.recorded(conn) if has_meta else None
        return {"user": user, "settings": dict(zip(settings, map(str, values), strict=True)), "role": role,
                "excess": roles.excess(conn, role) if role is not None else []}  # fmt: skip
    except HivememError as exc:
        return exc.message
    finally:
        conn.close()


def team_mount(url: str, timeout_ms: int, token: str) -> dict[str, Any]:
    """What doctor checks of a mounted team store (`team.url`), over one connection made as the daemon makes it,
    its waits bounded by `team.timeout_ms`, changing nothing: `unreachable` (why it could not connect, or ''),
    `ms` (how long connecting took), `version` (its schema version, None when the database holds none yet),
    `schema` (why its schema is not one this hivemem reads, or ''), `newest` (the version this hivemem reads up
    to), `token` (why the store refused `token`, '' when it accepted it, None when not asked) and `client` (the
    accepted token's client name). No message carries the URL's password."""
    import time

    from hivemem import libpq
    from hivemem.store import require_driver

    out: dict[str, Any] = {"unreachable": "", "ms": 0, "version": None, "schema": "", "newest": 0, "token": None,
                           "client": ""}  # fmt: skip
    started = time.monotonic()
    try:
        require_driver()
        from hivemem.store.postgres import schema
        from hivemem.store.postgres.conn import Connection
        from hivemem.store.sqlite import clients

        libpq.conninfo(url)  # ValueError when libpq cannot read it
        conn = Connection(libpq.bounded(url, timeout_ms), timeout_ms=timeout_ms)
    except HivememError as exc:
        out["unreachable"] = _without(exc.message, url)
        return out
    except ValueError:  # its words may quote the string, password and all; team.tls says what it is
        out["unreachable"] = "team.url cannot be read as libpq reads it (team.tls says why)"
        return out
    out["ms"], out["newest"] = int((time.monotonic() - started) * 1000), schema.VERSION
    try:
        try:
            out["version"] = schema.version(conn)
        except HivememError as exc:
            out["schema"] = _without(exc.message, url)
        if out["version"] is not None and token:
            try:
                out["client"], out["token"] = clients.authenticate(conn, token, "", []).label or "", ""
            except HivememError as exc:
                out["token"] = str(exc.data.get("reason") or exc.message)
    except HivememError as exc:
        out["unreachable"] = _without(exc.message, url)
    finally:
        conn.close()
    return out


def _without(message: str, url: str) -> str:
    """`message` with the URL's password, if it holds one, left out."""
    from hivemem import libpq

    try:
        password = libpq.conninfo(url).get("password", "")
    except (ValueError, HivememError):  # a URL libpq cannot read gives no connection, so no message from one
        password = ""
    return message.replace(password, "***") if password else message


__all__ = [
    "SCHEMA_VERSION",
    "check_file",
    "embedding_state",
    "scan_secrets",
    "schema_version",
    "sqlite_library",
    "sqlite_supported",
    "team_facts",
    "team_mount",
]
