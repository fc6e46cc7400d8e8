"""What doctor may ask of this machine's store file while no daemon serves it (its schema version, the SQLite
library, a quick integrity check), so that nothing above `store/` imports a backend. A team store
(`store.url`, docs/team.md) has no local file: these answer "no store yet" for it, and `team_facts` reads what doctor
checks of the team store's server (its roles and logging settings) over a connection of its own."""

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


__all__ = [
    "SCHEMA_VERSION",
    "check_file",
    "embedding_state",
    "scan_secrets",
    "schema_version",
    "sqlite_library",
    "sqlite_supported",
    "team_facts",
]
