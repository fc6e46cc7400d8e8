"""Why a daemon could not start: one error with `data: {cause, path, fix}` (docs/protocol.md, decision D47)."""

from __future__ import annotations

import errno
import os

from hivemem import paths
from hivemem.config import config_path
from hivemem.errors import Failed, HivememError
from hivemem.store import start_cause

# Codes docs/protocol.md names for particular start failures keep their code (and exit code); they gain cause,
# path and fix. Every other failure becomes failed.daemon_start.
KEEP = {
    "unsupported.store_schema": "schema",
    "failed.store_migration": "schema",
    "conflict.store_locked": "store_locked",
    "invalid_params.config": "other",
    "failed.socket_dir": "permission",
    "unsupported.store_driver": "other",  # its fix is the install that brings the driver (docs/team.md)
}
BY_CODE = {
    "failed.disk_full": "disk_full",
    "unavailable.read_only": "read_only",
    "denied.path": "permission",
    "unavailable.store_busy": "store_locked",
}
BY_ERRNO = {errno.ENOSPC: "disk_full", errno.EDQUOT: "disk_full", errno.EROFS: "read_only",
            errno.EACCES: "permission", errno.EPERM: "permission"}  # fmt: skip
# Causes that say what is wrong with the machine win over the code that carried them
# (a migration that failed because the disk is full is a full disk).
ENVIRONMENT = ("disk_full", "read_only", "permission")
FIXES = {
    "disk_full": "free space on the file system that holds {path}",
    "read_only": "make {path} and its file system writable (the store itself is served read-only when it exists)",
    "permission": "make {path} yours and not writable by others (chmod go-w), or point store.path elsewhere",
    "store_locked": "wait for the other daemon to exit, or run `hivemem stop`",
    "schema": "use the hivemem version that wrote {path}, or point store.path at another store",
    "corrupt": "run `hivemem doctor`; restore {path} from the backups directory beside it",
    "other": "see {log}",
}


def explain(exc: BaseException, where: paths.Paths | None) -> HivememError:
    """The error a failed start reports on the readiness pipe and in the log."""
    cause = cause_of(exc, where.store if where else "")
    path = _path_of(exc, where)
    log = os.path.join(where.logs, "daemon.log") if where else "the daemon log"
    fix = FIXES[cause].format(path=path, log=log)
    if isinstance(exc, HivememError) and exc.code in KEEP:
        exc.data.setdefault("path", path)
        exc.data.setdefault("fix", fix)
        exc.data["cause"] = cause
        return exc
    return Failed("daemon_start", f"the daemon could not start: {_message(exc)}", cause=cause, path=path, fix=fix)


def cause_of(exc: BaseException, store: str) -> str:
    """disk_full, read_only, permission, store_locked, schema, corrupt or other, from the error and its context."""
    found = [_cause(e, store) for e in _chain(exc)]
    for cause in found:
        if cause in ENVIRONMENT:
            return cause
    return next((c for c in found if c != "other"), "other")


def _chain(exc: BaseException) -> list[BaseException]:
    """The error and what it was raised from or while handling (`raise X from None` keeps the context)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _cause(exc: BaseException, store: str) -> str:
    if isinstance(exc, HivememError):
        return KEEP.get(exc.code) or BY_CODE.get(exc.code, "other")
    if isinstance(exc, OSError):
        return BY_ERRNO.get(exc.errno or 0, "other")
    return start_cause(exc, store)  # the backend's own errors


def _path_of(exc: BaseException, where: paths.Paths | None) -> str:
    if isinstance(exc, HivememError) and isinstance(exc.data.get("path"), str):
        return str(exc.data["path"])
    if isinstance(exc, OSError) and exc.filename:
        return os.fsdecode(exc.filename)
    if isinstance(exc, HivememError) and exc.code == "invalid_params.config":
        return where.config if where is not None else config_path()
    return where.store if where else ""


def _message(exc: BaseException) -> str:
    if isinstance(exc, HivememError):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {os.fsdecode(exc.filename)}" if exc.filename else exc.strerror
    return f"{type(exc).__name__}: {exc}"
