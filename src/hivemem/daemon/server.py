"""The asyncio socket server: hello, then requests on one writer thread or a reader pool."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from hivemem import __version__, ops, peer, progress, protocol, secrets
from hivemem.auth import Principal
from hivemem.config import Config
from hivemem.daemon.lifecycle import Log, idle_seconds
from hivemem.errors import Failed, HivememError, InvalidParams
from hivemem.manifest import Verb
from hivemem.protocol import MAX_FRAME, PROTOCOL, TooDeep, check_depth, decode, encode, reply, verb_and_params
from hivemem.store import Store
from hivemem.store.limits import Limits

if TYPE_CHECKING:
    from hivemem.daemon.embedder import Worker
    from hivemem.daemon.team import Team

READERS = 4
T = TypeVar("T")
DRAIN_SECONDS = 2.0
DAY = 86400.0
HELLO_PARAMS = ("token", "client", "version")
# Requests up to this size are validated on the event loop: a 16 KiB memory with its JSON escaping, whose scan
# (1.5-3.5 ms) ends before Python's 5 ms thread switch interval, so a reader thread would hold the GIL, and with it
# the event loop, just as long, and cost a thread hop more (D134). Larger ones are scanned on a reader thread.
INLINE_CHECK_BYTES = 20 * 1024
PROGRESS_SECONDS = 0.1  # at most this often a progress frame within one stage (D114)
# Index upkeep (D190): once no request has run for COMPACT_IDLE_SECONDS after a write (or after start), the writer
# merges the full-text index a bounded step at a time, a request arriving in between going first.
COMPACT_IDLE_SECONDS = 1.0
COMPACT_PAUSE_SECONDS = 0.02
COMPACT_SHARE = 100  # a merge that kept the writer busy for t seconds is followed by none for COMPACT_SHARE * t


@dataclass(slots=True)
class Connection:
    """What the daemon holds for one client connection: its writer, who said hello on it (None before), and the
    stream a stream verb began (the key its objects go under, and the stream), which the connection then serves."""

    writer: asyncio.StreamWriter
    principal: Principal | None = None
    stream: tuple[str, ops.Stream] | None = None


class Server:
    """Serves one store on one socket until idle, stopped or signalled."""

    def __init__(self, store: Store, config: Config, owner_key: str, log: Log, *,
                 reload: Callable[[], tuple[Config, Limits]] | None = None, key_path: str = "") -> None:  # fmt: skip
        self.store = store
        self.config = config
        self.owner_key = owner_key
        self.key_path = key_path  # where the owner key is read again whenever a hello presents one
        self.log = log
        self.store_id = store.store_id()
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
        self.exit_code = 0
        self.moved = False
        self.worker: Worker | None = None  # the embedding worker when a provider is on
        self.team: Team | None = None  # the team store mounted beside this one (config team.url, docs/team.md)
        self._compact: asyncio.TimerHandle | None = None
        self._compacting = False  # a merge of the index is under way
        self._compact_busy = 0.0  # the writer's time in the merge under way
        self._compact_after = 0.0  # the monotonic time before which no new merge starts

    def reader_store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            store = self.store.reader()  # it shares the daemon's embeddings, set before serving
            self._local.store = store
            self._reader_stores.append(store)
        return store

    async def serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        self._new_events = asyncio.Event()

        def woken() -> None:  # another machine's daemon committed (a team store)
            loop.call_soon_threadsafe(self._announce)

        unwatch = self.store.watch(woken)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, f"signal {sig.name}")
        server = await loop.create_unix_server(self._protocol, sock=sock)
        repair = None
        if self.team is not None:  # a move across the stores a crash or an outage left half done (D397)
            repair = loop.create_task(self.team.mover.repair(self._personal, self._on_reader))
        self._arm_idle()
        self._arm_compact(COMPACT_IDLE_SECONDS)
        daily = loop.call_later(DAY, self._daily)
        await self.stopping.wait()
        daily.cancel()
        if self._compact is not None:
            self._compact.cancel()
        server.close()
        unwatch()
        if repair is not None and not repair.done():
            repair.cancel()
        await self._drain()

    def _protocol(self) -> asyncio.Protocol:
        # asyncio's limit bounds the bytes before the newline: a line of MAX_FRAME + 1 bytes must be refused.
        return PeerChecked(asyncio.StreamReader(limit=MAX_FRAME), self.handle, self.log)

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

    def _arm_compact(self, delay: float) -> None:
        """(Re)start the wait before the next step of index upkeep."""
        if self.store.readonly or (self.stopping is not None and self.stopping.is_set()):
            return
        if self._compact is not None:
            self._compact.cancel()
        if not self._compacting:
            delay = max(delay, self._compact_after - time.monotonic())
        self._compact = asyncio.get_running_loop().call_later(delay, self._compact_step)

    def _compact_step(self) -> None:
        self._compact = None
        if self.in_flight:  # requests go first; upkeep waits for the next quiet moment
            self._arm_compact(COMPACT_IDLE_SECONDS)
            return
        loop = asyncio.get_running_loop()
        step = self.writer.submit(self._timed_compact, self._compacting)

        def done(step: Future[bool]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while the step ran: the daemon is gone
                loop.call_soon_threadsafe(self._compacted, step)

        step.add_done_callback(done)

    def _timed_compact(self, resume: bool) -> bool:
        """One step on the writer thread, its time added to the merge's."""
        started = time.monotonic()
        try:
            return self.store.search.compact(resume)
        finally:
            self._compact_busy += time.monotonic() - started

    def _compacted(self, step: Future[bool]) -> None:
        try:
            self._compacting = step.result()
        except Exception as exc:  # upkeep must never take the daemon down; the next write meets any real fault
            self._compacting = False
            self.log.write(f"index upkeep stopped: {exc!r}")
        if self._compacting:
            self._arm_compact(COMPACT_PAUSE_SECONDS)
            return
        # the merge is over (or there was none to do): the writer's share of time spent on upkeep stays small
        self._compact_after = time.monotonic() + COMPACT_SHARE * self._compact_busy
        self._compact_busy = 0.0

    def _daily(self) -> None:
        if not self.store.readonly:
            self.writer.submit(self.store.memories.remove_tombstones, self.store.limits.tombstone_days)
        asyncio.get_running_loop().call_later(DAY, self._daily)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        self._arm_idle()
        state = Connection(writer)
        try:
            await self._lines(reader, writer, state)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the peer went away, or the daemon is stopping: nothing left to answer
        finally:
            self._writers.discard(writer)
            writer.close()
            self.connections -= 1
            self._arm_idle()

    async def _lines(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: Connection) -> None:
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
            if state.stream is not None and state.principal is not None:
                await self._stream(reader, writer, state.principal, *state.stream)
                return

    async def request(self, state: Connection, line: bytes) -> dict[str, object]:
        """One request line to one reply object; never raises."""
        request_id: int | str | None = None
        self.in_flight += 1
        try:
            message = decode(line)
            request_id = protocol.request_id(message)  # an id that is not one is answered with a null id
            verb, params = verb_and_params(message)
            if message.get("progress") is not True:
                return reply(request_id, await self._run(state, verb, params, len(line)))
            listener, over = self._progress(state.writer, request_id)
            try:
                return reply(request_id, await self._run(state, verb, params, len(line), listener))
            finally:
                over()  # nothing may follow the reply
        except TooDeep as exc:
            return reply(exc.request_id, error=exc)
        except HivememError as exc:
            return reply(request_id, error=exc)
        except Exception as exc:  # a bug must not take the daemon down
            self.log.write(f"internal error: {exc!r}")
            return reply(request_id, error=Failed("internal", f"internal error: {type(exc).__name__}"))
        finally:
            self.in_flight -= 1

    def _progress(
        self, writer: asyncio.StreamWriter, request_id: int | str
    ) -> tuple[progress.Listener, Callable[[], None]]:
        """A listener for the work of a request that asked for progress (D114), and the call that silences it.

        It runs on the thread doing the work and hands each report to the event loop, which writes it as
        `{"id", "progress": {stage, done, total}}` before the reply: the first and last of each stage, and
        between them one every PROGRESS_SECONDS."""
        loop = asyncio.get_running_loop()
        sent = ("", 0.0)  # the stage and time of the last frame
        silent = [False]

        def send(frame: bytes) -> None:
            if not silent[0] and not writer.is_closing():
                writer.write(frame)

        def listener(stage: str, done: int, total: int) -> None:
            nonlocal sent
            now = time.monotonic()
            if stage == sent[0] and done < total and now - sent[1] < PROGRESS_SECONDS:
                return
            sent = (stage, now)
            frame = encode({"id": request_id, "progress": {"stage": stage, "done": done, "total": total}})
            loop.call_soon_threadsafe(send, frame)

        return listener, lambda: silent.__setitem__(0, True)

    async def _run(self, state: Connection, verb: str, params: object, size: int,
                   listener: progress.Listener | None = None) -> dict[str, Any]:  # fmt: skip
        loop = asyncio.get_running_loop()
        if verb == "hello":
            if state.principal is not None:
                raise InvalidParams("protocol", "hello was already said on this connection")
            try:
                principal = await loop.run_in_executor(self.readers, self._hello, params)
            except Failed as exc:  # a reader opened after the store file moved finds it so (docs/protocol.md)
                if exc.code == "failed.store_moved":
                    self._moved(exc)
                raise
            state.principal = principal
            return {**principal.author(), "server": f"hivemem {__version__}", "version": __version__,
                    "protocol": PROTOCOL, "store_id": self.store_id}  # fmt: skip
        who = state.principal
        if who is None:
            raise InvalidParams("protocol", "say hello first")
        if self.store.readonly and isinstance(params, dict):  # a read-only store still answers searches
            params = {**params, **{p.name: False for p in ops.verb_for(verb).params if p.writes and p.name in params}}
        if self.team is not None:
            from hivemem.daemon.team import federated

            found = await federated(self.team, self._personal, self._on_reader, who, verb, params, size, listener)
        else:
            found = None
        result = found if found is not None else await self._personal(who, verb, params, size, listener)
        traits = ops.verb_for(verb)  # known: it was dispatched
        if traits.stream:
            assert isinstance(result, ops.Stream), f"{traits.name} has the stream trait but returned no Stream"
            state.stream = (traits.stream, result)
        self._effect(traits, who)
        return result

    async def _personal(self, who: Principal, verb: str, params: object, size: int,
                        listener: progress.Listener | None) -> dict[str, Any]:  # fmt: skip
        """One verb on the personal store: a write on the single writer, a read on a reader."""
        if ops.needs_writer(verb, params):
            return await self._write(who, verb, params, size, listener)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.readers, self._read, who, verb, params, listener)

    async def _on_reader(self, work: Callable[[Store], T]) -> T:
        """`work` with this thread's reader of the personal store, on a reader thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.readers, lambda: work(self.reader_store()))

    def _effect(self, verb: Verb, who: Principal) -> None:
        """The verb's `effect` trait, once its reply is decided."""
        if verb.effect == "reload":
            self._apply_reload()
        elif verb.effect == "stop":
            asyncio.get_running_loop().call_soon(self.stop, f"{verb.name} by {who.id}")

    async def _write(self, who: Principal, verb: str, params: object, size: int,
                     listener: progress.Listener | None) -> dict[str, Any]:  # fmt: skip
        """A write on the single writer; a read-only store refuses it in the store's own terms.

        Validation and its secret scan never run on the writer: a request of up to 20 KiB is checked here (a few
        milliseconds at most, and no thread hop), a larger one on a reader thread; only the checked write is queued.
        A verb that reads a file (`reads_file`) always goes through a reader, which reads the file first.
        """
        loop = asyncio.get_running_loop()
        limit = self.store.limits.max_content_bytes
        try:
            if size <= INLINE_CHECK_BYTES and secrets.ready() and not ops.verb_for(verb).reads_file:
                checked = ops.check(verb, params, limit)
                return await loop.run_in_executor(
                    self.writer, progress.run, listener, ops.run, self.store, who, checked
                )
            # the reader queues the write itself: no round trip through the event loop in between
            queued = await loop.run_in_executor(self.readers, self._check_and_queue, who, verb, params, limit, listener)
            return await asyncio.wrap_future(queued)
        except Failed as exc:
            if exc.code == "failed.store_moved":
                self._moved(exc)
            raise
        finally:
            self._announce()
            self._arm_compact(COMPACT_IDLE_SECONDS)

    def _check_and_queue(self, who: Principal, verb: str, params: object, limit: int,
                         listener: progress.Listener | None) -> Future[dict[str, Any]]:  # fmt: skip
        checked = ops.read_file(self.reader_store(), who, ops.check(verb, params, limit))
        return self.writer.submit(progress.run, listener, ops.run, self.store, who, checked)

    def _moved(self, error: Failed) -> None:
        """The store file was deleted or replaced (docs/protocol.md): log it and stop; nothing more is written."""
        if not self.moved:
            self.moved, self.exit_code = True, error.exit_code
            self.log.write(f"{error.code}: {error.message}")
            asyncio.get_running_loop().call_soon(self.stop, "the store file moved")

    def _announce(self) -> None:
        """Wake every following connection: something may have been committed."""
        if self.worker is not None:
            self.worker.wake()
        if self._new_events is not None:
            event, self._new_events = self._new_events, asyncio.Event()
            event.set()

    def _apply_reload(self) -> None:
        if self._reload is None:
            return
        config, limits = self._reload()
        # team.* is read when the daemon starts (docs/team.md): the mounted store's spaces stay what they were
        limits = dataclasses.replace(limits, elsewhere=tuple(self.team.patterns) if self.team is not None else ())
        self.config = config
        for store in (self.store, *self._reader_stores):
            store.limits = limits
        self.log.write("config reloaded")
        self._arm_idle()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, who: Principal, key: str,
                      feed: ops.Stream) -> None:  # fmt: skip
        """After a stream verb's reply: its objects as `{key: object}` lines, until the stream ends or fails,
        the client closes or the daemon stops. A live stream polls again after each commit the writer announces."""
        closed = asyncio.ensure_future(reader.read(1))
        assert self.stopping is not None
        stopping = asyncio.ensure_future(self.stopping.wait())
        try:
            while not closed.done() and not stopping.done():
                assert self._new_events is not None
                woken = asyncio.ensure_future(self._new_events.wait())  # before the poll: no commit slips by
                lines, failed = await self._poll(who, feed, key)
                writer.writelines(lines)
                await writer.drain()
                if failed or not (lines or feed.live):
                    woken.cancel()
                    return
                if not lines:
                    await asyncio.wait(
                        {woken, closed, stopping}, timeout=feed.every, return_when=asyncio.FIRST_COMPLETED
                    )
                woken.cancel()  # after lines, poll again at once: more may wait beyond one poll's page
        finally:
            closed.cancel()
            stopping.cancel()

    async def _poll(self, who: Principal, feed: ops.Stream, key: str) -> tuple[list[bytes], bool]:
        """One poll of a stream on a reader, as encoded lines, and whether it failed (then the last line says why)."""
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self.readers, lambda: ops.poll(self.reader_store(), who, feed))
        except HivememError as exc:
            return [encode({"error": exc.to_wire()})], True
        except Exception as exc:  # a bug ends this stream, not the daemon
            self.log.write(f"internal error in a stream: {exc!r}")
            return [encode({"error": Failed("internal", f"internal error: {type(exc).__name__}").to_wire()})], True
        return [encode({key: item}) for item in found], False

    def _read(
        self, principal: Principal, verb: str, params: object, listener: progress.Listener | None
    ) -> dict[str, Any]:
        with progress.listening(listener):
            return ops.dispatch(self.reader_store(), principal, verb, params)

    def _hello(self, params: object) -> Principal:
        if not isinstance(params, dict):
            raise InvalidParams("type", "hello params must be an object", param="params")
        check_depth(params)
        for name, value in params.items():
            if name not in HELLO_PARAMS:
                raise InvalidParams("unknown", f"hello has no param {name!r}", param=name)
            if not isinstance(value, str):
                raise InvalidParams("type", f"{name} must be a string", param=name)
        token = params.get("token", "")
        return self.reader_store().clients.authenticate(token, self._owner_key(token), self.config["grants.unknown"])

    def _owner_key(self, token: str) -> str:
        """The owner key in force: read from its file when a hello presents an owner key, so a key copied to
        this machine (or replaced) after the daemon started is the one accepted (docs/security.md)."""
        if not self.key_path or not token.startswith("hm1.owner."):
            return self.owner_key
        try:
            self.owner_key = self.reader_store().owner_key(self.key_path)
        except (OSError, HivememError) as exc:
            self.log.write(f"owner key unreadable at {self.key_path}: {exc}")
        return self.owner_key

    def close(self) -> None:
        """Stop the threads, checkpoint the WAL and close every connection."""
        if self.worker is not None:
            self.worker.stop()
        if self.team is not None:
            self.team.close()
        self.writer.shutdown(wait=True)
        self.readers.shutdown(wait=True)
        for store in self._reader_stores:
            store.close()
        self.store.close(checkpoint=True, moved=self.moved)


Handle = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]  # a connection's coroutine


class PeerChecked(asyncio.StreamReaderProtocol):
    """Streams for connections from this user only: another uid is closed before a byte is read (docs/schema.md)."""

    def __init__(self, reader: asyncio.StreamReader, handle: Handle, log: Log) -> None:
        super().__init__(reader, handle)
        self._log = log

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and peer.is_own(sock):
            super().connection_made(transport)
            return
        self._log.write(f"refused a connection from uid {peer.uid(sock) if sock is not None else None}")
        transport.close()  # the transport has not started reading: closing it now reads nothing


def run(server: Server, sock: socket.socket, socket_path: str) -> None:
    try:
        asyncio.run(server.serve(sock))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(socket_path)
        server.close()
