"""`hivemem serve`: start (reporting readiness on a pipe), serve, stop."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from hivemem import config as config_mod
from hivemem import paths, secrets
from hivemem.daemon import lifecycle, startup
from hivemem.daemon.server import Server, run
from hivemem.embeddings import EmbeddingError, Settings, make
from hivemem.embeddings.local import defaults as local_defaults
from hivemem.errors import Failed, HivememError, Unavailable
from hivemem.store import BACKEND_ERRORS, Progress, Store, open_store
from hivemem.store.limits import Limits

if TYPE_CHECKING:
    from hivemem.daemon.embedder import Worker


def tuned(config: config_mod.Config, key: config_mod.FloatKey) -> float:
    """A similarity setting: the file's value, else the local model's measured default, else the declared one."""
    if key in config.explicit or config["embeddings.provider"] != "local":
        return config[key]
    return local_defaults(config["embeddings.model"]).get(key, config[key])


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
        backups_keep=config["backups.keep"],
        recall_min_similarity=tuned(config, "recall.min_similarity"),
        search_min_similarity=tuned(config, "search.min_similarity"),
        vector_weight=tuned(config, "search.vector_weight"),
        import_max_bytes=config["import.max_bytes"],
        elsewhere=tuple(config["team.spaces"]) if config["team.url"] else (),
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
        os.setsid()  # its own session, as docs/protocol.md says, not the starter's
    os.umask(0o077)
    os.chdir("/")
    where: paths.Paths | None = None
    log = lifecycle.Log(paths.resolve())  # the log's place does not depend on the config
    try:
        config = config_mod.load()
        where = paths.resolve(config["store.path"], config.path, bool(config["store.url"]))
        started = start(where, config, on_demand=on_demand, progress=lambda line: _progress(log, ready_fd, line))
    except START_ERRORS as exc:
        return _failed(startup.explain(exc, where), ready_fd, log)
    locks, store, owner_key, sock = started
    log.write(f"serving {where.store}{' read-only' if store.readonly else ''} on {where.socket}")
    lifecycle.report(ready_fd)
    # The secret detector's import takes a few tenths of a second: build it now, beside the first requests.
    threading.Thread(target=secrets.warm, name="secrets-warm", daemon=True).start()
    server = Server(store, config, owner_key, log, reload=reload, key_path=where.owner_key)
    if config["team.url"]:  # a team store beside the personal one, opened at its first use (docs/team.md)
        from hivemem.daemon.team import Team

        server.team = Team(config, limits_from(config), os.path.join(os.path.dirname(where.store), "team"), log)
    if not store.readonly:
        server.worker = start_embeddings(store, config, server, log)
    try:
        run(server, sock, where.socket)
    finally:
        locks.release()
        log.write("stopped")
    return server.exit_code


def embedding_settings(config: config_mod.Config) -> Settings:
    return Settings(
        provider=config["embeddings.provider"],
        base_url=config["embeddings.base_url"],
        model=config["embeddings.model"],
        dimensions=config["embeddings.dimensions"],
        api_key=config["embeddings.api_key"],
        max_input_bytes=config["embeddings.max_input_bytes"],
        query_timeout_ms=config["embeddings.query_timeout_ms"],
        batch_timeout_ms=config["embeddings.batch_timeout_ms"],
    )


def start_embeddings(store: Store, config: config_mod.Config, server: Server, log: lifecycle.Log) -> Worker | None:
    """The provider, the index searches use and the worker that fills it; None when embeddings are off or the
    provider cannot be made (the daemon then serves full text and the log says why)."""
    settings = embedding_settings(config)
    try:
        provider = make(settings)
    except (EmbeddingError, HivememError) as exc:
        log.write(f"embeddings: provider {settings.provider} unavailable: {exc}")
        return None
    if provider is None:
        return None
    from hivemem.daemon.embedder import Worker
    from hivemem.search.vector import Runtime

    store.embeddings = Runtime(provider, settings.query_timeout_ms, settings.provider)
    worker = Worker(store, store.embeddings, server.writer, log, max_input_bytes=settings.max_input_bytes,
                    batch_timeout_ms=settings.batch_timeout_ms, dimensions=settings.dimensions)  # fmt: skip
    worker.start()
    return worker


START_ERRORS: tuple[type[BaseException], ...] = (HivememError, OSError, *BACKEND_ERRORS)
Started = tuple[lifecycle.Locks, Store, str, socket.socket]


def start(
    where: paths.Paths, config: config_mod.Config, *, on_demand: bool, progress: Progress | None = None
) -> Started:
    """Directories, locks, store (read-only if it cannot be written), owner key and socket, or raise."""
    lifecycle.prepare(where)
    budget = config["daemon.startup_timeout_ms"] / 1000
    locks = lifecycle.acquire(where, time.monotonic() + budget if on_demand else None)
    store: Store | None = None
    try:
        store = open_store(where.store, limits_from(config), progress, read_only_ok=True, url=config["store.url"])
        if not store.readonly:
            with contextlib.suppress(Failed, Unavailable):  # a full disk or a busy store must not keep reads away
                store.memories.remove_tombstones(store.limits.tombstone_days)
        return locks, store, store.owner_key(where.owner_key), lifecycle.bind(where.socket)
    except BaseException:
        if store is not None:
            store.close()
        locks.release()
        raise


def _failed(error: HivememError, ready_fd: int | None, log: lifecycle.Log) -> int:
    """Report a failed start on the pipe and in the log (docs/protocol.md); by hand, raise it for the CLI to print."""
    log.write(f"start failed: {json.dumps(error.to_wire(), ensure_ascii=False)}")
    lifecycle.report(ready_fd, error)
    if ready_fd is None:
        raise error
    return error.exit_code
