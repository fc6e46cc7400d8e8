"""The review UI's server against another local user (docs/security.md, "The review UI"): a real `hivemem ui`
process, real sockets and a real headless Chromium. Each test is named after the attack it closes.

Item 1: the UI's credential works nowhere else. A page another user serves on another loopback port, visited by
the logged-in browser, receives nothing that works. Item 10: a refused request's body is never parsed as a request,
every connection has a read timeout, and the number of connections (so of threads) is bounded.
"""

from __future__ import annotations

import errno
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

import test_web
from conftest import Home, wait_for
from test_web import UI, assert_stopped, memory, start_ui

if TYPE_CHECKING:
    from playwright.sync_api import Browser

browser, ui = test_web.browser, test_web.ui  # the fixtures of the UI's other tests
BOUND = 32  # connections served at once (docs/ui.md); the UI refuses more with 503
PRIVATE_NAME = re.compile(r"hivemem-[a-z2-7]{24}\.localhost")


# --- item 1: the credential is useless anywhere else ----------------------------------------------------------


class Trap(ThreadingHTTPServer):
    """What another local user serves on another loopback port: it records every request a browser sends it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), TrapPage)
        self.port = self.server_address[1]
        self.seen: list[tuple[str, list[tuple[str, str]]]] = []
        self.lock = threading.Lock()

    def paths(self) -> set[str]:
        with self.lock:
            return {path for path, _ in self.seen}


class TrapPage(BaseHTTPRequestHandler):
    """A page with an image and a link on another name for the same port, and a redirect between the two names."""

    server: Trap

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.seen.append((self.path, list(self.headers.items())))
        port = self.server.port
        body = (f'<html><body><img src="http://localhost:{port}/pixel.png">'
                f'<a id="on" href="http://127.0.0.1:{port}/redirect">on</a></body></html>').encode()  # fmt: skip
        self.send_response(302 if self.path == "/redirect" else 200)
        if self.path == "/redirect":
            self.send_header("Location", f"http://localhost:{port}/landed")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def trap() -> Iterator[Trap]:
    server = Trap()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_item01_a_page_on_another_loopback_port_receives_no_working_credential(
    home: Home, browser: Browser, ui: UI, trap: Trap
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        tab = context.new_page()
        tab.goto(ui.login_url)
        assert urlsplit(tab.url).path == "/search"
        jar = context.cookies()
        [session] = [c["value"] for c in jar]
        tab.goto(f"{ui.origin}/memory/m1")
        csrf = tab.locator("input[name=csrf]").first.get_attribute("value")
        assert csrf
        tab.goto(f"http://127.0.0.1:{trap.port}/")  # the person follows a link to it
        tab.click("#on")  # a link there, then a redirect to another name of the same port
        assert urlsplit(tab.url).path == "/landed"
        tab.goto(f"http://localhost:{trap.port}/")
        wanted = {"/", "/pixel.png", "/redirect", "/landed", "/favicon.ico"}
        assert wait_for(lambda: wanted <= trap.paths(), 10), trap.paths()
    finally:
        context.close()
    with trap.lock:
        received = list(trap.seen)
    cookies = [v for _, headers in received for k, v in headers if k.lower() == "cookie"]
    for host in (f"{ui.host}:{ui.port}", f"127.0.0.1:{ui.port}", f"localhost:{ui.port}"):
        for cookie in cookies:  # replayed with the CSRF token of a page, as if it had leaked too
            assert ui.get("/search", headers={"Host": host, "Cookie": cookie}).status in (401, 421)
            fields = {"confirm": "m1", "csrf": csrf}
            purge = ui.post("/memory/m1/purge", fields, csrf=False, origin=f"http://{host}",
                            headers={"Host": host, "Cookie": cookie})  # fmt: skip
            assert purge.status in (401, 421), purge
    assert memory(home)["id"] == "m1"
    assert cookies == [], "the browser sent the other server a cookie"
    assert [c["domain"] for c in jar] == [ui.host], "a host-only cookie of the private name"
    everything = "\n".join(path + "".join(f"\n{k}: {v}" for k, v in headers) for path, headers in received)
    assert session not in everything and csrf not in everything, everything


def test_item01_the_ui_answers_only_on_the_private_name_its_login_url_carries(home: Home, ui: UI) -> None:
    assert PRIVATE_NAME.fullmatch(ui.host), ui.login_url
    url = urlsplit(ui.login_url)
    others = (f"127.0.0.1:{ui.port}", f"localhost:{ui.port}", f"[::1]:{ui.port}", f"other.localhost:{ui.port}",
              f"x.{ui.host}:{ui.port}", f"{ui.host}:{ui.port + 1}", ui.host, f"{ui.host}.:{ui.port}", "")  # fmt: skip
    for host in others:
        refused = ui.get(f"{url.path}?{url.query}", headers={"Host": host}, cookie=False)
        assert refused.status == 421 and "Set-Cookie" not in refused.headers, host
    ui.login()  # the refused requests did not spend the link
    session = ui.cookie.split("=", 1)[1]
    for host in others:
        for reply in (
            ui.get("/search", headers={"Host": host}),
            ui.get("/static/style.css", headers={"Host": host}),
            ui.post("/memory/m1/purge", {"confirm": "m1"}, origin=f"http://{host}", headers={"Host": host}),
        ):
            assert reply.status == 421, (host, reply.status)
            assert session not in reply.body and ui.csrf not in reply.body
    assert memory(home)["id"] == "m1"
    assert ui.get("/search", headers={"Host": f"{ui.host.upper()}:{ui.port}"}).status == 200, "names ignore case"


def test_item01_every_run_has_its_own_name(home: Home, ui: UI) -> None:
    second = start_ui(home)
    try:
        assert PRIVATE_NAME.fullmatch(second.host) and second.host != ui.host
    finally:
        assert_stopped(second)


def test_item01_nobody_else_can_listen_on_the_ipv6_loopback_of_the_port(ui: UI) -> None:
    """Chromium connects a .localhost name to [::1] first, then to 127.0.0.1: whoever listened on [::1] at the
    UI's port would receive the cookie. The UI holds that address too (or the machine has no IPv6 loopback, where
    nobody can listen on it)."""
    with pytest.raises(OSError) as caught, socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as squatter:
        squatter.bind(("::1", ui.port))
    assert caught.value.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT), caught.value


def test_item01_a_squatter_on_the_ipv6_loopback_of_a_given_port_stops_the_ui(home: Home) -> None:
    """With `--port`, a port someone else holds on [::1] is refused: the UI does not serve 127.0.0.1 alone."""
    try:
        squatter = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        squatter.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback, so nobody can listen there")
    with squatter:
        squatter.listen()
        port = squatter.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "hivemem", "ui", "--port", str(port)], env=home.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 2 and b"invalid_params.usage" in err and b"cannot listen" in err, (out, err)
    assert b"login?token=" not in out


# --- item 10: bodies, timeouts, bounded connections -----------------------------------------------------------


def smuggled_purge(ui: UI) -> bytes:
    """A complete, valid purge of m1: it does harm only if the server parses it as a request."""
    body = f"confirm=m1&csrf={ui.csrf}"
    return (f"POST /memory/m1/purge HTTP/1.1\r\nHost: {ui.host}:{ui.port}\r\nCookie: {ui.cookie}\r\n"
            f"Origin: {ui.origin}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}").encode()  # fmt: skip


def refused(ui: UI, kind: str, inner: bytes) -> bytes:
    """A request the UI refuses before it needs the body, whose body is `inner`."""
    host = f"{ui.host}:{ui.port}"
    length = f"Content-Length: {len(inner)}\r\n"
    edit = "POST /memory/m1/edit HTTP/1.1\r\n"
    head = {
        "no cookie": f"{edit}Host: {host}\r\n{length}",
        "another host": f"{edit}Host: 127.0.0.1:{ui.port}\r\nCookie: {ui.cookie}\r\n{length}",
        "a GET with a body": f"GET /search HTTP/1.1\r\nHost: {host}\r\n{length}",
        "chunked": f"{edit}Host: {host}\r\nCookie: {ui.cookie}\r\nTransfer-Encoding: chunked\r\n",
        "two lengths": f"{edit}Host: {host}\r\nCookie: {ui.cookie}\r\nContent-Length: 0\r\n{length}",
    }[kind]
    return head.encode() + b"\r\n" + inner


def exchange(ui: UI, data: bytes) -> list[tuple[int, str]]:
    """Send `data` then a last request asking to close; the status and content type of every response, in order."""
    last = f"GET /static/style.css HTTP/1.1\r\nHost: {ui.host}:{ui.port}\r\nConnection: close\r\n\r\n".encode()
    received = b""
    with socket.create_connection(("127.0.0.1", ui.port), timeout=30) as sock:
        sock.sendall(data)
        try:
            sock.sendall(last)
            while chunk := sock.recv(1 << 16):
                received += chunk
        except ConnectionResetError:  # the UI closed without reading all that was sent: what came is enough
            pass
    heads = re.findall(rb"HTTP/1\.1 (\d{3}) [^\r]*\r\n((?:[^\r]+\r\n)*)\r\n", received)
    return [(int(status), _content_type(block)) for status, block in heads]


def _content_type(block: bytes) -> str:
    match = re.search(rb"(?im)^content-type: ([^;\r]+)", block)
    return match.group(1).decode() if match else ""


@pytest.mark.parametrize("kind", ["no cookie", "another host", "a GET with a body", "chunked", "two lengths"])
def test_item10_a_refused_requests_body_is_never_parsed_as_a_request(home: Home, ui: UI, kind: str) -> None:
    ui.login()
    answers = exchange(ui, refused(ui, kind, smuggled_purge(ui)))
    assert memory(home)["id"] == "m1", "the purge in the body ran"
    assert answers, "the refusal was answered"
    assert answers[0][0] in (400, 401, 421, 501), answers
    assert answers[1:] in ([], [(200, "text/css")]), answers  # the next real request, if the connection stayed


def test_item10_an_unclear_length_closes_the_connection(ui: UI) -> None:
    ui.login()
    for kind in ("chunked", "two lengths"):
        assert [status for status, _ in exchange(ui, refused(ui, kind, b""))] in ([400], [501]), kind


def threads(ui: UI) -> int:
    return len(os.listdir(f"/proc/{ui.proc.pid}/task"))


def answered(socks: list[socket.socket]) -> int:
    """How many of `socks` the server has written to or closed (nothing is read from them)."""
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN)
    return len(poller.poll(0))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc (Linux)")
def test_item10_half_open_connections_do_not_grow_threads_beyond_the_bound(ui: UI) -> None:
    ui.login()
    before = threads(ui)
    partial = f"GET /search HTTP/1.1\r\nHost: {ui.host}:{ui.port}\r\nCookie: {ui.cookie}\r\n".encode()
    socks: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", ui.port), timeout=30)
            socks.append(sock)
            sock.sendall(partial)  # never finished
        refused_all = wait_for(lambda: answered(socks) >= len(socks) - BOUND, 20)
        held = threads(ui)
        assert held <= before + BOUND, f"{held} threads for {len(socks)} half-open connections"
        assert refused_all, f"only {answered(socks)} of {len(socks)} connections were refused or answered"
        firsts = [first_bytes(s) for s in socks if select.select([s], [], [], 0)[0]]
        assert all(f == b"" or f.startswith(b"HTTP/1.1 503 ") for f in firsts), {f[:40] for f in firsts}
    finally:
        for sock in socks:
            sock.close()
    assert wait_for(lambda: ui.get("/search").status == 200, 20), "a request is served once they are gone"
    assert wait_for(lambda: threads(ui) <= before, 20), "their threads ended"


def first_bytes(sock: socket.socket) -> bytes:
    try:
        return sock.recv(64)
    except ConnectionResetError:
        return b""


def test_item10_idle_and_slow_connections_are_closed_after_the_read_timeout(home: Home) -> None:
    running = start_ui(home, "--read-timeout", "1")
    try:
        running.login()
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as idle:
            assert idle.recv(1) == b"", "an idle connection is closed"
        assert time.monotonic() - start < 10
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as slow:
            start = time.monotonic()
            line = f"GET /search HTTP/1.1\r\nHost: {running.host}:{running.port}\r\n".encode()
            closed = dribble(slow, line * 10)
        assert closed, "a request trickling in a byte at a time is cut off"
        assert time.monotonic() - start < 10
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as kept:
            kept.sendall(f"GET /static/style.css HTTP/1.1\r\nHost: {running.host}:{running.port}\r\n\r\n".encode())
            assert kept.recv(16).startswith(b"HTTP/1.1 200 ")
            while kept.recv(1 << 16):  # after its answer, an idle keep-alive connection is closed too
                pass
        assert running.get("/search").status == 200
    finally:
        assert_stopped(running)


def dribble(sock: socket.socket, data: bytes) -> bool:
    """Send `data` a byte every 50 ms (a slow client, paced on purpose); true if the server closed meanwhile."""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return True
        if select.select([sock], [], [], 0.05)[0]:  # the server wrote or closed: it is done with this request
            return True
    return False
