"""A stdio transport for the SDK's server without worker threads, used when stdin and stdout are pipes or sockets.

The SDK's `stdio_server()` reads and writes through `anyio.wrap_file`: every line in and every line out (and
its flush) is a hop to a worker thread and back, plus two memory streams and two tasks between the pipe and
the server. On a 2-core machine that was most of the MCP overhead on a search (docs/decisions.md D45). Here
the read stream parses lines straight from an asyncio pipe reader and the write stream writes straight to an
asyncio pipe writer, on the event loop; the SDK's session, dispatch and message models are unchanged.

Like the SDK transport, fd 0 and fd 1 are diverted while serving (to the null device and to stderr), so a
stray print or a child process can never write into the protocol stream, and restored afterwards. Anything
that is not a pipe or a socket (a regular file, a terminal) keeps the SDK's own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

# A line longer than this is dropped unread (the SDK would log it as unparseable too). A tool call's
# arguments are bounded by the daemon's 4 MiB frame; this leaves room to answer a larger one with
# `invalid_params.frame` rather than silence.
LINE_LIMIT = 64 * 1024 * 1024


def streamable(fd: int) -> bool:
    """Whether the fd is a pipe or a socket: asyncio's pipe transports take those without side effects."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


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


class LineWriter:
    """The server's write stream: each message one line, written and drained on the event loop."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage, /) -> None:
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._writer.write(data.encode("utf-8") + b"\n")
        try:
            await self._writer.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise anyio.BrokenResourceError from None

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None


@contextlib.asynccontextmanager
async def pipe_server() -> AsyncIterator[tuple[LineReader, LineWriter]]:
    """Serve over fd 0 and fd 1 (both pipes or sockets: check `streamable` first) without worker threads."""
    loop = asyncio.get_running_loop()
    rfd, wfd = os.dup(0), os.dup(1)  # private copies; fd 0 and 1 are diverted while serving
    saved = [os.dup(0), os.dup(1)]
    rflags, wflags = os.get_blocking(rfd), os.get_blocking(wfd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    rfile, wfile = os.fdopen(rfd, "rb", buffering=0), os.fdopen(wfd, "wb", buffering=0)
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    rtransport: Any = None
    wtransport: Any = None
    try:
        rtransport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), rfile)
        wtransport, wprotocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, wfile)
        writer = asyncio.StreamWriter(wtransport, wprotocol, None, loop)
        yield LineReader(reader), LineWriter(writer)
    finally:
        for transport in (wtransport, rtransport):
            if transport is not None:
                transport.close()
        with contextlib.suppress(OSError):  # the descriptions are shared with the harness: leave them as found
            os.set_blocking(saved[0], rflags)
            os.set_blocking(saved[1], wflags)
        for fd, orig in ((0, saved[0]), (1, saved[1])):
            with contextlib.suppress(OSError):
                os.dup2(orig, fd)
            os.close(orig)
