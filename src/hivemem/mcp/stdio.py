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
import os
import signal
import stat
from collections.abc import AsyncIterator
from typing import Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

# A line longer than this is skipped unread and gets no answer (the SDK transport has no limit). A tool
# call's arguments are bounded by the daemon's 4 MiB frame; this leaves room to answer a larger call with
# `invalid_params.frame` rather than silence.
LINE_LIMIT = 64 * 1024 * 1024
FLUSH_AT_EXIT = 2.0  # seconds to wait at exit for a reader to take the last answers


def is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


class LineReader:
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
        except Exception as exc:  # the dispatcher logs it and reads on, as with the SDK transport
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
