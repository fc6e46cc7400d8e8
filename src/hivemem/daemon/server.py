"""The asyncio socket server: hello, then requests on one writer thread or a reader pool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import apsw

from hivemem import __version__, ops, secrets
from hivemem.config import Config
from hivemem.daemon.lifecycle import Log, idle_seconds
from hivemem.errors import Failed, HivememError, InvalidParams
from hivemem.protocol import MAX_FRAME, PROTOCOL, decode_request, encode, reply
from hivemem.store import Store, memories, open_reader
from hivemem.store.clients import Principal, authenticate
from hivemem.store.db import scalar
from hivemem.store.limits import Limits

READERS = 4
DRAIN_SECONDS = 2.0
DAY = 86400.0
HELLO_PARAMS = ("token", "client", "version")
INLINE_CHECK_BYTES = 4096  # requests up to this size are validated on the event loop


class Server:
    """Serves one store on one socket until idle, stopped or signalled."""

    def __init__(self, store: Store, config: Config, owner_key: str, log: Log, *,
                 reload: Callable[[], tuple[Config, Limits]] | None = None) -> None:  # fmt: skip
        self.store = store
        self.config = config
        self.owner_key = owner_key
        self.log = log
        self.store_id = str(scalar(store.conn, "SELECT value FROM meta WHERE key = 'store_id'"))
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="writer")
        self.readers = ThreadPoolExecutor(READERS, thread_name_prefix="reader")
        self._local = threading.local()
        self._reader_stores: list[Store] = []
        self.connections = 0
        self.in_flight = 0
        self.stopping: asyncio.Event | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._reload = reload
        self._new_events: asyncio.Event | None = None

    def reader_store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = open_reader(self.store.path, self.store.limits)
            self._local.store = store
            self._reader_stores.append(store)
        return store

    async def serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        self._new_events = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, f"signal {sig.name}")
        # asyncio's limit bounds the bytes before the newline: a line of MAX_FRAME + 1 bytes must be refused.
        server = await asyncio.start_unix_server(self.handle, sock=sock, limit=MAX_FRAME)
        self._arm_idle()
        daily = loop.call_later(DAY, self._daily)
        await self.stopping.wait()
        daily.cancel()
        server.close()
        await self._drain()

    def stop(self, reason: str) -> None:
        if self.stopping is not None and not self.stopping.is_set():
            self.log.write(f"stopping: {reason}")
            self.stopping.set()

    async def _drain(self) -> None:
        """Finish in-flight requests within the deadline, then close every connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_SECONDS
        while self.in_flight and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for writer in list(self._writers):
            writer.close()

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = None
        if self.connections == 0 and self.in_flight == 0:
            self._idle = asyncio.get_running_loop().call_later(idle_seconds(self.config), self.stop, "idle")

    def _daily(self) -> None:
        self.writer.submit(memories.remove_tombstones, self.store.conn, self.store.limits.tombstone_days)
        asyncio.get_running_loop().call_later(DAY, self._daily)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        self._arm_idle()
        state: dict[str, Any] = {"principal": None}
        try:
            await self._lines(reader, writer, state)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the peer went away, or the daemon is stopping: nothing left to answer
        finally:
            self._writers.discard(writer)
            writer.close()
            self.connections -= 1
            self._arm_idle()

    async def _lines(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        while self.stopping is not None and not self.stopping.is_set():
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    writer.write(encode(await self.request(state, exc.partial)))
                return
            except asyncio.LimitOverrunError:
                error = InvalidParams("frame", f"a request line is limited to {MAX_FRAME} bytes", max_bytes=MAX_FRAME)
                writer.write(encode(reply(None, error=error)))
                await writer.drain()
                return
            if not line.strip():
                continue
            writer.write(encode(await self.request(state, line)))
            await writer.drain()
            if state.get("follow") is not None:
                await self._stream(reader, writer, state)
                return

    async def request(self, state: dict[str, Any], line: bytes) -> dict[str, Any]:
        """One request line to one reply object; never raises."""
        request_id: Any = None
        self.in_flight += 1
        try:
            request_id, verb, params = decode_request(line)
            return reply(request_id, await self._run(state, verb, params, len(line)))
        except HivememError as exc:
            return reply(request_id, error=exc)
        except Exception as exc:  # a bug must not take the daemon down
            self.log.write(f"internal error: {exc!r}")
            return reply(request_id, error=Failed("internal", f"internal error: {type(exc).__name__}"))
        finally:
            self.in_flight -= 1

    async def _run(self, state: dict[str, Any], verb: str, params: Any, size: int) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if verb == "hello":
            if state["principal"] is not None:
                raise InvalidParams("protocol", "hello was already said on this connection")
            principal = await loop.run_in_executor(self.readers, self._hello, params)
            state["principal"] = principal
            return {**principal.author(), "server": f"hivemem {__version__}", "version": __version__,
                    "protocol": PROTOCOL, "store_id": self.store_id}  # fmt: skip
        if state["principal"] is None:
            raise InvalidParams("protocol", "say hello first")
        who: Principal = state["principal"]
        if ops.needs_writer(verb, params):
            # Validation and its secret scan never run on the writer: a small request is checked here (well under
            # a millisecond, and no thread hop), a large one on a reader thread; only the checked write is queued.
            limit = self.store.limits.max_content_bytes
            try:
                if size <= INLINE_CHECK_BYTES and secrets.ready():
                    checked = ops.check(verb, params, limit)
                    result = await loop.run_in_executor(self.writer, ops.run, self.store, who, checked)
                else:  # the reader queues the write itself: no round trip through the event loop in between
                    queued = await loop.run_in_executor(self.readers, self._check_and_queue, who, verb, params, limit)
                    result = await asyncio.wrap_future(queued)
            finally:
                self._announce()
        else:
            result = await loop.run_in_executor(self.readers, self._read, who, verb, params)
        if verb == "events.follow":
            state["follow"] = (params, result["after"])
        if verb == "config.reload":
            self._apply_reload()
        if verb == "daemon.stop":
            loop.call_soon(self.stop, f"daemon.stop by {who.id}")
        return result

    def _check_and_queue(self, who: Principal, verb: str, params: Any, limit: int) -> Future[dict[str, Any]]:
        checked = ops.check(verb, params, limit)
        return self.writer.submit(ops.run, self.store, who, checked)

    def _announce(self) -> None:
        """Wake every following connection: something may have been committed."""
        if self._new_events is not None:
            event, self._new_events = self._new_events, asyncio.Event()
            event.set()

    def _apply_reload(self) -> None:
        if self._reload is None:
            return
        config, limits = self._reload()
        self.config = config
        for store in (self.store, *self._reader_stores):
            store.limits = limits
        self.log.write("config reloaded")
        self._arm_idle()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, Any]) -> None:
        """events.follow: send each new readable event until the client closes or the daemon stops."""
        loop = asyncio.get_running_loop()
        params, after = state["follow"]
        closed = asyncio.ensure_future(reader.read(1))
        assert self.stopping is not None
        stopping = asyncio.ensure_future(self.stopping.wait())
        try:
            while not closed.done() and not stopping.done():
                assert self._new_events is not None
                woken = asyncio.ensure_future(self._new_events.wait())
                events = await loop.run_in_executor(self.readers, self._since, state["principal"], params, after)
                for event in events:
                    writer.write(encode({"event": event}))
                    after = max(after, event["id"])
                await writer.drain()
                await asyncio.wait({woken, closed, stopping}, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
        finally:
            closed.cancel()
            stopping.cancel()

    def _since(self, principal: Principal, params: dict[str, Any], after: int) -> list[dict[str, Any]]:
        return ops.events_since(self.reader_store(), principal, params, after)

    def _read(self, principal: Principal, verb: str, params: Any) -> dict[str, Any]:
        return ops.dispatch(self.reader_store(), principal, verb, params)

    def _hello(self, params: Any) -> Principal:
        if not isinstance(params, dict):
            raise InvalidParams("type", "hello params must be an object", param="params")
        for name, value in params.items():
            if name not in HELLO_PARAMS:
                raise InvalidParams("unknown", f"hello has no param {name!r}", param=name)
            if not isinstance(value, str):
                raise InvalidParams("type", f"{name} must be a string", param=name)
        return authenticate(
            self.reader_store().conn, params.get("token", ""), self.owner_key, self.config["grants.unknown"]
        )

    def close(self) -> None:
        """Stop the threads, checkpoint the WAL and close every connection."""
        self.writer.shutdown(wait=True)
        self.readers.shutdown(wait=True)
        for store in self._reader_stores:
            store.close()
        with contextlib.suppress(apsw.Error):
            self.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        self.store.close()


def run(server: Server, sock: socket.socket, socket_path: str) -> None:
    try:
        asyncio.run(server.serve(sock))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
        server.close()
