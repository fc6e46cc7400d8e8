"""What doctor may ask of this machine's store file while no daemon serves it (its schema version, the SQLite
library, a quick integrity check), so that nothing above `store/` imports a backend. A team store
(`store.url`, SPEC 16) has no local file: these answer "no store yet" for it."""

from __future__ import annotations

from hivemem.store.sqlite.integrity import (
    SCHEMA_VERSION,
    check_file,
    embedding_state,
    scan_secrets,
    schema_version,
    sqlite_library,
    sqlite_supported,
)

__all__ = [
    "SCHEMA_VERSION",
    "check_file",
    "embedding_state",
    "scan_secrets",
    "schema_version",
    "sqlite_library",
    "sqlite_supported",
]
