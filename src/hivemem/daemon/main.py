"""`hivemem serve`: start (reporting readiness on a pipe), serve, stop."""

from __future__ import annotations

import os
import time

from hivemem import config as config_mod
from hivemem import paths
from hivemem.daemon import lifecycle
from hivemem.daemon.server import Server, run
from hivemem.errors import HivememError
from hivemem.store import memories, open_store
from hivemem.store.clients import ensure_owner_key
from hivemem.store.limits import Limits


def limits_from(config: config_mod.Config) -> Limits:
    return Limits(
        max_content_bytes=config["memory.max_content_bytes"],
        max_versions=config["memory.max_versions"],
        tombstone_days=config["memory.tombstone_days"],
        review_days=config["governance.review_days"],
        recall_prompt_limit=config["recall.prompt_limit"],
        recall_session_limit=config["recall.session_limit"],
        recall_record_chars=config["recall.max_record_chars"],
        recall_total_chars=config["recall.max_total_chars"],
    )


def reload() -> tuple[config_mod.Config, Limits]:
    """Re-read the config file for config.reload; an invalid file raises and changes nothing."""
    config = config_mod.load()
    return config, limits_from(config)


def _progress(log: lifecycle.Log, ready_fd: int | None, line: str) -> None:
    log.write(line)
    lifecycle.progress(ready_fd, line)


def serve(*, on_demand: bool = False, ready_fd: int | None = None) -> int:
    """Run the daemon in the foreground; returns the exit code (run by hand, start-up errors are raised)."""
    if on_demand and os.fork() > 0:
        # Double fork: the starting client reaps this parent at once, the daemon is re-parented to init,
        # so no client (a long-lived MCP adapter, a test runner) is left with a zombie or a child to wait for.
        os._exit(0)
    if on_demand:
        os.setsid()  # its own session, as SPEC 6.1 says, not the starter's
    os.umask(0o077)
    os.chdir("/")
    try:
        config = config_mod.load()
        where = paths.resolve(config["store.path"], config.path)
        lifecycle.prepare(where)
        budget = config["daemon.startup_timeout_ms"] / 1000
        locks = lifecycle.acquire(where, time.monotonic() + budget if on_demand else None)
    except HivememError as exc:
        lifecycle.report(ready_fd, exc)
        if ready_fd is None:
            raise
        return exc.exit_code
    log = lifecycle.Log(where)
    try:
        store = open_store(where.store, limits_from(config), progress=lambda line: _progress(log, ready_fd, line))
        memories.remove_tombstones(store.conn, store.limits.tombstone_days)
        owner_key = ensure_owner_key(where.owner_key)
        sock = lifecycle.bind(where.socket)
    except HivememError as exc:
        log.write(f"start failed: {exc.code}: {exc.message}")
        lifecycle.report(ready_fd, exc)
        locks.release()
        if ready_fd is None:
            raise
        return exc.exit_code
    log.write(f"serving {where.store} on {where.socket}")
    lifecycle.report(ready_fd)
    try:
        run(Server(store, config, owner_key, log, reload=reload), sock, where.socket)
    finally:
        locks.release()
        log.write("stopped")
    return 0
