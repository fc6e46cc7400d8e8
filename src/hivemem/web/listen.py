"""How the UI meets connections: where it listens, how many it serves at once, how long a request may take to
arrive, and what becomes of a body nobody read (docs/decisions.md D231-D233).

Nothing here knows about pages or the guard; `server.py` builds the UI from these parts.
"""

from __future__ import annotations

import errno
import io
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

MAX_CONNECTIONS = 32  # served at once; a connection beyond them is answered 503 and closed, with no thread
READ_TIMEOUT_S = 10.0  # a request must arrive whole within this; an idle connection is closed after it
LINGER_S, LINGER_BYTES = 2.0, 1 << 20  # what is read and dropped before closing on a client still sending
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
LENGTH = re.compile(r"[0-9]{1,15}")
Server = TypeVar("Server", bound="BoundedServer")
Request = socket.socket | tuple[bytes, socket.socket]  # what socketserver hands a server (a socket, here)


class Deadline(io.RawIOBase):
    """A socket's reading side that gives up when the request's time is over, however slowly its bytes trickle in
    (a timeout per read alone lets a client sending a byte now and then hold its connection forever)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.until = 0.0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self.until - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long to arrive")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class BoundedServer(HTTPServer):
    """One listening socket. Each connection gets a thread while one of `slots` is free; beyond that it is
    answered 503 and closed at once, so a flood of connections never grows threads (D232)."""

    request_queue_size = 64  # the listen backlog: waiting there costs no thread

    def __init__(self, address: tuple[str, int], handler: type[TimedHandler], slots: threading.Semaphore,
                 read_timeout: float) -> None:  # fmt: skip
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)
        self.slots, self.read_timeout = slots, read_timeout

    def process_request(self, request: Request, client_address: object) -> None:
        if not self.slots.acquire(blocking=False):
            if isinstance(request, socket.socket):  # always, on a stream server (a datagram one hands a tuple)
                _busy(request)
            self.shutdown_request(request)
            return
        try:
            threading.Thread(target=self._serve, args=(request, client_address), daemon=True).start()
        except BaseException:
            self.slots.release()
            self.shutdown_request(request)
            raise

    def _serve(self, request: Request, client_address: object) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        """A browser that closes a connection mid-reply is not an error worth a traceback on the terminal."""


class TimedHandler(BaseHTTPRequestHandler):
    """One connection: each request must arrive whole within the server's read timeout (an idle connection is
    closed after it), its body is framed by one plain Content-Length, and what the page did not read of the body
    is read and dropped, or the connection closed: never parsed as the next request (D233)."""

    server: BoundedServer
    protocol_version = "HTTP/1.1"
    unread = 0  # bytes of the current request's body not read yet

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain reader setup() made: reads go through the deadline instead
        self.reader = Deadline(self.connection)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        self.reader.until = time.monotonic() + self.server.read_timeout
        self.unread = 0
        super().handle_one_request()

    def parse_request(self) -> bool:
        """The request line and headers, then its body's framing: a Transfer-Encoding (which this server does not
        decode) or a missing, repeated or malformed length is answered with an error that closes the connection."""
        if not super().parse_request():
            return False
        lengths = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding") is not None:
            self.send_error(501, "Transfer-Encoding is not supported: send a Content-Length")
            return False
        if len(lengths) > 1 or (lengths and not LENGTH.fullmatch(lengths[0].strip())):
            self.send_error(400, "The request's length is unclear")
            return False
        self.unread = int(lengths[0]) if lengths else 0
        return True

    def send_response(self, code: int, message: str | None = None) -> None:
        self.connection.settimeout(self.server.read_timeout)  # writing: a reader that stalls is dropped too
        super().send_response(code, message)

    def read_body(self) -> bytes:
        """The whole body; shorter only if the client closed. TimeoutError if it does not arrive in time."""
        data = self.rfile.read(self.unread)
        self.unread -= len(data)
        return data

    def drop_body(self, limit: int) -> None:
        """Read and drop what is left of the body, up to `limit` bytes; a longer one, or one that does not come in
        time, closes the connection after the answer instead."""
        if not self.unread or self.close_connection:
            return
        if self.unread > limit:
            self.close_connection = True
            return
        try:
            while self.unread and self.read_body():
                pass
        except TimeoutError:
            pass
        self.close_connection = self.close_connection or self.unread > 0

    def finish(self) -> None:
        super().finish()
        if self.unread or _pending(self.connection):  # closing on a client still sending: let it read the answer
            _linger(self.connection)


def _busy(request: socket.socket) -> None:
    try:
        request.setblocking(False)
        request.send(BUSY)
    except OSError:
        pass


def _pending(sock: socket.socket) -> bool:
    """Whether bytes wait unread (a socket with a timeout would wait for them instead: it is made non-blocking)."""
    try:
        sock.setblocking(False)
        return bool(sock.recv(1, socket.MSG_PEEK))
    except OSError:
        return False


def _linger(sock: socket.socket) -> None:
    """Half-close, then read and drop what still comes for a little while, so closing with unread bytes does not
    reset the connection before the client has read the answer (an RST can discard it on the client's side)."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline, left = time.monotonic() + LINGER_S, LINGER_BYTES
        while left > 0 and (wait := deadline - time.monotonic()) > 0:
            sock.settimeout(wait)
            chunk = sock.recv(min(left, 1 << 16))
            if not chunk:
                return
            left -= len(chunk)
    except OSError:
        pass


def listen(addresses: list[str], port: int, make: Callable[[tuple[str, int]], Server]) -> list[Server]:
    """A listener on each address, all on one port (D231). An address this machine does not have (no IPv6
    loopback) is skipped: nobody else can listen there either. With port 0, a port another process holds on a
    later address means trying another port, a few times."""
    for _ in range(8 if port == 0 else 1):
        first = make((addresses[0], port))
        try:
            return [first, *_also(addresses[1:], first.server_address[1], make)]
        except OSError as exc:
            first.server_close()
            if exc.errno != errno.EADDRINUSE or port:
                raise
    raise OSError(errno.EADDRINUSE, "no port is free on every loopback address")


def _also(addresses: list[str], port: int, make: Callable[[tuple[str, int]], Server]) -> list[Server]:
    servers: list[Server] = []
    try:
        for address in addresses:
            try:
                servers.append(make((address, port)))
            except OSError as exc:
                if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    raise
    except OSError:
        for server in servers:
            server.server_close()
        raise
    return servers
