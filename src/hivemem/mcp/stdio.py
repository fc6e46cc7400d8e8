"""A stdio transport for the SDK's server without worker threads, used when stdin and stdout are pipes.

The SDK's `stdio_server()` reads and writes through `anyio.wrap_file`: every line in and every line out (and
its flush) is a hop to a worker thread and back, plus two memory streams and two tasks between the pipe and
the server. On a 2-core machine that was most of the MCP overhead on a search (docs/decisions.md D45). Here
the read stream parses lines straight from an asyncio pipe reader and the write stream writes straight to an
asyncio pipe transport, on the event loop; the SDK's session, dispatch and message models are unchanged.

Like the SDK transport, fd 0 and fd 1 are diverted while serving (to the null device and to stderr), so a
stray print or a child process can never write into the protocol stream, and restored afterwards, with the
pipes' blocking mode as it was found. Anything that is not a pipe (a socket, a regular file, a terminal)
keeps the SDK's own transport: asyncio's write-pipe transport treats a readable socket as a closed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from collections.abc import AsyncIterator
from typing import Protocol, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

# A line longer than this is skipped unread and gets no answer (the SDK transport has no limit). A tool
# call's arguments are bounded by the daemon's 4 MiB frame; this leaves room to answer a larger call with
# `invalid_params.frame` rather than silence.
LINE_LIMIT = 64 * 1024 * 1024
FLUSH_AT_EXIT = 2.0  # seconds to wait at exit for a reader to take the last answers
ANSWER_AT_EOF = 10.0  # seconds the requests read before stdin closed may take to be answered

log = logging.getLogger("hivemem.mcp")


def is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


class Receiving(Protocol):
    """A read stream as the SDK's server takes it: anyio's memory stream, or `LineReader`."""

    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class Sending(Protocol):
    """A write stream as the SDK's server takes it: anyio's memory stream, or `LineWriter`."""

    async def send(self, item: SessionMessage, /) -> None: ...
    async def aclose(self) -> None: ...


class ReadStream:
    """What the SDK's server needs of a read stream besides `receive` and `aclose`: iteration and `async with`."""

    async def receive(self) -> SessionMessage | Exception:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class LineReader(ReadStream):
    """The server's read stream: one JSON-RPC message per line, parsed as the SDK's stdio transport does."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial.strip():
                    raise anyio.EndOfStream from None
                line = exc.partial  # a last line without its newline
            except asyncio.LimitOverrunError:
                await self._skip_line()
                return ValueError(f"a message is limited to {LINE_LIMIT} bytes")
            if line.strip():
                break
        try:
            message = types.jsonrpc_message_adapter.validate_json(line.decode("utf-8", "replace"), by_name=False)
        except Exception as exc:  # handed on, as the SDK transport does: logged by AnsweringReader, then skipped
            return exc
        return SessionMessage(message)

    async def _skip_line(self) -> None:
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self._reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    async def aclose(self) -> None:
        return None


class Flushed(asyncio.Protocol):
    """The write pipe's protocol: `flushed()` waits until everything written has reached the pipe.

    The transport's high-water mark is 0, so it pauses writing whenever anything is buffered and resumes
    only when the buffer is empty; an answer counts as sent once it is in the pipe, not in our memory.
    """

    def __init__(self) -> None:
        self._paused = False
        self._lost = False
        self._waiters: list[asyncio.Future[None]] = []

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def flushed(self) -> None:
        while self._paused and not self._lost:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        if self._lost:
            raise anyio.BrokenResourceError


class LineWriter:
    """The server's write stream: each message one line, written and flushed on the event loop."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: Flushed) -> None:
        self._transport = transport
        self._protocol = protocol

    async def send(self, item: SessionMessage, /) -> None:
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        if self._transport.is_closing():
            raise anyio.BrokenResourceError
        self._transport.write(data.encode("utf-8") + b"\n")  # whole lines: concurrent sends never interleave
        await self._protocol.flushed()

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


@contextlib.asynccontextmanager
async def pipe_server() -> AsyncIterator[tuple[LineReader, LineWriter]]:
    """Serve over fd 0 and fd 1 (both pipes: check `is_pipe` first) without worker threads."""
    loop = asyncio.get_running_loop()
    rfd, wfd = os.dup(0), os.dup(1)  # private copies; fd 0 and 1 are diverted while serving
    saved = [os.dup(0), os.dup(1)]
    rflags, wflags = os.get_blocking(rfd), os.get_blocking(wfd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    rfile, wfile = os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb", buffering=0)

    def leave_as_found() -> None:
        with contextlib.suppress(OSError):  # the descriptions are shared with the harness
            os.set_blocking(saved[0], rflags)
            os.set_blocking(saved[1], wflags)

    def on_sigterm(signum: int, frame: object) -> None:
        """Die of SIGTERM at once, as without a handler (even inside a daemon call), leaving the pipes as found."""
        leave_as_found()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: no handler, SIGTERM keeps its default
        previous = None
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    rtransport: asyncio.ReadTransport | None = None
    wtransport: asyncio.WriteTransport | None = None
    protocol = Flushed()
    try:
        rtransport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), rfile)
        wtransport, _ = await loop.connect_write_pipe(lambda: protocol, wfile)
        wtransport.set_write_buffer_limits(high=0)
        yield LineReader(reader), LineWriter(wtransport, protocol)
    finally:
        if wtransport is not None:  # answers whose send was cancelled at EOF are buffered whole: hand them over
            with anyio.move_on_after(FLUSH_AT_EXIT, shield=True), contextlib.suppress(anyio.BrokenResourceError):
                await protocol.flushed()  # bounded: a harness that stopped reading must not keep this process
        for transport in (wtransport, rtransport):
            if transport is not None:
                transport.close()
        leave_as_found()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        for fd, orig in ((0, saved[0]), (1, saved[1])):
            with contextlib.suppress(OSError):
                os.dup2(orig, fd)
            os.close(orig)


class Unanswered:
    """The ids of requests read but not yet answered, and a way to wait until there are none."""

    def __init__(self) -> None:
        self.ids: set[object] = set()  # JSON-RPC request ids
        self._empty = anyio.Event()
        self._empty.set()

    def add(self, request_id: object) -> None:
        self.ids.add(request_id)
        if self._empty.is_set():
            self._empty = anyio.Event()

    def discard(self, request_id: object) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._empty.set()

    async def answered(self) -> None:
        with anyio.move_on_after(ANSWER_AT_EOF):
            await self._empty.wait()


class AnsweringReader(ReadStream):
    """The server's read stream, wrapped: end of input waits until every request read has been answered.

    The SDK's dispatcher cancels the handlers still running when its read stream ends, so a client that writes its
    requests and closes stdin (`hivemem mcp < requests > answers`) lost the answers not yet written. A line that
    is not a JSON-RPC message, which the dispatcher skips silently, is logged to stderr here.
    """

    def __init__(self, inner: Receiving, unanswered: Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)  # the SDK streams carry the sender's context

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            await self._unanswered.answered()
            raise
        if isinstance(item, Exception):
            log.warning("hivemem mcp: skipped a line that is not a JSON-RPC message (%s)", reason(item))
        elif isinstance(item.message, types.JSONRPCRequest):
            self._unanswered.add(item.message.id)
        elif isinstance(item.message, types.JSONRPCNotification) and item.message.method == "notifications/cancelled":
            self._unanswered.discard((item.message.params or {}).get("requestId"))  # a cancelled one gets none
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()


def reason(exc: Exception) -> str:
    """Why a line was not a message, without echoing the line (it may hold anything)."""
    try:
        first = exc.errors()[0]  # type: ignore[attr-defined]  # pydantic's ValidationError: its str() holds the input
        return f"{first['msg']} at {'.'.join(map(str, first['loc'])) or 'the top level'}"[:200]
    except (AttributeError, IndexError, KeyError, TypeError):
        return str(exc)[:200] or type(exc).__name__  # the transports' own errors, such as a line over the limit


class AnsweringWriter:
    """The server's write stream, wrapped: a response or error written marks its request answered."""

    def __init__(self, inner: Sending, unanswered: Unanswered) -> None:
        self._inner = inner
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        try:
            await self._inner.send(item)
        finally:
            if isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError):
                self._unanswered.discard(item.message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def answering(read: Receiving,
              write: Sending) -> tuple[AnsweringReader, AnsweringWriter]:  # fmt: skip
    """Both streams wrapped so that the requests read before stdin closed are answered before the server stops."""
    unanswered = Unanswered()
    return AnsweringReader(read, unanswered), AnsweringWriter(write, unanswered)
